"""A yes/no question whose default (focus, Enter, Esc) is always the harmless answer."""

from __future__ import annotations

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button

from console.widgets.text import Label, Static


class ConfirmScreen(ModalScreen[bool]):
    """Ask before something that cannot be taken back; No is focused and Esc says No."""

    BINDINGS = [
        Binding("escape,n", "answer(False)", "No"),
        Binding("y", "answer(True)", "Yes"),
        Binding("left,h", "app.focus_previous", "Previous", show=False),
        Binding("right,l", "app.focus_next", "Next", show=False),
    ]

    def __init__(self, question: str, body: RenderableType = "", yes: str = "Yes",
                 no: str = "No") -> None:  # fmt: skip
        super().__init__()
        self.question, self.body, self.yes, self.no = question, body, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            if self.body:
                with VerticalScroll(id="dialog-body"):
                    yield Static(self.body)
            with Horizontal(id="buttons"):
                yield Button(f"{self.no} (n)", id="no", variant="primary")
                yield Button(f"{self.yes} (y)", id="yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
