"""The rows of a turn diff (engine/domain/turn_diff.py), A's and B's side by side.

One line a row: the mark (`=` the same, `~` changed, `<` only in A, `>` only in B), then
A's side and B's side, each its kind or tool and its text cut to the column. Both sides are
one widget, so moving and scrolling moves them together. A cursor list (cursor_lines.py:
line-rendered, drawn lines cached); changed and one-sided rows take the theme's colours,
and every row keeps its mark, so nothing is said by colour alone. Text from models and
tools is drawn as text, its control characters shown escaped.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.binding import Binding
from textual.message import Message
from textual.strip import Strip

from console.format import visible
from console.widgets.cursor_lines import MOVES, CursorLines
from engine.domain.turn_diff import DiffRow, Entry

LABEL = 12  # cells of a side's kind or tool
MARK_CLASSES = {"same": "diff--same", "changed": "diff--changed", "only_a": "diff--only-a",
                "only_b": "diff--only-b"}  # fmt: skip
DIM = "diff--dim"


def side_text(entry: Entry | None) -> tuple[str, str]:
    """(label, text) of one side of a row, on one line; ("", "") for a side with nothing."""
    if entry is None:
        return "", ""
    label = f"call {entry.tool}" if entry.kind == "call" else entry.kind
    return visible(" ".join(label.split())), visible(" ".join(entry.summary().split()))


class DiffView(CursorLines[DiffRow]):
    """The aligned rows with a cursor; Enter asks for both full texts of the row under it."""

    BINDINGS = [
        *MOVES,
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False),
        Binding("n", "change(1)", "Next difference"),
        Binding("p", "change(-1)", "Previous difference"),
        Binding("enter", "choose", "Both texts"),
    ]
    CURSOR, NOTE = "diff--cursor", DIM
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
        super().__init__("reading both turns…", **kw)

    # -- data -------------------------------------------------------------------------------

    def show(self, rows: list[DiffRow], empty: str = "the two turns have no rows") -> None:
        """Draw these rows, the cursor on the first."""
        self.rows, self.cursor, self.empty = list(rows), 0, empty
        self._resized()
        self.scroll_to(y=0, animate=False, immediate=True)
        if self.rows:
            self.post_message(self._highlighted(0))

    @property
    def current(self) -> DiffRow | None:
        return self.rows[self.cursor] if self.cursor < len(self.rows) else None

    # -- the cursor and the drawing --------------------------------------------------------

    def _highlighted(self, index: int) -> Message:
        return self.Highlighted(index)

    def _chosen(self, index: int) -> Message:
        return self.Chosen(index)

    def action_change(self, direction: int) -> None:
        """The next (or previous) row that is not the same on both sides."""
        index = self.cursor + direction
        while 0 <= index < len(self.rows):
            if self.rows[index].mark != "same":
                self._move(index)
                return
            index += direction
        self.app.bell()

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
