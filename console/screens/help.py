"""Every key of the console, grouped by where it works, read from the bindings themselves."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen

from console.widgets.text import Label, Static


def key_rows(app: App[object], sections: list[tuple[str, list[Binding]]]) -> list[tuple[str, str]]:
    """(keys, what they do) per binding, with a ("", title) row opening each section."""
    rows: list[tuple[str, str]] = []
    for title, bindings in sections:
        rows.append(("", title))
        for b in bindings:
            if b.description:
                keys = " / ".join(app.get_key_display(Binding(k, "")) for k in b.key.split(","))
                rows.append((keys, b.description))
    return rows


def _keys_table(rows: list[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", style="bold", min_width=14)
    table.add_column()
    for keys, what in rows:
        table.add_row(keys, Text(what, style="bold underline") if not keys else what)
    return table


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
                yield Static(_keys_table(self.rows), id="help-keys")
                yield Static(
                    "Approve and cancel are separate keys; Enter never decides. Every "
                    "confirmation defaults to the harmless answer. ctrl+p lists every action.",
                    classes="hint",
                )
            yield Label("Esc closes", classes="hint")
