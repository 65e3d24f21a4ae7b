"""The rows of a turn diff (engine/domain/turn_diff.py), A's and B's side by side.

One line a row: the mark (`=` the same, `~` changed, `<` only in A, `>` only in B), then
A's side and B's side, each its kind or tool and its text cut to the column. Both sides are
one widget, so moving and scrolling moves them together. Line-rendered (`ScrollView` +
`render_line`, drawn lines cached); changed and one-sided rows take the theme's colours,
and every row keeps its mark, so nothing is said by colour alone. Text from models and
tools is drawn as text, its control characters shown escaped.
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
from engine.domain.turn_diff import DiffRow, Entry

LABEL = 12  # cells of a side's kind or tool
MARK_CLASSES = {"same": "diff--same", "changed": "diff--changed", "only_a": "diff--only-a",
                "only_b": "diff--only-b"}  # fmt: skip
DIM, CURSOR = "diff--dim", "diff--cursor"


def side_text(entry: Entry | None) -> tuple[str, str]:
    """(label, text) of one side of a row, on one line; ("", "") for a side with nothing."""
    if entry is None:
        return "", ""
    label = f"call {entry.tool}" if entry.kind == "call" else entry.kind
    return visible(" ".join(label.split())), visible(" ".join(entry.summary().split()))


class DiffView(ScrollView, can_focus=True):
    """The aligned rows with a cursor; Enter asks for both full texts of the row under it."""

    BINDINGS = [
        Binding("j,down", "cursor(1)", "Down", show=False),
        Binding("k,up", "cursor(-1)", "Up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False),
        Binding("n", "change(1)", "Next difference"),
        Binding("p", "change(-1)", "Previous difference"),
        Binding("enter", "choose", "Both texts"),
    ]
    COMPONENT_CLASSES = {CURSOR, DIM, *MARK_CLASSES.values()}
    DEFAULT_CSS = """
    DiffView {
        height: 1fr;
        background: $background;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
        & > .diff--cursor { background: $cursor-blurred; color: $cursor-blurred-text; text-style: bold; }
        &:focus > .diff--cursor { background: $cursor; color: $cursor-text; }
        & > .diff--dim { color: $state-muted; }
        & > .diff--same { color: $state-muted; }
        & > .diff--changed { color: $state-waiting; text-style: bold; }
        & > .diff--only-a { color: $state-failed; }
        & > .diff--only-b { color: $state-succeeded; }
    }
    """

    class Highlighted(Message):
        """The cursor moved to row `index`."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    class Chosen(Message):
        """Enter (or a second click) on row `index`."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.rows: list[DiffRow] = []
        self.cursor = 0
        self.empty = "reading both turns…"
        self._cache: dict[tuple[int, bool, int], Strip] = {}
        self._styles: dict[tuple[str, bool], Style] = {}

    # -- data -------------------------------------------------------------------------------

    def show(self, rows: list[DiffRow], empty: str = "the two turns have no rows") -> None:
        """Draw these rows, the cursor on the first."""
        self.rows, self.cursor, self.empty = list(rows), 0, empty
        self._resized()
        self.scroll_to(y=0, animate=False, immediate=True)
        if self.rows:
            self.post_message(self.Highlighted(0))

    @property
    def current(self) -> DiffRow | None:
        return self.rows[self.cursor] if self.cursor < len(self.rows) else None

    def _resized(self) -> None:
        self._cache.clear()
        self.virtual_size = Size(self.size.width, max(1, len(self.rows)))
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
            self.post_message(self.Highlighted(index))

    def action_cursor(self, delta: int) -> None:
        self._move(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_first(self) -> None:
        self._move(0)

    def action_last(self) -> None:
        self._move(len(self.rows) - 1)

    def action_change(self, direction: int) -> None:
        """The next (or previous) row that is not the same on both sides."""
        index = self.cursor + direction
        while 0 <= index < len(self.rows):
            if self.rows[index].mark != "same":
                self._move(index)
                return
            index += direction
        self.app.bell()

    def action_choose(self) -> None:
        if self.current is not None:
            self.post_message(self.Chosen(self.cursor))

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
            if selected:  # the selection's colours over the row's (its mark still says it)
                style += self.get_component_rich_style(CURSOR)
            self._styles[(name, selected)] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width or self.size.width
        index = int(self.scroll_y) + y
        if index >= len(self.rows):
            if index == 0:
                return self._fit([Segment(f" {self.empty}", self._style(DIM, False))], width,
                                 False)  # fmt: skip
            return Strip.blank(width, self._style("", False))
        selected = index == self.cursor
        key = (index, selected, width)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._cache[key] = self._draw(self.rows[index], width, selected)
        return strip

    def _draw(self, row: DiffRow, width: int, selected: bool) -> Strip:
        kind = MARK_CLASSES[row.mark]
        column = max(LABEL + 4, (width - 3) // 2)
        dim, ink = self._style(DIM, selected), self._style(kind, selected)
        text = self._style("" if row.mark == "same" else kind, selected)
        sides = []
        for entry, mine in ((row.a, row.mark != "only_b"), (row.b, row.mark != "only_a")):
            label, said = side_text(entry if mine else None)
            sides.append(self._fit([Segment(label.ljust(LABEL)[:LABEL], dim),
                                    Segment(" " + said, text)], column - 1, selected))  # fmt: skip
        line = Strip([Segment(f"{row.symbol} ", ink), *sides[0], Segment("│", dim),
                      Segment(" ", text), *sides[1]])  # fmt: skip
        return self._fit(list(line), width, selected)

    def _fit(self, segments: list[Segment], width: int, selected: bool) -> Strip:
        """`segments` in `width` cells: cut with an ellipsis, or padded."""
        base = self._style("", selected)
        strip = Strip(segments)
        if strip.cell_length > width:
            strip = Strip([*strip.crop(0, max(0, width - 1)), Segment("…", base)])
        return strip.adjust_cell_length(width, base)
