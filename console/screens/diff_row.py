"""One row of a turn diff in full: A's side and B's side in two columns, each whole (a
message's text; a call's tool, arguments as indented JSON, status, result or error, and
the decisions on it), and what changed between them. Opened by Enter on the diff view."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen

from console.format import plain, pretty, set_title
from console.widgets.text import Label, Static
from engine.domain.turn_diff import MARKS, DiffRow, Entry

SAID = {"same": "the same on both sides", "changed": "changed", "only_a": "only in A",
        "only_b": "only in B"}  # fmt: skip


def full_text(entry: Entry | None) -> str:
    """One side of a row, whole (drawn with `plain`: control characters shown escaped)."""
    if entry is None:
        return "(nothing on this side)"
    if entry.kind != "call":
        return entry.text or "(no text)"
    lines = [f"call {entry.tool}" + (f" ({entry.call_id})" if entry.call_id else ""),
             f"status: {entry.status or 'never run'}", "", "arguments:", pretty(entry.args)]  # fmt: skip
    if entry.result is not None:
        lines += ["", "result:", entry.result]
    if entry.error is not None:
        lines += ["", "error:", entry.error]
    for d in entry.decisions:
        edited = f", arguments {pretty(d.args)}" if d.args is not None else ""
        why = f": {d.reason}" if d.reason else ""
        lines += ["", f"decision: {d.action} by {d.decided_by} ({d.status}){edited}{why}"]
    return "\n".join(lines)


class DiffRowScreen(ModalScreen[None]):
    """Both sides of a row; Esc or q closes it."""

    BINDINGS = [Binding("escape,q", "dismiss(None)", "Close")]
    DEFAULT_CSS = """
    DiffRowScreen {
        #diff-row {
            width: 95%;
            height: 85%;
            border: thick $primary;
            background: $surface;
            padding: 0 1;
        }
        #diff-row-head { text-style: bold; }
        #diff-row-changed { color: $state-waiting; }
        #diff-row-sides { height: 1fr; }
        #diff-row-sides > VerticalScroll { width: 1fr; padding: 0 1; }
    }
    """

    def __init__(self, row: DiffRow, turn_a: str, turn_b: str) -> None:
        super().__init__()
        self.row, self.turns = row, (turn_a, turn_b)

    def compose(self) -> ComposeResult:
        row = self.row
        head = f"{MARKS[row.mark]} {row.label}: {SAID[row.mark]}"
        with Vertical(id="diff-row"):
            yield Label(head, id="diff-row-head")
            if row.what_changed():
                yield Label(row.what_changed(), id="diff-row-changed")
            with Horizontal(id="diff-row-sides"):
                for side, entry in (("a", row.a), ("b", row.b)):
                    with VerticalScroll(id=f"diff-row-{side}", classes="pane"):
                        yield Static(plain(full_text(entry), lines=True))
            yield Label("Esc closes", classes="hint")

    def on_mount(self) -> None:
        for side, turn in zip(("a", "b"), self.turns, strict=True):
            set_title(self.query_one(f"#diff-row-{side}"), f"{side.upper()} · {turn}")
