"""Every key of the console, grouped by where it works (a pane, a screen), read from the
bindings themselves, laid out as a grid of sections as wide as the terminal allows (as
k9s and lazygit show theirs)."""

from __future__ import annotations

from rich.columns import Columns
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen

from console.widgets.text import Label, Static


def key_rows(app: App[object], sections: list[tuple[str, list[Binding]]]) -> list[tuple[str, str]]:
    """(keys, what they do) per binding, with a ("", title) row opening each section (a
    binding's tooltip, where it has one, says more than its footer word)."""
    rows: list[tuple[str, str]] = []
    for title, bindings in sections:
        rows.append(("", title))
        for b in bindings:
            if b.description:
                keys = " / ".join(app.get_key_display(Binding(k, "")) for k in b.key.split(","))
                rows.append((keys, b.tooltip or b.description))
    return rows


def _keys_grid(rows: list[tuple[str, str]]) -> Columns:
    """One small table per section, flowed into as many columns as fit."""
    tables: list[Table] = []
    for keys, what in rows:
        if not keys:  # a section's title opens its table
            table = Table.grid(padding=(0, 1))
            table.add_column(justify="right", style="bold", min_width=9)
            table.add_column(max_width=26)
            table.add_row("", Text(what, style="bold underline"))
            tables.append(table)
        else:
            tables[-1].add_row(Text(keys), Text(what))
    return Columns(tables, padding=(1, 3))


class HelpScreen(ModalScreen[None]):
    """Opened by ? or F1; Esc, ? or q closes it."""

    BINDINGS = [Binding("escape,question_mark,q,f1", "dismiss(None)", "Close")]

    def __init__(self, sections: list[tuple[str, list[Binding]]]) -> None:
        super().__init__()
        self.sections = sections
        self.rows: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        self.rows = key_rows(self.app, self.sections)
        with Vertical(id="dialog", classes="wide"):
            yield Label("agentdeck keys", id="question")
            with VerticalScroll(id="dialog-body"):
                yield Static(_keys_grid(self.rows), id="help-keys")
                yield Static(
                    "Approve and cancel are separate keys; Enter never decides. Every "
                    "confirmation defaults to the harmless answer. ctrl+p lists every action.",
                    classes="hint",
                )
            yield Label("Esc closes", classes="hint")
