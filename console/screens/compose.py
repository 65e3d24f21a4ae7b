"""A chat message of several lines: what a paste of several lines into the chat opens."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import TextArea

from console.screens.editor import EditorScreen


class ComposeScreen(EditorScreen[str]):
    """The message in an editor; ctrl+s sends it."""

    BINDINGS = [Binding("ctrl+s", "send", "Send", priority=True)]
    DISCARD = "Discard this message? What was written here is lost."
    KEEP = "Keep writing"

    def __init__(self, thread_id: str, text: str) -> None:
        super().__init__(f"Message to {thread_id}", text,
                         "ctrl+s send · Esc back without sending", "compose-editor")  # fmt: skip

    def on_mount(self) -> None:
        editor = self.query_one(TextArea)
        editor.move_cursor(editor.document.end)

    def action_send(self) -> None:
        text = self.edited_text.strip()
        if not text:
            self.notify("Nothing to send.", severity="warning")
            return
        self.dismiss(text)
