"""The timeline: every step across all threads, one line each, drawn by `render_line`.

It never mounts a widget per line: it reads the bridge's bounded step deque and draws only
the visible lines, caching each drawn line by step and state (a bounded LRU, cleared when
the width or the theme changes), so a frame draws only the lines it has not drawn before.
Growing does not lay out the screen (see `lines.LineView`). In follow mode the
cursor stays on the newest step; moving the cursor up freezes it, so the selection stays
put while lines arrive (`f` or `end` follows again). `B` sets a breakpoint from the step
under the cursor (console/breaking.py); `F` forks from it, `P` replays its turn
(console/travel.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip

from console.breaking import BreakAt
from console.format import clock_time, duration, short_id, visible
from console.glyphs import STATE_CLASSES, look
from console.groups import group_of
from console.steps import StepRow, shown_status
from console.travel import ForkAt, ReplayOf
from console.widgets.lines import LineView

WIDE = 90  # cells; narrower, a line drops the turn and duration columns to keep the state
CACHED_LINES = 64  # a screen of lines and more; each drawn line is several GC-tracked objects
_UNDRAWN = object()


class Timeline(LineView, can_focus=True):
    """Steps across all threads, newest at the bottom."""

    # Priority: a leaf widget's keys are handled as the key arrives, not after it has
    # bubbled through every container (one event-loop turn each) up to the app.
    BINDINGS = [
        Binding("j,down", "cursor(1)", "Down", show=False, priority=True),
        Binding("k,up", "cursor(-1)", "Up", show=False, priority=True),
        Binding("pagedown", "cursor(20)", "Page down", show=False, priority=True),
        Binding("pageup", "cursor(-20)", "Page up", show=False, priority=True),
        Binding("home,g", "first", "First", show=False, priority=True),
        Binding("end,G", "last", "Newest", show=False, priority=True),
        Binding("f", "toggle_follow", "Follow", priority=True),
        Binding("enter", "open_turn", "Open turn", priority=True),
        Binding(
            "B",
            "break_here",
            "Break here",
            priority=True,
            tooltip="Set a breakpoint from this step: before its thread's inferences, "
            "or before its round's tool",
        ),
        Binding("F", "fork_here", "Fork from this step", show=False, priority=True,
                tooltip="A new thread from the record up to this step (console/screens/fork.py)"),
        Binding("P", "replay_turn", "Replay this turn", show=False, priority=True,
                tooltip="Answer this step's turn again on its recorded results"),
    ]  # fmt: skip
    COMPONENT_CLASSES = {"timeline--cursor", "timeline--dim", *STATE_CLASSES}

    follow: reactive[bool] = reactive(True)
    filter_text: reactive[str] = reactive("")
    # Only this thread group's steps ("" for all): a step's row carries its thread's group as
    # the runtime said it; a row without one is placed by its thread id (console.groups).
    group: reactive[str] = reactive("")
    # Only the steps of turns from this channel ("" for all; "console" for the console's).
    channel: reactive[str] = reactive("")

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

    def __init__(self, steps: Sequence[StepRow], *, empty: str = "no steps",
                 breakable: bool = False, **kw: object) -> None:  # fmt: skip
        super().__init__(**kw)  # type: ignore[arg-type]
        self.breakable = breakable  # `B` sets a breakpoint from a step (the main screen's)
        self._all = steps
        self.empty = empty  # what the first line says when there is no step at all
        self._rows: Sequence[StepRow] = steps
        self._cursor_seq: int | None = None
        self._selected_turn = ""
        self._cache: LRUCache[tuple[int, str, str, bool], Strip] = LRUCache(CACHED_LINES)
        self._matches: dict[int, tuple[str, bool]] = {}  # seq -> (status, matches filter)
        self._styles: dict[str, Style] | None = None
        self._top_seq: int | None = None  # the step drawn on the first line
        self._shown: dict[int, object] = {}  # screen line -> the key of what it shows
        self._line_width = 0

    # -- data -------------------------------------------------------------------------------

    def refresh_rows(self) -> None:
        """New or changed steps arrived (at most once a frame): scroll as the mode asks,
        then repaint only the lines that now show another step or state."""
        self._rows = rows = self._filtered() if self._filtering else self._all
        self.set_rows(len(rows))
        if not rows:
            self.refresh()
            return
        height = self.scrollable_content_region.height or 1
        if self.follow:
            self._cursor_seq = rows[-1].seq
            top = max(0, len(rows) - height)
        elif self._top_seq is not None:
            # Frozen: as the oldest steps are dropped, keep the same steps on screen.
            top = self._index_of(self._top_seq)
        else:
            top = int(self.scroll_y)
        if top != int(self.scroll_y):
            self.scroll_quietly(top)
        self._refresh_changed(height)

    def _refresh_changed(self, height: int) -> None:
        """Mark dirty the screen lines whose step or state differs from what they show."""
        rows, shown, top = self._rows, self._shown, int(self.scroll_y)
        width = self.size.width
        cursor = self._cursor_seq
        dirty = []
        for y in range(height):
            index = top + y
            if index < len(rows):
                row = rows[index]
                key: object = (row.seq, row.status, row.summary, row.seq == cursor)
            else:
                key = None
            if shown.get(y, _UNDRAWN) != key:
                dirty.append(Region(0, y, width, 1))
        if len(dirty) == height:
            self.refresh()
        elif dirty:
            self.refresh(*dirty)

    def _filtered(self) -> list[StepRow]:
        """The rows matching the filter; a row is tested again only when its state moves."""
        needle, matches, group = self.filter_text.lower(), self._matches, self.group
        channel = self.channel
        rows = []
        for row in self._all:
            seen = matches.get(row.seq)
            if seen is None or seen[0] != row.status:
                seen = matches[row.seq] = (
                    row.status,
                    needle in _haystack(row)
                    and (not group or group_of(row.thread_id, row.group) == group)
                    and (not channel or row.channel == channel),
                )
            if seen[1]:
                rows.append(row)
        if len(matches) > 2 * len(self._all) + 64:  # forget rows the deque dropped
            first = self._all[0].seq if self._all else 0
            self._matches = {k: v for k, v in matches.items() if k >= first}
        return rows

    def watch_filter_text(self) -> None:
        self._matches = {}
        self.refresh_rows()

    watch_group = watch_channel = watch_filter_text

    @property
    def _filtering(self) -> bool:
        return bool(self.filter_text or self.group or self.channel)

    def _index_of(self, seq: int) -> int:
        """The row with `seq`, or the next one after it (rows are in seq order)."""
        rows = self._rows
        lo, hi = 0, len(rows)
        while lo < hi:
            mid = (lo + hi) // 2
            if rows[mid].seq < seq:
                lo = mid + 1
            else:
                hi = mid
        return min(lo, len(rows) - 1)

    @property
    def rows(self) -> Sequence[StepRow]:
        """The steps shown: every step, or those the text, group and channel filters let
        through."""
        return self._rows

    @property
    def cursor_index(self) -> int | None:
        if self._cursor_seq is None or not self._rows:
            return None
        return self._index_of(self._cursor_seq)

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
        before, top = self.cursor_index, self.scroll_y
        self._cursor_seq = row.seq
        self.scroll_to_region_y(index)
        if announce and row.turn_id != self._selected_turn:
            self._selected_turn = row.turn_id
            self.post_message(self.Selected(row.turn_id, row.thread_id))
        if self.scroll_y == top and before is not None:  # only two lines change
            self.refresh_line(before)
            self.refresh_line(index)
        else:
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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`B` only where a breakpoint can be set from here (the main screen's pane, not
        history's)."""
        return self.breakable if action == "break_here" else True

    def action_break_here(self) -> None:
        if (row := self.cursor_row) is not None:
            self.post_message(BreakAt(step=row))

    def action_fork_here(self) -> None:
        if (row := self.cursor_row) is not None:
            self.post_message(ForkAt(row.turn_id, row.step_id, row.thread_id, row.group))

    def action_replay_turn(self) -> None:
        if (row := self.cursor_row) is not None:
            self.post_message(ReplayOf(row.turn_id, row.thread_id, row.group))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y
        if 0 <= index < len(self._rows):
            self.follow = False
            self._move_to(index)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        top = int(new)
        self._top_seq = self._rows[top].seq if top < len(self._rows) else None

    def on_resize(self) -> None:
        self._cache.clear()
        self._shown.clear()
        self.refresh_rows()  # following, the newest step stays in view at the new height

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._shown.clear()
        self._styles = None

    # -- drawing ----------------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        self._line_width = self.size.width  # once per paint, not once per line
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        width = self._line_width or self.size.width
        if index >= len(self._rows):
            self._shown[y] = None
            if index == 0:  # nothing to show: say why, dimmed
                return Strip([Segment(self._empty_text(), self._style("timeline--dim", False))]
                             ).adjust_cell_length(width, self._style("", False))  # fmt: skip
            return Strip.blank(width, self._style("", False))
        row = self._rows[index]
        selected = row.seq == self._cursor_seq
        key = (row.seq, row.status, row.summary, selected)
        self._shown[y] = key
        strip = self._cache.get(key)
        if strip is None or strip.cell_length != width:
            strip = self._draw(row, width, selected)
            self._cache[key] = strip
        return strip

    def _empty_text(self) -> str:
        if self._filtering:
            return "no step matches the filter (esc clears it)"
        return self.empty

    def _style(self, name: str, selected: bool) -> Style:
        """The style of a part of a line over the line's base (computed once per theme)."""
        styles = self._styles
        if styles is None:
            styles = self._styles = {}
        key = f"{name}/{selected}"
        style = styles.get(key)
        if style is None:
            style = self.rich_style
            if name:
                style += self.get_component_rich_style(name)
            if selected:  # the selection's colours over the part's (its text stays readable)
                style += self.get_component_rich_style("timeline--cursor")
            styles[key] = style
        return style

    def _draw(self, row: StepRow, width: int, selected: bool) -> Strip:
        state = look(shown_status(row))
        base, dim = self._style("", selected), self._style("timeline--dim", selected)
        summary = visible(" ".join(row.summary.split()) if "\n" in row.summary else row.summary)
        thread = visible(row.thread_id)
        where = (
            f"{thread[:16]:<16} {short_id(row.turn_id):<10} "
            if width >= WIDE
            else f"{thread[:12]:<12} "  # narrow: the calls pane's title names the turn
        )
        segments = [
            Segment(f"{clock_time(row.at)} ", dim),
            Segment(f"{where}{row.kind:<10} ", base),
            Segment(f"{state.glyph} {state.word:<9} ", self._style(state.style, selected)),
            Segment(f"{duration(row.duration):>6} " if width >= WIDE else "", dim),
            Segment(summary, base),
        ]
        strip = Strip(segments)
        if strip.cell_length > width:  # cut with an ellipsis, as `Text` would
            strip = Strip([*strip.crop(0, max(0, width - 1)), Segment("…", base)])
        return strip.adjust_cell_length(width, base)


def _haystack(row: StepRow) -> str:
    return f"{row.thread_id} {row.turn_id} {row.kind} {row.status} {row.summary}".lower()
