"""A text in an editor dialog, the base of the argument and message editors: ctrl+s does
the editor's own action; Esc goes back, asking first when the text was edited here."""

from __future__ import annotations

from typing import TypeVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import TextArea

from console.screens.confirm import ConfirmScreen
from console.widgets.text import Label

T = TypeVar("T")


class EditorScreen(ModalScreen[T | None]):
    """`text` to edit under `question`; a subclass binds ctrl+s and says what Esc drops."""

    BINDINGS = [Binding("escape", "back", "Back")]
    DISCARD = "Discard the edits?"  # what Esc asks when the text was edited
    KEEP = "Keep editing"  # the answer that keeps the dialog open (the default)

    def __init__(self, question: str, text: str, hint: str, editor_id: str) -> None:
        super().__init__()
        self.question, self.text, self.hint, self.editor_id = question, text, hint, editor_id

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(self.question, id="question")
            yield TextArea(self.text, language=None, id=self.editor_id)
            yield Label(self.hint, classes="hint")

    @property
    def edited_text(self) -> str:
        return self.query_one(TextArea).text

    @work(exclusive=True)
    async def action_back(self) -> None:
        if self.edited_text != self.text and not await self.app.push_screen_wait(
            ConfirmScreen(self.DISCARD, yes="Discard", no=self.KEEP)
        ):
            return
        self.dismiss(None)
