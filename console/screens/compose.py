"""A chat message of several lines: what a paste of several lines into the chat opens."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea

from console.screens.confirm import may_discard


class ComposeScreen(ModalScreen[str | None]):
    """The message in an editor; ctrl+s sends it, Esc goes back without sending (asking
    first when it was edited here: No, keep writing, is the default)."""

    BINDINGS = [
        Binding("ctrl+s", "send", "Send", priority=True),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, thread_id: str, text: str) -> None:
        super().__init__()
        self.thread_id, self.text = thread_id, text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Message to {self.thread_id}", id="question")
            yield TextArea(self.text, language=None, id="compose-editor")
            yield Label("ctrl+s send · Esc back without sending", classes="hint")

    def on_mount(self) -> None:
        editor = self.query_one(TextArea)
        editor.move_cursor(editor.document.end)

    @work(exclusive=True)
    async def action_back(self) -> None:
        edited = self.query_one(TextArea).text != self.text
        question = "Discard this message? What was written here is lost."
        if await may_discard(self.app, edited, question, keep="Keep writing"):
            self.dismiss(None)

    def action_send(self) -> None:
        text = self.query_one(TextArea).text.strip()
        if not text:
            self.notify("Nothing to send.", severity="warning")
            return
        self.dismiss(text)
