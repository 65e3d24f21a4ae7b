"""Ask for one line of text (a cancel reason); Esc abandons the whole action."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input

from console.widgets.inputs import OneLineInput
from console.widgets.text import Label


class PromptScreen(ModalScreen[str | None]):
    """Enter answers (an empty answer is allowed); Esc dismisses with None."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Back")]

    def __init__(self, question: str, placeholder: str = "") -> None:
        super().__init__()
        self.question, self.placeholder = question, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self.question, id="question")
            yield OneLineInput(placeholder=self.placeholder, id="answer")
            yield Label("Enter sends · Esc goes back without doing anything", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip())
