"""The turn pane of the history screen: facts, where it suspended, decisions, messages.

Line-rendered: the lines are wrapped once per width and theme and kept as strips; a
frame draws only the strips on screen. `show` takes lines of cells (`console.history.view.notes`).
"""

from __future__ import annotations

from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from console.glyphs import STATE_CLASSES
from console.history.view import BOLD, DIM, MATCH, ROLE_CLASSES, Cells

HANG = 2  # cells a wrapped list item's next lines sit right of its first


class HistoryNotes(ScrollView, can_focus=True):
    """Wrapped lines of cells, scrolled with the usual keys."""

    BINDINGS = [
        Binding("j,down", "scroll_lines(1)", "Down", show=False),
        Binding("k,up", "scroll_lines(-1)", "Up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("home", "scroll_home", "Top", show=False),
        Binding("end", "scroll_end", "Bottom", show=False),
    ]
    COMPONENT_CLASSES = {DIM, BOLD, MATCH, *STATE_CLASSES, *ROLE_CLASSES.values()}

    def __init__(self, empty: str = "", **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.lines: list[Cells] = [((empty, DIM),)] if empty else []
        self._strips: list[Strip] = []
        self._starts: list[int] = []  # the first strip of each line
        self._drawn_for: tuple[object, ...] = ()

    def show(self, lines: list[Cells]) -> None:
        """Draw these lines from the top."""
        self.lines = lines
        self._drawn_for = ()
        self._wrap()
        self.scroll_to(y=0, animate=False, immediate=True)

    def scroll_to_line(self, index: int) -> None:
        """Bring line `index` (of those shown) to the top."""
        self._wrap()
        if 0 <= index < len(self._starts):
            self.scroll_to(y=self._starts[index], animate=False, immediate=True)

    def action_scroll_lines(self, delta: int) -> None:
        self.scroll_to(y=self.scroll_y + delta, animate=False, immediate=True)

    def _style(self, name: str) -> Style:
        return self.rich_style + self.get_component_rich_style(name) if name else self.rich_style

    def _wrap(self) -> None:
        width = max(10, self.scrollable_content_region.width or self.size.width)
        looks = (width, self.rich_style, id(self.lines))
        if looks == self._drawn_for or not self.is_mounted:
            return
        self._drawn_for = looks
        console, base = self.app.console, self.rich_style
        options = console.options.update_width(width)
        strips: list[Strip] = []
        starts: list[int] = []
        for cells in self.lines:
            starts.append(len(strips))
            text = Text(no_wrap=False, overflow="fold")
            for part, name in cells:
                text.append(part, self._style(name))
            for line in _hang(text, console, width):
                for segments in console.render_lines(line, options, style=base, pad=True):
                    strips.append(Strip(segments).adjust_cell_length(width, base))
        self._strips, self._starts = strips, starts
        self.virtual_size = Size(width, len(strips))
        self.refresh()

    def on_resize(self) -> None:
        self._drawn_for = ()
        self._wrap()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._drawn_for = ()
        if self.is_mounted:
            self.call_later(self._wrap)

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        if index < len(self._strips):
            return self._strips[index]
        return Strip.blank(self.size.width, self.rich_style)


def _hang(text: Text, console: Console, width: int) -> list[Text]:
    """An indented line (an item of a list) wrapped with its next lines under its text."""
    indent = len(text.plain) - len(text.plain.lstrip(" "))
    if not indent:
        return [text]
    hang = indent + HANG
    lines = text[indent:].wrap(console, max(10, width - hang), overflow="fold")
    return [Text(" " * (indent if i == 0 else hang)) + line for i, line in enumerate(lines)]
