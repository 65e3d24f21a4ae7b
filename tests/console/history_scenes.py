"""History screen scenes for snapshots and screenshots, on a room seeded by the real engine.

`seed_room` fills a room through the Runtime with the scripted model of
`tests/history_seed.py` (a clock that ticks per call, fixed ids, fixed decision ids) before
the app opens it, so every timestamp and id on screen is the same from run to run.
`HISTORY_PREPARE` names the scenes that need it (the screenshot script calls it first).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from textual.pilot import Pilot

from console.screens.history import HistoryScreen
from console.widgets.history_list import HistoryList
from tests.console.helpers import SIZE, started, until
from tests.console.scenes import steady
from tests.history_seed import seed


def seed_room(room: Path) -> dict[str, str]:
    """`seed`, from synchronous code (a snapshot test, the screenshot script)."""
    return anyio.run(seed, room)


def listed(screen: HistoryScreen) -> list[str]:
    """The keys the turns pane lists, top to bottom."""
    return [key for key, _ in screen.query_one("#hist-turns", HistoryList).rows]


def shown_turn(screen: HistoryScreen) -> str | None:
    return screen.detail["turn"]["turn_id"] if screen.detail else None


async def open_history(pilot: Pilot) -> HistoryScreen:
    """Press `h` (from the timeline: the chat input would take the letter) and wait until
    the first page and its turn are shown."""
    main = await started(pilot)
    main.query_one("#timeline").focus()
    await pilot.press("h")
    await until(pilot, lambda: isinstance(pilot.app.screen, HistoryScreen), "history opens")
    screen = pilot.app.screen
    assert isinstance(screen, HistoryScreen)
    await settled(pilot, screen)
    return screen


async def settled(pilot: Pilot, screen: HistoryScreen) -> None:
    """Wait until no history read is running (the panes show what was asked)."""
    await until(pilot, lambda: screen.reader.history is not None, "history open")
    await pilot.pause()
    await until(pilot, lambda: not [w for w in pilot.app.workers
                                    if w.node is screen and w.name != "history"
                                    and not w.is_finished], "reads done")  # fmt: skip
    await pilot.pause()


async def pick(pilot: Pilot, screen: HistoryScreen, turn_id: str) -> None:
    """Put the turns list's cursor on `turn_id` and wait for its detail."""
    view = screen.query_one("#hist-turns", HistoryList)
    assert view.select(turn_id), f"{turn_id} is not listed"
    await until(pilot, lambda: shown_turn(screen) == turn_id, f"{turn_id} shown")
    await settled(pilot, screen)


async def history_list(pilot: Pilot) -> None:
    await open_history(pilot)
    await steady(pilot)


async def history_turn(pilot: Pilot) -> None:
    screen = await open_history(pilot)
    await pick(pilot, screen, "t8")  # approved by alice with edited arguments
    screen.query_one("#hist-calls").focus()
    await steady(pilot)


async def history_filter(pilot: Pilot) -> None:
    screen = await open_history(pilot)
    await pilot.press("s", "s")  # status: failed, then denied
    await until(pilot, lambda: listed(screen) == ["t6"], "only the denied turn")
    await settled(pilot, screen)
    await steady(pilot)


async def history_search(pilot: Pilot) -> None:
    screen = await open_history(pilot)
    await pilot.press("slash", *"ls", "enter")
    await until(pilot, lambda: screen.criteria.search == "ls" and len(listed(screen)) == 3,
                "three hits")  # fmt: skip
    await settled(pilot, screen)
    await steady(pilot)


async def history_empty(pilot: Pilot) -> None:
    await open_history(pilot)
    await steady(pilot)


HISTORY_SCENES: dict[str, tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict]] = {
    "history": (history_list, SIZE, {}),
    "history_turn": (history_turn, SIZE, {}),
    "history_filter": (history_filter, SIZE, {}),
    "history_search": (history_search, SIZE, {}),
    "history_empty": (history_empty, SIZE, {}),
}
# Scenes whose room is filled before the app opens it (the app then owns it).
HISTORY_PREPARE: dict[str, Callable[[Path], object]] = {
    name: seed_room for name in HISTORY_SCENES if name != "history_empty"
}
