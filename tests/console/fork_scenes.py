"""Fork and replay scenes (issue 37) for snapshots, screenshots and Pilot tests.

The console hosts the room with the offline model (fixed clock and ids): "calc 2+3" makes
a turn of three steps (an inference that calls calc, its round, the answer). `F` on the
first step opens the fork dialog, which shows the entries it copies (the message, the
call, its result); the scene edits the result to 41. `P` on a turn opens the replay
dialog, here in the history of a room with a turn of origin invoke (`invoked_room`, made
before the console opens it: `FORK_PREPARE`). The fork's and replay's thread ids end in
4 random hex digits: `fixed_threads` makes them `beef` (the tests and the screenshot
script install it).
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from textual.pilot import Pilot
from textual.widgets import TextArea

from console.screens.fork import EntryEditor, ForkScreen
from console.screens.history import HistoryScreen
from console.screens.main import MainScreen
from console.screens.replay import ReplayScreen
from console.widgets.history_list import HistoryList
from console.widgets.timeline import Timeline
from engine.api import forkbook
from engine.config import Config
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.console.helpers import SIZE, send, started, until
from tests.console.history_scenes import open_history
from tests.console.scenes import steady
from tests.history_seed import fake_clock


class _FixedUuid:
    """`uuid` as forkbook uses it, with uuid4 always the same (thread ids end in `beef`)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(uuid, name)

    @staticmethod
    def uuid4() -> uuid.UUID:
        return uuid.UUID("beef0000-0000-4000-8000-000000000000")


def fixed_threads() -> Callable[[], None]:
    """Make the fork's and replay's thread ids fixed (`~fork-beef`); returns the undo."""
    saved = forkbook.uuid
    forkbook.uuid = _FixedUuid()  # type: ignore[assignment]

    def undo() -> None:
        forkbook.uuid = saved

    return undo


def invoked_room(room: Path, text: str = "calc 2+3") -> str:
    """A room with one turn of origin invoke (`text` on t1, the offline model; a call it
    waits for is approved), made before the console opens it (a replay of a console chat
    turn is refused for now: the engine's replay keeps the turn's origin, and origin chat
    needs a channel); its id."""

    async def run() -> str:
        counter = itertools.count(101)  # (not the console's own ids: t_001, ...)
        async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0),
                                clock=fake_clock(), config=Config(),
                                ids=lambda p: f"{p}{next(counter)}") as rt:  # fmt: skip
            message = Message(origin="invoke", sender="cli", thread_id="t1", text=text)
            out = await rt.run_turn(message)
            for call in await rt.pending():
                await rt.decide(Decision.approve(call.call_id, seen=call.args))
                out = await rt.wait_turn(out.turn_id)
            assert out.status == "done", out
            return out.turn_id

    return anyio.run(run)


async def calculated(pilot: Pilot) -> MainScreen:
    """Start, ask "calc 2+3" and wait until its turn has ended."""
    main = await started(pilot)
    await send(pilot, "calc 2+3")
    await until(pilot, lambda: main.state.thread("chat:main").entries, "the answer",
                ok=lambda e: bool(e) and e[-1].text == "`calc` returned: 5")  # fmt: skip
    await until(pilot, lambda: main.state.counts(), "the turn ends", ok=lambda c: c == (0, 0))
    return main


async def on_first_step(pilot: Pilot, main: MainScreen) -> Timeline:
    """The timeline has the keyboard, its cursor on the first step (the call's inference)."""
    timeline = main.query_one("#timeline", Timeline)
    timeline.focus()
    await pilot.press("home")
    await until(pilot, lambda: timeline.cursor_row, "the first step selected",
                ok=lambda row: row is not None and row.kind == "inference")  # fmt: skip
    return timeline


async def fork_dialog(pilot: Pilot) -> ForkScreen:
    """`F` on the first step; the dialog once it has read what the fork copies."""
    main = await calculated(pilot)
    await on_first_step(pilot, main)
    await pilot.press("F")
    await until(pilot, lambda: isinstance(pilot.app.screen, ForkScreen), "the fork dialog")
    screen = pilot.app.screen
    assert isinstance(screen, ForkScreen)
    await until(pilot, lambda: screen.upto, "the entries read", ok=lambda n: n is not None)
    return screen


async def edit_entry(pilot: Pilot, text: str) -> None:
    """`e` on the highlighted entry, its text replaced by `text`, kept (ctrl+s)."""
    fork = pilot.app.screen
    await pilot.press("e")
    await until(pilot, lambda: isinstance(pilot.app.screen, EntryEditor), "the entry's editor")
    pilot.app.screen.query_one(TextArea).text = text
    await pilot.press("ctrl+s")
    await until(pilot, lambda: pilot.app.screen is fork, "back in the fork dialog")


async def fork_edited(pilot: Pilot) -> None:
    await fork_dialog(pilot)
    await edit_entry(pilot, "41")
    await steady(pilot)


async def replay_dialog(pilot: Pilot) -> ReplayScreen:
    """In the history (a room made by `invoked_room`), `P` on its turn; the dialog with
    another model typed."""
    await open_history(pilot)
    await pilot.press("P")
    await until(pilot, lambda: isinstance(pilot.app.screen, ReplayScreen), "the replay dialog")
    screen = pilot.app.screen
    assert isinstance(screen, ReplayScreen)
    await pilot.press(*"offline:b")
    return screen


async def replay_typed(pilot: Pilot) -> None:
    await replay_dialog(pilot)
    await steady(pilot)


async def history_tree(pilot: Pilot) -> None:
    """A fork (its result edited) and a replay made, then the history: the threads pane
    draws them beneath chat:main."""
    await fork_dialog(pilot)
    await edit_entry(pilot, "41")
    await pilot.press("ctrl+s")
    main = pilot.app.main  # type: ignore[attr-defined]
    await until(pilot, lambda: main.state.counts(), "the fork's turn ends",
                ok=lambda c: c == (0, 0) and main.thread_id != "chat:main")  # fmt: skip
    main.query_one("#timeline").focus()
    await pilot.press("h")
    await until(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen), "history opens")
    screen = pilot.app.screen
    threads = screen.query_one("#hist-threads", HistoryList)
    await until(pilot, lambda: len(threads.rows), "the tree", ok=lambda n: n == 2)
    await steady(pilot)


FORK_SCENES: dict[str, tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict]] = {
    "fork": (fork_edited, SIZE, {}),
    "replay": (replay_typed, SIZE, {}),
    "history_forks": (history_tree, SIZE, {}),
}
FORK_PREPARE: dict[str, Callable[[Path], object]] = {"replay": invoked_room}
