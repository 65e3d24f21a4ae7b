"""What turns spent, on the history screen (issue 33): each turn's cost (or, with no price,
its tokens) in the turns list, what it spent with its tokens in and out in the turn pane,
each step's spend in the steps pane, and a thread's total in the turns pane's title when
the list is of one thread. On a room seeded by the real engine with a fixed clock and ids."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from textual.pilot import Pilot

from console.screens.history import HistoryScreen
from console.widgets.history_list import HistoryList
from console.widgets.history_notes import HistoryNotes
from console.widgets.turn_detail import TurnDetail
from engine.config import Config, GroupSettings, ModelConfig, PriceSettings
from engine.domain.messages import Message
from engine.runtime import Runtime
from tests.console.conftest import build
from tests.console.helpers import SIZE, until
from tests.console.history_scenes import listed, open_history, pick, settled
from tests.console.scenes import steady
from tests.history_seed import fake_clock
from tests.scripted import Reply, ScriptedModel, add, after_tools

# Dollars per million tokens; the scripted model reports 10 in and 5 out an inference:
# $0.002 an inference (a price of 1 and 2 would be $0.00002, too small to tell apart).
PRICE = PriceSettings(input=100.0, output=200.0)
# The task group's offline model is free (its price given as none, not the room's).
PRICED = Config(model=ModelConfig(price=PRICE), groups={
    "task": GroupSettings(model=ModelConfig(provider="offline", price=None))})  # fmt: skip


def script(request: Any) -> Reply:
    """`add ...` calls `add`, then answers (two inferences); anything else is answered."""
    if after_tools(request.messages):
        return Reply(text="added: 5")
    if request.messages[-1].text.startswith("add"):
        return Reply(text="adding", calls=[("add", {"a": 2, "b": 3})])
    return Reply(text="hello to you")


def chat(thread: str, text: str) -> Message:
    return Message(origin="chat", channel="console", sender="op", thread_id=thread, text=text)


async def seed(room: Path) -> dict[str, str]:
    """chat-a: a turn before the room had a price (15 tokens, no price), then a priced
    `add` (two inferences, $0.004); chat-b: a priced answer ($0.002); task:x: the offline
    model's (free). Turn ids by name."""
    counter, clock = itertools.count(1), fake_clock()
    ids: dict[str, str] = {}
    for config in (Config(), PRICED):
        async with Runtime.open(
            room, kind="test", provider=ScriptedModel(script), tools=[add], config=config,
            clock=clock, ids=lambda p: f"{p}{next(counter)}",
        ) as rt:  # fmt: skip
            if "unpriced" not in ids:
                ids["unpriced"] = (await rt.run_turn(chat("chat-a", "hello"))).turn_id
                continue
            ids["added"] = (await rt.run_turn(chat("chat-a", "add two and three"))).turn_id
            ids["said"] = (await rt.run_turn(chat("chat-b", "hello"))).turn_id
            task = Message(origin="task", sender="self", thread_id="task:x", text="hello")
            ids["free"] = (await rt.run_turn(task)).turn_id
    return ids


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("spending") / "room"
    return path, anyio.run(seed, path)


@pytest.fixture
def seeded(room: Path, template: tuple[Path, dict[str, str]]) -> dict[str, str]:
    """The seeded room at `room` (a copy: the app writes to it); turn ids by name."""
    shutil.copytree(template[0], room)
    return template[1]


def cells_text(screen: HistoryScreen, turn_id: str) -> str:
    rows = dict(screen.query_one("#hist-turns", HistoryList).rows)
    return "".join(text for text, _ in rows[turn_id])


def notes_lines(screen: HistoryScreen) -> list[str]:
    return ["".join(text for text, _ in line) for line in screen.query_one(HistoryNotes).lines]


def steps_said(screen: HistoryScreen) -> list[str]:
    return [row.summary for row in screen.query_one(TurnDetail).steps]


def turns_title(screen: HistoryScreen) -> str:
    return str(screen.query_one("#hist-turns-pane").border_title)


async def thread_of_added(pilot: Pilot, ids: dict[str, str]) -> HistoryScreen:
    """Open the history, select the priced `add` turn and list only its thread (`t`)."""
    screen = await open_history(pilot)
    await pick(pilot, screen, ids["added"])
    await pilot.press("t")
    await until(pilot, lambda: listed(screen), "chat-a's turns",
                ok=lambda keys: keys == [ids["added"], ids["unpriced"]])  # fmt: skip
    await settled(pilot, screen)
    return screen


@pytest.mark.anyio
async def test_the_history_shows_what_turns_steps_and_a_thread_spent(seeded: dict[str, str],
                                                                     room: Path) -> None:  # fmt: skip
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_history(pilot)
        said = {name: cells_text(screen, seeded[name]) for name in seeded}
        assert said["added"].endswith(" 1 call   $0.0040 add two and three")
        assert said["said"].endswith(" 0 calls  $0.0020 hello")
        assert said["unpriced"].endswith(" 0 calls   15 tok hello")  # no price: its tokens
        assert said["free"].endswith(" 0 calls    $0.00 hello")  # the offline model is free

        await pick(pilot, screen, seeded["added"])
        assert "spent  $0.0040 · 30 tokens · 20 in · 10 out" in notes_lines(screen)
        assert steps_said(screen) == ["$0.0020 · 15 tok — calls add", "add succeeded",
                                      "$0.0020 · 15 tok — added: 5"]  # fmt: skip
        await pick(pilot, screen, seeded["unpriced"])
        assert "spent  15 tokens · no price · 10 in · 5 out" in notes_lines(screen)
        assert steps_said(screen) == ["15 tok — hello to you"]  # no price: no cost

        assert "spent" not in turns_title(screen)  # every thread: no thread's total
        screen = await thread_of_added(pilot, seeded)
        assert turns_title(screen) == (
            "Turns (2) · thread · thread spent $0.0040 · 45 tokens (15 no price)"
        )
        await app.shutdown()


def test_history_spent_snapshot(snap_compare, room: Path, seeded: dict[str, str]) -> None:
    async def scene(pilot: Pilot) -> None:
        """The priced `add` turn of chat-a, its thread's turns listed with their total."""
        await thread_of_added(pilot, seeded)
        await steady(pilot)

    assert snap_compare(build(room), terminal_size=SIZE, run_before=scene)
