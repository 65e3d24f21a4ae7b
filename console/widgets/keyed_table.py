"""A read-only table redrawn from snapshots: keyed rows, only changed cells touched.

The scheduler view draws `rt.statistics()` several times a second; most snapshots equal
the last one, so `show` compares plain cells and updates only what differs, keeping the
cursor on the same key. State columns hold a status word and are drawn as glyph + word.
When a row is wider than the table, the give-way columns are cut (with "…"), in order,
down to MIN_WIDTH each, so the columns after them stay on screen; with rows of several
`lines`, a give-way cell is wrapped over them first and cut only after the last.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from console.format import visible
from console.glyphs import STATE_CLASSES, look
from console.widgets.state_text import state_text

MIN_WIDTH = 12  # cells a give-way column keeps however narrow the table


class KeyedTable(DataTable[Text | str]):
    """Rows by key; `show` a new snapshot of them."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]
    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | set(STATE_CLASSES)

    def __init__(self, columns: Sequence[str], state_columns: Sequence[str] = (),
                 give_way: Sequence[str] = (), **kw: object) -> None:  # fmt: skip
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)  # type: ignore[arg-type]
        self.labels = tuple(columns)
        self.state_columns = frozenset(state_columns)
        self.give_way = tuple(give_way)
        self.lines = 1  # the height of every row; a cell may hold as many lines ("\n")
        self._drawn: dict[str, tuple[str, ...]] = {}
        self._heights: dict[str, int] = {}  # each drawn row's height (`row_height`)
        self._room: dict[str, int] = {}  # give-way column -> the cells it may use

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for label in self.labels:
            self.add_column(label, key=label)

    def use_columns(self, columns: Sequence[str]) -> None:
        """Show these columns from now on (a view whose data gained a column: the scheduler
        of a cluster); the rows are drawn anew at the next `show`."""
        if tuple(columns) == self.labels:
            return
        self.labels, self._drawn, self._room = tuple(columns), {}, {}
        self.clear(columns=True)
        self._add_columns()

    def on_resize(self) -> None:
        if self.give_way and self._fit(self._drawn) != self._room:
            rows, self._drawn = self._drawn, {}
            self.show(rows)

    def _fit(self, rows: dict[str, tuple[str, ...]]) -> dict[str, int]:
        """The room of each give-way column for the rows to fit the table's width."""
        if not self.give_way:
            return {}
        widths = [cell_len(label) for label in self.labels]
        for cells in rows.values():
            for i, (label, value) in enumerate(zip(self.labels, cells, strict=True)):
                widths[i] = max(widths[i], _width(self._shown(label, value)))
        over = sum(w + 2 * self.cell_padding for w in widths) - self.scrollable_content_region.width
        room = {}
        for label in self.give_way:
            i = self.labels.index(label)
            give = max(0, min(over, widths[i] - MIN_WIDTH))
            room[label], over = widths[i] - give, over - give
        return room

    def _shown(self, label: str, value: str) -> str:
        """A cell's text as drawn (a state column draws glyph + word)."""
        if label in self.state_columns:
            state = look(value)
            return f"{state.glyph} {state.word}"
        return value

    def row_height(self, key: str, cells: tuple[str, ...]) -> int:
        """The lines a row takes (`lines`, unless a subclass lets a long cell wrap over more
        once the columns' room is known)."""
        return self.lines

    def room_of(self, label: str) -> int | None:
        """The cells a give-way column may use now (None: as many as it needs)."""
        return self._room.get(label)

    def _cell(self, label: str, value: str, key: str | None = None) -> Text:
        """One cell as drawn (`key`: its row's, for a subclass that styles rows): a Text,
        since DataTable reads a plain string as markup."""
        if label in self.state_columns:
            return state_text(self, value)
        room = self._room.get(label)
        lines = self._heights.get(key, self.lines) if key is not None else self.lines
        if room is not None and _width(value) > room or "\n" in value and lines > 1:
            return Text(_wrap(value, room or _width(value), lines), end="")
        return Text(value, end="")

    def show(self, rows: dict[str, tuple[str, ...]]) -> None:
        """Draw `rows` (key -> one plain string per column), touching only what changed.
        Cells are text, never markup, with their control characters shown escaped."""
        rows = {key: tuple(map(_visible, cells)) for key, cells in rows.items()}
        if rows == self._drawn:
            return
        before, self._drawn = self._drawn, rows
        room = self._fit(rows)
        refit = room != self._room  # every cut cell is cut again, and columns only grow
        self._room = room
        heights, self._heights = self._heights, {k: self.row_height(k, c) for k, c in rows.items()}
        if not refit and list(rows) == list(before) and heights == self._heights:
            for key, cells in rows.items():
                for label, old, new in zip(self.labels, before[key], cells, strict=True):
                    if old != new:
                        self.update_cell(key, label, self._cell(label, new, key))
            return
        keep = self.current_key()
        if keep is not None and keep not in rows:
            keep = self.successor(keep, list(before), rows)
        self.clear(columns=refit)
        if refit:
            self._add_columns()
        for key, cells in rows.items():
            self.add_row(*(self._cell(lb, v, key)
                           for lb, v in zip(self.labels, cells, strict=True)),
                         key=key, height=self._heights[key])  # fmt: skip
        if keep is not None and keep in self.rows:
            self.move_cursor(row=self.get_row_index(keep), animate=False)

    def successor(
        self, gone: str, before: list[str], rows: dict[str, tuple[str, ...]]
    ) -> str | None:
        """Where the cursor goes when the row under it (`gone`, one of the keys `before`) is
        no longer shown: it stays at the same position, which the next row down now takes
        (the row above it when it was the last)."""
        at = before.index(gone) if gone in before else len(before)
        below = [k for k in before[at + 1 :] if k in rows]
        above = [k for k in before[:at] if k in rows]
        return below[0] if below else above[-1] if above else next(iter(rows), None)

    def current_key(self) -> str | None:
        """The key of the row under the cursor, if any."""
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def notify_style_update(self) -> None:
        super().notify_style_update()
        # The component styles are updated after this call: recolour once they are.
        if self.state_columns and self._drawn and self.is_mounted:
            self.call_later(self._restyle)

    def _restyle(self) -> None:
        """A theme change recolours the state cells (their style was read when drawn)."""
        for key, cells in self._drawn.items():
            for label, value in zip(self.labels, cells, strict=True):
                if label in self.state_columns and key in self.rows:
                    cell = state_text(self, value)
                    if cell.style != getattr(self.get_cell(key, label), "style", None):
                        self.update_cell(key, label, cell)


