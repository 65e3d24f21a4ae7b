"""The tool calls of the selected turn: tool, state, arguments, result or error, timings,
as people read them (`$ make`, `exit 0 · 12 lines · ok`: console/tool_lines.py); the JSON
is in the details, Enter; `B` sets a breakpoint for the call's tool (console/breaking.py).

A line-rendered table (`ScrollView` + `render_line`), not a `DataTable`: the pane is
redrawn every time the operator moves to a step of another turn, and a `DataTable`
rebuild (clear, add rows, re-lay out the screen, draw each cell through Rich) costs
milliseconds that a key press behind it would wait for. Here a new turn is a handful of
plain rows and the lines on screen; the header stays put while the rows scroll.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip

from console.breaking import BreakAt
from console.format import duration, visible
from console.glyphs import STATE_CLASSES, look
from console.pause import is_pause, summary
from console.spinner import ran, spin
from console.state import CallRow
from console.tool_lines import outcome, what
from console.widgets.lines import LineView
from engine.lifecycle import CallStatus

COLUMNS = ("tool", "state", "arguments", "result / error", "took")
MIN_WIDTH = 8  # arguments and result shrink to this in a narrow pane, then lines are cut


class CallsTable(LineView, can_focus=True):
    """Calls of one turn; Enter opens the full arguments and result."""

    # Priority: a leaf widget's keys are handled as the key arrives, not after it has
    # bubbled through every container (one event-loop turn each) up to the app.
    BINDINGS = [
        Binding("j,down", "cursor_down", "Down", show=False, priority=True),
        Binding("k,up", "cursor_up", "Up", show=False, priority=True),
        Binding("enter", "details", "Details", priority=True),
        Binding("y", "copy('command')", "Copy command", priority=True),
        Binding("Y", "copy('output')", "Copy output", show=False, priority=True),
        Binding(
            "B",
            "break_here",
            "Break here",
            priority=True,
            tooltip="Set a breakpoint for this call's tool (its pattern proposed)",
        ),
    ]
    COMPONENT_CLASSES = {"calls--header", "calls--cursor", *STATE_CLASSES}

    class Copy(Message):
        """Copy the command (or the output) of call `call_id` (console/copying.py)."""

        def __init__(self, call_id: str, what: str) -> None:
            super().__init__()
            self.call_id, self.what = call_id, what

    class ShowDetails(Message):
        """Open the detail view of a call."""

        def __init__(self, call_id: str) -> None:
            super().__init__()
            self.call_id = call_id

    def __init__(self, breakable: bool = False, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.breakable = breakable  # `B` sets a breakpoint from a call (the main screen's)
        self.turn_id = ""
        self._rows: list[tuple[str, tuple[str, ...]]] = []  # (call id, plain cells)
        self._widths: list[int] = [cell_len(c) for c in COLUMNS]
        self.cursor = 0
        self._styles: dict[tuple[str, ...], Style] = {}

    # -- data -------------------------------------------------------------------------------

    def show(self, turn_id: str, calls: list[CallRow], now: float | None = None,
             frame: int = 0) -> None:  # fmt: skip
        """Draw the calls of `turn_id`, keeping the cursor on the same call; nothing is
        redrawn when they did not change. A running call's time is live (`now`), with the
        spinner's `frame`."""
        rows: list[tuple[str, tuple[str, ...]]] = [
            (call.call_id, (call.tool, *_pause_cells(call), outcome(call),
                            _took_cell(call, now, frame)))
            for call in calls
        ]  # fmt: skip
        if turn_id == self.turn_id and rows == self._rows:
            return
        keep = self.current_key()
        self.turn_id, self._rows = turn_id, rows
        widths = [cell_len(c) for c in COLUMNS]
        for _, cells in rows:
            for i, cell in enumerate(cells):
                widths[i] = max(widths[i], cell_len(_shown(i, cell)))
        self._widths = widths
        keys = [key for key, _ in rows]
        self.cursor = keys.index(keep) if keep in keys else min(self.cursor, max(0, len(rows) - 1))
        self.set_rows(len(rows) + 1)
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def current_key(self) -> str | None:
        """The call under the cursor, if any."""
        return self._rows[self.cursor][0] if self.cursor < len(self._rows) else None

    # -- actions ----------------------------------------------------------------------------

    def _move(self, index: int) -> None:
        if not self._rows:
            return
        self.cursor = max(0, min(index, len(self._rows) - 1))
        height = max(1, self.scrollable_content_region.height - 1)  # under the header
        if self.cursor < self.scroll_y:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= self.scroll_y + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)
        self.refresh()

    def action_cursor_down(self) -> None:
        self._move(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self._move(self.cursor - 1)

    def action_details(self) -> None:
        if (key := self.current_key()) is not None:
            self.post_message(self.ShowDetails(key))

    def action_copy(self, what: str) -> None:
        if (key := self.current_key()) is not None:
            self.post_message(self.Copy(key, what))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`B` only where a breakpoint can be set from here (the main screen's pane, not
        history's)."""
        return self.breakable if action == "break_here" else True

    def action_break_here(self) -> None:
        if (key := self.current_key()) is not None:
            self.post_message(BreakAt(call_id=key))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y - 1
        if event.y >= 1 and 0 <= index < len(self._rows):
            again = index == self.cursor
            self._move(index)
            if again:  # a click on the selected call opens it, as Enter does
                self.action_details()

    def on_resize(self) -> None:
        self.set_rows(len(self._rows) + 1)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = {}

    # -- drawing ----------------------------------------------------------------------------

    def _style(self, *names: str) -> Style:
        """The widget's style with component styles over it (computed once per theme)."""
        style = self._styles.get(names)
        if style is None:
            style = self.rich_style
            for name in names:
                style += self.get_component_rich_style(name)
            self._styles[names] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._line(COLUMNS, width, "calls--header", header=True)
        index = int(self.scroll_y) + y - 1
        if index >= len(self._rows):
            return Strip.blank(width, self._style())
        under = "calls--cursor" if index == self.cursor else ""
        return self._line(self._rows[index][1], width, under)

    def _line(self, cells: tuple[str, ...], width: int, under: str,
              header: bool = False) -> Strip:  # fmt: skip
        base = self._style(under) if under else self._style()
        segments = []
        for i, (cell, size) in enumerate(zip(cells, self._fitted(width), strict=True)):
            style = base
            if not header and i == 1:  # the state: glyph + word, coloured by the theme (the
                # selection's colours over it: its text stays readable)
                style = self._style(*filter(None, (look(cell).style, under)))
            text = visible(cell if header else _shown(i, cell))
            if cell_len(text) > size:
                text = set_cell_size(text, size - 1) + "…"
            segments += [Segment(" ", base), Segment(set_cell_size(text, size), style),
                         Segment(" ", base)]  # fmt: skip
        return Strip(segments).adjust_cell_length(width, base)

    def _fitted(self, width: int) -> list[int]:
        """Column widths for `width` cells: the wider of the arguments and the result gives
        way first, down to the other's width, then both share what is left."""
        widths = list(self._widths)
        over = sum(w + 2 for w in widths) - width
        if over > 0:
            args, result = widths[2], widths[3]
            room = max(2 * MIN_WIDTH, args + result - over)
            small = min(args, result)
            if room - small >= small:  # only the wider gives way
                big = room - small
            else:
                small = room // 2
                big = room - small
            widths[2], widths[3] = (big, small) if args >= result else (small, big)
        return widths


def _shown(column: int, cell: str) -> str:
    """The state column holds the status word; it is drawn as glyph + word."""
    if column != 1:
        return cell
    state = look(cell)
    return f"{state.glyph} {state.word}"


def _took(call: CallRow) -> float | None:
    return call.ended_at - call.created_at if call.ended_at is not None else None


def _took_cell(call: CallRow, now: float | None, frame: int) -> str:
    """How long the call took, or, running, how long it has run so far with a spinner."""
    if call.status == CallStatus.RUNNING and now is not None:
        return f"{spin(frame)} {ran(now - call.updated_at)}"  # since it started running
    return duration(_took(call))


def _pause_cells(call: CallRow) -> tuple[str, str]:
    """The state and arguments cells: a breakpoint's pause is "paused" while it waits,
    and says what it paused on."""
    if not is_pause(call):
        return call.status, what(call)
    return "paused" if call.status == CallStatus.SUSPENDED else call.status, summary(call)
