"""The breakpoint states that snapshots and screenshots show (issue 36): a turn paused
before its calls, on the chat's card and in the decision queue, and the breakpoints screen
with a few set, and the dialog that sets one. Helpers for the breakpoint tests too."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from console.pause import is_pause
from console.rows import CallRow
from console.screens.breakpoints import BreakpointsScreen
from console.screens.main import MainScreen
from console.widgets.breakpoints_table import BreakpointsTable
from engine.api.break_models import NewBreakpoint
from engine.api.local import LocalClient
from engine.domain.breakpoints import Breakpoint
from tests.console.helpers import send, started, until
from tests.console.scenes import steady, undrawn


def point_ids() -> Callable[[], str]:
    """Breakpoint ids in order (b001, b002, ...) for engine.api.breakbook's `new_id`, so
    a snapshot does not show random ones."""
    counter = itertools.count(1)
    return lambda: f"b{next(counter):03d}"


async def set_point(pilot: Pilot, **kw: Any) -> Breakpoint:
    """A breakpoint set through the runtime's client (the fixed clock sets it at T0)."""
    client = LocalClient(pilot.app.host.runtime)  # type: ignore[attr-defined]
    return await client.add_breakpoint(NewBreakpoint(**kw))


def pauses(main: MainScreen) -> list[CallRow]:
    return [c for c in main.state.pending.values() if is_pause(c)]


async def paused(pilot: Pilot, main: MainScreen, at: str) -> CallRow:
    """Wait until a pause `at` ("inference", "call", "result") waits in the queue."""
    found = await until(pilot, lambda: pauses(main), f"a pause {at}",
                        ok=lambda ps: len(ps) == 1 and ps[0].args.get("at") == at)  # fmt: skip
    return found[0]


async def open_breakpoints(pilot: Pilot) -> BreakpointsScreen:
    """Press `b` (from the timeline: the chat input would take the letter)."""
    app = pilot.app
    app.main.query_one("#timeline").focus()  # type: ignore[attr-defined]
    await pilot.press("b")
    await until(pilot, lambda: isinstance(app.screen, BreakpointsScreen), "breakpoints screen")
    screen = app.screen
    assert isinstance(screen, BreakpointsScreen)
    await until(pilot, lambda: screen.listings > 0, "first listing")
    return screen


async def pause_card(pilot: Pilot) -> None:
    """A turn paused before its calls (a shell call and a calculation held), on the chat's
    card and in the queue, the queue focused."""
    main = await started(pilot)
    await set_point(pilot, kind="call", tool="shell", pattern="git push*", scope="thread",
                    thread_id="chat:main")  # fmt: skip
    await send(pilot, "calc 6*7 and run `git push origin main --force-with-lease`", click=False)
    await paused(pilot, main, "call")
    await until(pilot, lambda: undrawn(pilot.app), "the frame drawn", ok=lambda u: not u)
    await pilot.pause()
    main.query_one("#decisions").focus()
    await steady(pilot)


async def breakpoints(pilot: Pilot) -> None:
    """The breakpoints screen with four breakpoints, one of them hit."""
    main = await started(pilot)
    await set_point(pilot, kind="inference", scope="once", thread_id="chat:main")
    await set_point(pilot, kind="call", tool="shell", pattern="git push*", scope="room",
                    reason="pushes are reviewed")  # fmt: skip
    await set_point(pilot, kind="result", tool="http_get", scope="group", group="task")
    await set_point(pilot, kind="call", tool="write_file", pattern="notes/*.md",
                    scope="thread", thread_id="chat:release-notes")  # fmt: skip
    await send(pilot, "hello", click=False)
    await paused(pilot, main, "inference")
    screen = await open_breakpoints(pilot)
    table = screen.query_one(BreakpointsTable)
    await until(pilot, lambda: table.row_count, "four rows", ok=lambda n: n == 4)
    await until(pilot, lambda: [p.hits for p in table.points.values()], "the hit listed",
                ok=lambda hits: hits == [1, 0, 0, 0])  # fmt: skip
    await steady(pilot)


async def set_breakpoint(pilot: Pilot) -> None:
    """The breakpoint dialog, opened by `B` on a waiting shell call in the calls pane: its
    tool and exact command proposed, for its thread."""
    main = await started(pilot)
    await send(pilot, "run `git status --short` please", click=False)
    await until(pilot, lambda: main.state.pending, "the call waits")
    calls = main.query_one("#calls")
    calls.focus()
    await until(pilot, lambda: calls.row_count, "the call listed")  # type: ignore[attr-defined]
    await pilot.press("B")
    await until(pilot, lambda: type(pilot.app.screen).__name__, "the dialog",
                ok=lambda name: name == "SetBreakpointScreen")  # fmt: skip
    await steady(pilot)


BREAKPOINT_SCENES = {
    "pause_card": (pause_card, (160, 48), {}),
    "breakpoints": (breakpoints, (160, 48), {}),
    "set_breakpoint": (set_breakpoint, (160, 48), {}),
}
