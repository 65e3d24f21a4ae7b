"""The chat pane: the selected thread's conversation and the input that talks to it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from console.state import ThreadView
from console.widgets.chat_log import ChatLog

EMPTY_HINT = "Nothing on this thread yet. Type below; Enter sends."
OFFLINE_HINT = (
    "The offline model answers here: a rule-based stand-in for an LLM (configure one in "
    "agentdeck.toml; `agentdeck info` shows where its key is read from). It runs "
    "`commands` in backticks once you approve them, and knows: list files, read PATH, "
    'write "TEXT" to PATH, calc 6*7, what time is it, fetch URL.'
)


class ChatPane(Vertical):
    """Chat of one thread; Enter in the input sends a chat message to it, Esc leaves the
    input for the panes (where letters are keys again; `i` comes back)."""

    BINDINGS = [Binding("escape", "leave", "Leave chat")]

    class Send(Message):
        """The operator sent `text` to the pane's thread."""

        def __init__(self, thread_id: str, text: str) -> None:
            super().__init__()
            self.thread_id, self.text = thread_id, text

    def __init__(self, thread_id: str, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.thread_id = thread_id

    def compose(self) -> ComposeResult:
        yield ChatLog(id="chat-log")
        yield Input(placeholder="Message the agent — Enter sends", id="chat-input")

    def on_mount(self) -> None:
        self.border_title = f"Chat · {self.thread_id}"

    def show(self, view: ThreadView) -> None:
        """Draw `view`; a different thread also retitles the pane."""
        self.thread_id = view.thread_id
        self.border_title = f"Chat · {self.thread_id}"
        self.query_one(ChatLog).show(view)

    def describe_model(self, model: str) -> None:
        """What an empty thread shows: how to start, and what the offline model knows."""
        offline = model.split(":", 1)[0] == "offline"
        self.query_one(ChatLog).hint = f"{EMPTY_HINT}\n\n{OFFLINE_HINT}" if offline else EMPTY_HINT

    def redraw(self) -> None:
        self.query_one(ChatLog).rebuild()

    def action_leave(self) -> None:
        self.screen.focus_next()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text:
            event.input.clear()
            self.post_message(self.Send(self.thread_id, text))
