"""A keyset-paged list of the history screen (runs, threads, turns, search hits).

Line-rendered (`ScrollView` + `render_line`, drawn lines cached), never a widget per row.
It holds the pages loaded so far; when the cursor or the scroll nears the last loaded row
and the query has more, it asks for the next page (`NeedMore`), once, until the page
arrives. Rows are `(key, cells)`, cells being `(text, component class)` pairs.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.format import visible
from console.glyphs import STATE_CLASSES
from console.history.view import BOLD, DIM, MATCH, ROLE_CLASSES, Cells

NEAR_END = 5  # rows before the last loaded one where the next page is asked for
Row = tuple[str, Cells]


class HistoryList(ScrollView, can_focus=True):
    """Rows by key, newest first, with a cursor; Enter chooses the row under it."""

    BINDINGS = [
        Binding("j,down", "cursor(1)", "Down", show=False),
        Binding("k,up", "cursor(-1)", "Up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last loaded", show=False),
        Binding("enter", "choose", "Open"),
    ]
    COMPONENT_CLASSES = {"history--cursor", DIM, BOLD, MATCH, *STATE_CLASSES,
                         *ROLE_CLASSES.values()}  # fmt: skip

    class RowMessage(Message):
        """Something happened to the row `key` of `view`."""

        def __init__(self, view: HistoryList, key: str) -> None:
            super().__init__()
            self.view, self.key = view, key

        @property
        def control(self) -> HistoryList:
            return self.view

    class Highlighted(RowMessage):
        """The cursor moved to the row `key`."""

    class Chosen(RowMessage):
        """Enter (or a second click) on the row `key`."""

    class NeedMore(Message):
        """The operator nears the end of what is loaded and the query has more."""

        def __init__(self, view: HistoryList) -> None:
            super().__init__()
            self.view = view

        @property
        def control(self) -> HistoryList:
            return self.view

    def __init__(self, empty: str = "nothing here", **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.empty = empty
        self.rows: list[Row] = []
        self.more = False  # the query has a next page
        self.loading = False  # a page is on its way
        self.cursor = 0
        self._asked = False
        self._keys: dict[str, int] = {}
        self._cache: dict[tuple[int, bool], Strip] = {}
        self._styles: dict[tuple[str, bool], Style] = {}

    # -- data -------------------------------------------------------------------------------

    def show(self, rows: list[Row], more: bool, keep: str | None = None) -> None:
        """Replace the rows (a new query); the cursor stays on `keep` if it is listed."""
        self.rows, self.more, self.loading, self._asked = list(rows), more, False, False
        self._keys = {key: i for i, (key, _) in enumerate(self.rows)}
        self.cursor = self._keys.get(keep, 0) if keep is not None else 0
        self._resized()
        self.scroll_to(y=max(0, self.cursor - 2), animate=False, immediate=True)
        if self.rows:
            self.post_message(self.Highlighted(self, self.rows[self.cursor][0]))

    def extend(self, rows: list[Row], more: bool) -> None:
        """Append the next page."""
        for key, cells in rows:
            if key not in self._keys:  # a row that moved between pages is listed once
                self._keys[key] = len(self.rows)
                self.rows.append((key, cells))
        self.more, self.loading, self._asked = more, False, False
        self._resized()

    def current_key(self) -> str | None:
        """The key of the row under the cursor, if any."""
        return self.rows[self.cursor][0] if self.cursor < len(self.rows) else None

    def select(self, key: str) -> bool:
        """Put the cursor on `key` if it is loaded."""
        if (index := self._keys.get(key)) is None:
            return False
        self._move(index)
        return True

    def _resized(self) -> None:
        self._cache.clear()
        extra = 1 if self.more or self.loading or not self.rows else 0
        self.virtual_size = Size(self.size.width, len(self.rows) + extra)
        self.refresh()

    def _want_more(self, last_seen: int) -> None:
        if self.more and not self._asked and last_seen >= len(self.rows) - NEAR_END:
            self._asked = self.loading = True
            self.post_message(self.NeedMore(self))
            self._resized()

    # -- actions ----------------------------------------------------------------------------

    def _move(self, index: int) -> None:
        if not self.rows:
            return
        index = max(0, min(index, len(self.rows) - 1))
        before, self.cursor = self.cursor, index
        height = self.scrollable_content_region.height or 1
        if index < self.scroll_y:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= self.scroll_y + height:
            self.scroll_to(y=index - height + 1, animate=False, immediate=True)
        self._cache.pop((before, True), None)
        self._cache.pop((before, False), None)
        self._cache.pop((index, False), None)
        self.refresh()
        if index != before:
            self.post_message(self.Highlighted(self, self.rows[index][0]))
        self._want_more(index)

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self.rows) - 1)

    def action_choose(self) -> None:
        if (key := self.current_key()) is not None:
            self.post_message(self.Chosen(self, key))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y
        if 0 <= index < len(self.rows):
            again = index == self.cursor
            self._move(index)
            if again:
                self.action_choose()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        bottom = int(new) + (self.scrollable_content_region.height or 1)
        self._want_more(bottom - 1)

    def on_resize(self) -> None:
        self._resized()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()
        self._styles = {}

    # -- drawing ----------------------------------------------------------------------------

    def _style(self, name: str, selected: bool) -> Style:
        style = self._styles.get((name, selected))
        if style is None:
            style = self.rich_style
            if name:
                style += self.get_component_rich_style(name)
            if selected:  # the selection's colours over the part's (its text stays readable)
                style += self.get_component_rich_style("history--cursor")
            self._styles[(name, selected)] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        index = int(self.scroll_y) + y
        if index >= len(self.rows):
            if index == len(self.rows):
                text = ("loading…" if self.loading else "more: n or scroll" if self.more
                        else "" if self.rows else self.empty)  # fmt: skip
                if text:
                    return self._draw(((f" {text}", DIM),), width, False)
            return Strip.blank(width, self._style("", False))
        selected = index == self.cursor
        strip = self._cache.get((index, selected))
        if strip is None or strip.cell_length != width:
            strip = self._cache[(index, selected)] = self._draw(
                ((" ", ""), *self.rows[index][1]), width, selected
            )
        return strip

    def _draw(self, cells: Cells, width: int, selected: bool) -> Strip:
        base = self._style("", selected)
        strip = Strip([Segment(visible(text), self._style(name, selected))
                       for text, name in cells if text])  # fmt: skip
        if strip.cell_length > width:  # cut with an ellipsis, as the timeline does
            strip = Strip([*strip.crop(0, max(0, width - 1)), Segment("…", base)])
        return strip.adjust_cell_length(width, base)
