"""The timeline: every step across all threads, one line each, drawn by `render_line`.

It never mounts a widget per line: it reads the bridge's bounded step deque and draws only
the visible lines, caching each drawn line by step and state. In follow mode the cursor
stays on the newest step; moving the cursor up freezes it, so the selection stays put
while lines arrive (`f` or `end` follows again).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.format import clock_time, duration
from console.glyphs import STATE_CLASSES, look
from console.state import StepRow


class Timeline(ScrollView, can_focus=True):
    """Steps across all threads, newest at the bottom."""

    BINDINGS = [
        Binding("j,down", "cursor(1)", "Down", show=False),
        Binding("k,up", "cursor(-1)", "Up", show=False),
        Binding("pagedown", "cursor(20)", "Page down", show=False),
        Binding("pageup", "cursor(-20)", "Page up", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Newest", show=False),
        Binding("f", "toggle_follow", "Follow"),
        Binding("enter", "open_turn", "Open turn"),
    ]
    COMPONENT_CLASSES = {"timeline--cursor", "timeline--dim", *STATE_CLASSES}

    follow: reactive[bool] = reactive(True)
    filter_text: reactive[str] = reactive("")

    class Selected(Message):
        """The cursor moved to a step of another turn."""

        def __init__(self, turn_id: str, thread_id: str) -> None:
            super().__init__()
            self.turn_id, self.thread_id = turn_id, thread_id

    class OpenTurn(Message):
        """Enter on a step: show its turn's calls."""

        def __init__(self, turn_id: str) -> None:
            super().__init__()
            self.turn_id = turn_id

    def __init__(self, steps: Sequence[StepRow], **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self._all = steps
        self._rows: Sequence[StepRow] = steps
        self._cursor_seq: int | None = None
        self._selected_turn = ""
        self._cache: dict[tuple[int, str, int, bool], Strip] = {}

    # -- data -------------------------------------------------------------------------------

    def refresh_rows(self) -> None:
        """New or changed steps arrived (at most once a frame)."""
        if self.filter_text:
            needle = self.filter_text.lower()
            self._rows = [r for r in self._all if needle in _haystack(r)]
        else:
            self._rows = self._all
        self.virtual_size = Size(self.size.width, len(self._rows))
        if len(self._cache) > 4_000:
            self._cache.clear()
        if self.follow and self._rows:
            self._move_to(len(self._rows) - 1, announce=False)
        self.refresh()

    def watch_filter_text(self) -> None:
        self.refresh_rows()

    @property
    def cursor_index(self) -> int | None:
        if self._cursor_seq is None or not self._rows:
            return None
        # Rows are in seq order: bisect by seq.
        lo, hi = 0, len(self._rows)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._rows[mid].seq < self._cursor_seq:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self._rows) else len(self._rows) - 1

    @property
    def cursor_row(self) -> StepRow | None:
        index = self.cursor_index
        return None if index is None else self._rows[index]

    def _move_to(self, index: int, announce: bool = True) -> None:
        """Put the cursor on row `index`; `announce` tells the screen about a new turn."""
        if not self._rows:
            return
        index = max(0, min(index, len(self._rows) - 1))
        row = self._rows[index]
        self._cursor_seq = row.seq
        self.scroll_to_region_y(index)
        if announce and row.turn_id != self._selected_turn:
            self._selected_turn = row.turn_id
            self.post_message(self.Selected(row.turn_id, row.thread_id))
        self.refresh()

    def scroll_to_region_y(self, index: int) -> None:
        height = self.scrollable_content_region.height or 1
        if index < self.scroll_y:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= self.scroll_y + height:
            self.scroll_to(y=index - height + 1, animate=False, immediate=True)

    # -- actions ----------------------------------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        index = self.cursor_index
        index = len(self._rows) - 1 if index is None else index + delta
        self.follow = index >= len(self._rows) - 1 and delta > 0
        self._move_to(index)

    def action_first(self) -> None:
        self.follow = False
        self._move_to(0)

    def action_last(self) -> None:
        self.follow = True
        self._move_to(len(self._rows) - 1)

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self.action_last()

    def action_open_turn(self) -> None:
        if (row := self.cursor_row) is not None:
            self.post_message(self.OpenTurn(row.turn_id))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y
        if 0 <= index < len(self._rows):
            self.follow = False
            self._move_to(index)

    def on_resize(self) -> None:
        self._cache.clear()
        self.virtual_size = Size(self.size.width, len(self._rows))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    # -- drawing ----------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        width = self.size.width
        if index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        row = self._rows[index]
        selected = row.seq == self._cursor_seq
        key = (row.seq, row.status + row.summary, width, selected)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._cache[key] = self._draw(row, width, selected)
        return strip

    def _draw(self, row: StepRow, width: int, selected: bool) -> Strip:
        state = look(row.status)
        dim = self.get_component_rich_style("timeline--dim")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{clock_time(row.at)} ", dim)
        text.append(f"{row.thread_id[:16]:<16} {row.turn_id[:12]:<12} ")
        text.append(f"{row.kind:<10} ")
        text.append(f"{state.glyph} {state.word:<9} ", self.get_component_rich_style(state.style))
        text.append(f"{duration(row.duration):>6} ", dim)
        text.append(row.summary)
        text.truncate(width, overflow="ellipsis", pad=True)
        base = self.rich_style
        if selected:
            base = base + self.get_component_rich_style("timeline--cursor")
        segments = list(text.render(self.app.console))
        segments = [s for s in segments if s.text != "\n"]
        return Strip(Segment.apply_style(segments, base), width).adjust_cell_length(width, base)


def _haystack(row: StepRow) -> str:
    return f"{row.thread_id} {row.turn_id} {row.kind} {row.status} {row.summary}".lower()