def _visible(cell: str) -> str:
    return visible(cell, lines=True)  # a cell may hold several lines


def _width(text: str) -> int:
    """The cells the widest line of `text` takes."""
    return max(map(cell_len, text.split("\n")))


def wrapped(text: str, room: int) -> list[str]:
    """`text` in lines of at most `room` cells: its own lines, each broken at a space when
    one is not far back (else where the room ends)."""
    out: list[str] = []
    for part in text.split("\n"):
        while True:
            line = set_cell_size(part, room) if cell_len(part) > room else part
            if cell_len(part) > room and (cut := line.rfind(" ")) > room // 2:
                line = line[:cut]
            out.append(line.rstrip())
            part = part[len(line) :].lstrip()
            if not part:
                break
    return out


def _wrap(text: str, room: int, lines: int) -> str:
    """`text` over at most `lines` lines of `room` cells; what is left after the last is
    said at its end ("…+N lines"; one line of room: cut with "…")."""
    room = max(room, 2)
    out = wrapped(text, room)
    if len(out) <= lines:
        return "\n".join(out)
    if lines == 1:
        return set_cell_size(out[0], room - 1) + "…"
    rest = f" …+{len(out) - lines + 1} lines"
    last = out[lines - 1]
    keep = max(0, room - cell_len(rest))
    return "\n".join([*out[: lines - 1], set_cell_size(last, keep).rstrip() + rest])
