"""The base of the console's cursor lists (the history's lists, the diff's rows).

A list of rows with a cursor, drawn line by line (`ScrollView` + `render_line`, drawn lines
cached), never a widget per row. The base moves the cursor (keys, clicks: a second click on
the row under the cursor chooses it), keeps it in view, caches the drawn lines and the
styles, and draws the note after the rows (loading, nothing here). A subclass gives its
rows, how one is drawn (`_draw`), its messages (`_highlighted`, `_chosen`), the note, its
component classes with the cursor's (`CURSOR`, `NOTE`) and its bindings: `MOVES` and its own,
in its own `BINDINGS` (the help screen and the palette read each class's own list).

Not a `LineView` (lines.py): these lists change when the operator moves, not many times a
second, so they lay out and move their scrollbar as any `ScrollView` does.
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.format import visible

RowT = TypeVar("RowT")

MOVES = [
    Binding("j,down", "cursor(1)", "Down", show=False),
    Binding("k,up", "cursor(-1)", "Up", show=False),
    Binding("pagedown", "page(1)", "Page down", show=False),
    Binding("pageup", "page(-1)", "Page up", show=False),
]


class CursorLines(ScrollView, Generic[RowT], can_focus=True):
    """Rows with a cursor; Enter (`action_choose`) or a second click chooses the row."""

    CURSOR: ClassVar[str]  # the component class drawn over the row under the cursor
    NOTE: ClassVar[str]  # the component class of the note after the rows

    def __init__(self, empty: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.empty = empty
        self.rows: list[RowT] = []
        self.cursor = 0
        self._cache: dict[tuple[int, bool, int], Strip] = {}
        self._styles: dict[tuple[str, bool], Style] = {}

    # -- what a subclass gives ----------------------------------------------------------------

    def _draw(self, row: RowT, width: int, selected: bool) -> Strip:
        """`row` drawn in `width` cells."""
        raise NotImplementedError

    def _highlighted(self, index: int) -> Message:
        """The message that the cursor moved to row `index`."""
        raise NotImplementedError

    def _chosen(self, index: int) -> Message:
        """The message that row `index` is chosen."""
        raise NotImplementedError

    def _note(self) -> str | None:
        """The line after the rows: None for none, "" for a blank one."""
        return None if self.rows else self.empty

    # -- data -------------------------------------------------------------------------------

    def _resized(self) -> None:
        self._cache.clear()
        extra = 0 if self._note() is None else 1
        self.virtual_size = Size(self.size.width, len(self.rows) + extra)
        self.refresh()

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
        self.refresh()
        if index != before:
            self.post_message(self._highlighted(index))

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self.rows) - 1)

    def action_choose(self) -> None:
        if self.cursor < len(self.rows):
            self.post_message(self._chosen(self.cursor))

    def on_click(self, event: events.Click) -> None:
        index = int(self.scroll_y) + event.y
        if 0 <= index < len(self.rows):
            again = index == self.cursor
            self._move(index)
            if again:
                self.action_choose()

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
            if selected:  # the cursor's colours over the part's (its text stays readable)
                style += self.get_component_rich_style(self.CURSOR)
            self._styles[(name, selected)] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        index = int(self.scroll_y) + y
        if index >= len(self.rows):
            if index == len(self.rows) and (note := self._note()):
                segment = Segment(f" {visible(note)}", self._style(self.NOTE, False))
                return self._fit([segment], width, False)
            return Strip.blank(width, self._style("", False))
        selected = index == self.cursor
        key = (index, selected, width)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._cache[key] = self._draw(self.rows[index], width, selected)
        return strip

    def _fit(self, segments: list[Segment], width: int, selected: bool) -> Strip:
        """`segments` in `width` cells: cut with an ellipsis, or padded."""
        base = self._style("", selected)
        strip = Strip(segments)
        if strip.cell_length > width:
            strip = Strip([*strip.crop(0, max(0, width - 1)), Segment("…", base)])
        return strip.adjust_cell_length(width, base)
