"""The breakpoints screen (`b`): every breakpoint set, where it pauses turns (before an
inference, before a matching call, after a matching result), for which turns (once, a
thread, a group, the room), how often it paused one and who set it when.

It reads them through the bridge (the runtime's client: this process's or the owner's)
when opened, after a change, and `REFRESH` times a second while shown (hits grow as turns
pause). `a` sets a new one (the breakpoint dialog, blank but for the chat's thread); `x`
or Delete removes the selected one after a confirmation whose default is No (the pauses
it made still wait for their decision).
"""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen

from console.breaking import Origin
from console.bridge import Bridge
from console.format import counted, set_title
from console.groups import group_of
from console.screens.confirm import ConfirmScreen
from console.screens.set_breakpoint import set_breakpoint
from console.widgets.breakpoints_table import BreakpointsTable, reach, where
from console.widgets.key_bar import KeyBar
from console.widgets.rules_table import when
from console.widgets.text import Static
from engine.domain.breakpoints import Breakpoint

REFRESH = 1  # listings a second while the screen is shown


class BreakpointsScreen(Screen[None]):
    """Opened by `b` (or the palette's "Breakpoints"); Esc or q closes it."""

    BINDINGS = [Binding("escape,q", "close", "Close")]

    class Changed(Message):
        """A breakpoint was set (`added`) or removed: turns pause so from now on."""

        def __init__(self, point_id: str, added: bool) -> None:
            super().__init__()
            self.point_id, self.added = point_id, added

    def __init__(self, bridge: Bridge, thread_id: str = "", workspace: Path | None = None) -> None:
        super().__init__()
        self.bridge, self.thread_id, self.workspace = bridge, thread_id, workspace
        self.listings = 0  # how many times the screen read the breakpoints (tests look)

    def compose(self) -> ComposeResult:
        yield Static(id="breakpoints-summary")
        with Vertical(id="breakpoints-pane", classes="pane"):
            yield BreakpointsTable(id="breakpoints")
        yield Static(
            "A breakpoint pauses a turn before an inference, before a matching call or after "
            "its result. The pause waits in the decision queue: a continues, n steps (one "
            "inference or one tool round), e edits what it holds, x ends the turn. a sets a "
            "breakpoint here (or B on a call or a step), x removes one.",
            classes="hint", id="breakpoints-hint",
        )  # fmt: skip
        yield KeyBar()

    def on_mount(self) -> None:
        set_title(self.query_one("#breakpoints-pane"), "Breakpoints")
        self.refresh_points()
        self.set_interval(1 / REFRESH, self.refresh_points, name="breakpoints")
        self.query_one(BreakpointsTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def refresh_points(self) -> None:
        """Read the breakpoints (in a worker: an attached console asks the owner), redraw."""
        self.run_worker(self._refresh, group="breakpoints", exclusive=True)  # type: ignore[arg-type]

    async def _refresh(self) -> None:
        summary = self.query_one("#breakpoints-summary", Static)
        try:
            points = await self.bridge.api.breakpoints()
        except Exception as exc:  # no runtime, an owner gone: said on the screen
            summary.update(f" breakpoints: {exc}")
            return
        self.listings += 1
        active = sum(not p.spent for p in points)
        hits = sum(p.hits for p in points)
        summary.update(f" {counted(len(points), 'breakpoint')}, {active} active · "
                       f"{counted(hits, 'pause')} made")  # fmt: skip
        self.query_one(BreakpointsTable).show_points(points)
        set_title(self.query_one("#breakpoints-pane"), f"Breakpoints ({len(points)})")

    @on(BreakpointsTable.Add)
    def add_asked(self, event: BreakpointsTable.Add) -> None:
        event.stop()
        self._add()

    @work(group="add")
    async def _add(self) -> None:
        origin = Origin(self.thread_id, group_of(self.thread_id) if self.thread_id else "")
        point = await set_breakpoint(self, self.bridge, origin, self.workspace)
        if point is not None:
            self.post_message(self.Changed(point.id, True))
        self.refresh_points()

    @on(BreakpointsTable.Remove)
    def remove_asked(self, event: BreakpointsTable.Remove) -> None:
        event.stop()
        self._remove(event.point)

    @work(group="remove")
    async def _remove(self, point: Breakpoint) -> None:
        made = f"set by {point.made_by} at {when(point.made_at)}, {counted(point.hits, 'pause')}"
        ok = await self.app.push_screen_wait(ConfirmScreen(
            f"Remove breakpoint {point.id} ({where(point)}, {reach(point)}; {made})? Turns no "
            "longer pause there; pauses it made still wait for you.",
            yes="Remove", no="Keep"))  # fmt: skip
        if not ok:
            return
        try:
            await self.bridge.api.remove_breakpoint(point.id, "operator")
        except Exception as exc:  # shown to the operator, never a crash
            self.notify(f"Removing breakpoint {point.id} failed: {exc}", severity="error")
        else:
            self.notify(f"Breakpoint {point.id} removed: {where(point)}, {reach(point)}.",
                        title="Breakpoints")  # fmt: skip
            self.post_message(self.Changed(point.id, False))
        self.refresh_points()
