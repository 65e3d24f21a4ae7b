"""Diff view scenes (issue 37) for snapshots and screenshots, on a room made by the engine.

`diff_room` runs two turns through the real Runtime (a fixed clock that ticks per call,
fixed ids): turn t2 on thread `original`, a scripted model's add(2, 3) and a shell call
approved by alice, and after it, on another model whose script changed, turn t102 on
`replay`: add(2, 4), an extra add(1, 1), the same shell call, other answers. The scene opens
the history, marks t2 (`m`), puts the cursor on t102 and presses `d`.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from textual.pilot import Pilot

from console.screens.diff import DiffScreen
from engine.config import Config
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.base import ModelRequest
from engine.runtime import Runtime
from tests.console.helpers import SIZE, until
from tests.console.history_scenes import open_history, pick
from tests.console.scenes import steady
from tests.history_seed import fake_clock
from tests.scripted import Reply, ScriptedModel, add, after_tools, shell

A, B = "t2", "t102"


def original(request: ModelRequest) -> Reply:
    if request.messages[-1].role == "user":
        return Reply(text="adding", calls=[("add", {"a": 2, "b": 3}), ("shell", {"command": "ls"})])
    return Reply(text="; ".join(m.text for m in after_tools(request.messages)))


def changed(request: ModelRequest) -> Reply:
    if request.messages[-1].role == "user":
        return Reply(text="adding", calls=[("add", {"a": 2, "b": 4}), ("add", {"a": 1, "b": 1}),
                                           ("shell", {"command": "ls"})])  # fmt: skip
    return Reply(text="got " + "; ".join(m.text for m in after_tools(request.messages)))


class OtherModel(ScriptedModel):
    model = "scripted-2"


async def _turns(room: Path) -> None:
    clock = fake_clock()
    for first, model, thread in ((1, ScriptedModel(original), "original"),
                                 (101, OtherModel(changed), "replay")):  # fmt: skip
        counter = itertools.count(first)
        async with Runtime.open(room, kind="test", provider=model, tools=[add, shell],
                                config=Config(), clock=clock,
                                ids=lambda p, c=counter: f"{p}{next(c)}") as rt:  # fmt: skip
            out = await rt.run_turn(Message(origin="chat", channel="console", sender="op",
                                            thread_id=thread, text="add two and three"))  # fmt: skip
            [pending] = await rt.pending()
            await rt.decide(Decision.approve(pending.call_id, decided_by="alice",
                                             id=f"d{first}"))  # fmt: skip
            await rt.wait_turn(out.turn_id)


def diff_room(room: Path) -> None:
    """The room of the diff scenes (see the module), from synchronous code."""
    anyio.run(_turns, room)


async def open_diff(pilot: Pilot) -> DiffScreen:
    """From the history: mark A, put the cursor on B, `d`; wait until the diff is drawn."""
    history = await open_history(pilot)
    await pick(pilot, history, A)
    await pilot.press("m")
    await pick(pilot, history, B)
    await pilot.press("d")
    await until(pilot, lambda: isinstance(pilot.app.screen, DiffScreen), "the diff opens")
    screen = pilot.app.screen
    assert isinstance(screen, DiffScreen)
    await until(pilot, lambda: screen.diff is not None, "the diff is read")
    return screen


async def diff_view(pilot: Pilot) -> None:
    await open_diff(pilot)
    await pilot.press("n")  # the first difference: the changed add (its changes said below)
    await steady(pilot)


async def diff_row(pilot: Pilot) -> None:
    await open_diff(pilot)
    await pilot.press("n", "enter")
    await until(pilot, lambda: type(pilot.app.screen).__name__ == "DiffRowScreen", "the row")
    await steady(pilot)


DIFF_SCENES: dict[str, tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict]] = {
    "diff": (diff_view, SIZE, {}),
    "diff_row": (diff_row, SIZE, {}),
}
DIFF_PREPARE: dict[str, Callable[[Path], object]] = dict.fromkeys(DIFF_SCENES, diff_room)
