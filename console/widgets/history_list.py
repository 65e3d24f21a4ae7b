"""A keyset-paged list of the history screen (runs, threads, turns, search hits).

A cursor list (cursor_lines.py: line-rendered, drawn lines cached), never a widget per row.
It holds the pages loaded so far; when the cursor or the scroll nears the last loaded row
and the query has more, it asks for the next page (`NeedMore`), once, until the page
arrives. Rows are `(key, cells)`, cells being `(text, component class)` pairs.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip

from console.format import visible
from console.glyphs import STATE_CLASSES
from console.history.view import BOLD, DIM, MATCH, ROLE_CLASSES, Cells
from console.widgets.cursor_lines import MOVES, CursorLines

NEAR_END = 5  # rows before the last loaded one where the next page is asked for
Row = tuple[str, Cells]


class HistoryList(CursorLines[Row]):
    """Rows by key, newest first, with a cursor; Enter chooses the row under it."""

    BINDINGS = [
        *MOVES,
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last loaded", show=False),
        Binding("enter", "choose", "Open"),
    ]
    CURSOR, NOTE = "history--cursor", DIM
    COMPONENT_CLASSES = {CURSOR, DIM, BOLD, MATCH, *STATE_CLASSES, *ROLE_CLASSES.values()}

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
        super().__init__(empty, **kw)
        self.more = False  # the query has a next page
        self.loading = False  # a page is on its way
        self._asked = False
        self._keys: dict[str, int] = {}

    # -- data -------------------------------------------------------------------------------

    def show(self, rows: list[Row], more: bool, keep: str | None = None) -> None:
        """Replace the rows (a new query); the cursor stays on `keep` if it is listed."""
        self.rows, self.more, self.loading, self._asked = list(rows), more, False, False
        self._keys = {key: i for i, (key, _) in enumerate(self.rows)}
        self.cursor = self._keys.get(keep, 0) if keep is not None else 0
        self._resized()
        self.scroll_to(y=max(0, self.cursor - 2), animate=False, immediate=True)
        if self.rows:
            self.post_message(self._highlighted(self.cursor))

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

    def _note(self) -> str | None:
        if self.loading:
            return "loading…"
        if self.more:
            return "more: n or scroll"
        return None if self.rows else self.empty

    def _want_more(self, last_seen: int) -> None:
        if self.more and not self._asked and last_seen >= len(self.rows) - NEAR_END:
            self._asked = self.loading = True
            self.post_message(self.NeedMore(self))
            self._resized()

    # -- the cursor and the drawing --------------------------------------------------------

    def _highlighted(self, index: int) -> Message:
        return self.Highlighted(self, self.rows[index][0])

    def _chosen(self, index: int) -> Message:
        return self.Chosen(self, self.rows[index][0])

    def _move(self, index: int) -> None:
        super()._move(index)
        if self.rows:
            self._want_more(self.cursor)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        bottom = int(new) + (self.scrollable_content_region.height or 1)
        self._want_more(bottom - 1)

    def _draw(self, row: Row, width: int, selected: bool) -> Strip:
        cells = ((" ", ""), *row[1])
        segments = [
            Segment(visible(text), self._style(name, selected)) for text, name in cells if text
        ]
        return self._fit(segments, width, selected)
