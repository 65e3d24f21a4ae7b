"""The chat pane: the selected thread's conversation and the input that talks to it.

A message of several lines is written in an editor, a screen: the pane asks for it
(`Compose`) and the screen opens it, then hands back what was written (`composed`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from console.format import set_title
from console.state import CallRow
from console.threads import ThreadView
from console.tool_facts import ToolFacts
from console.widgets.chat_log import ChatLog
from console.widgets.decision_card import QUIET, DecisionCard
from console.widgets.inputs import ChatInput

EMPTY_HINT = "Nothing on this thread yet. Type below; Enter sends."
ROOM_HINT = (
    "This is the room at {room}. Another room: agentdeck --room DIR (or AGENT_ROOM=DIR); "
    "a new folder becomes a new room."
)
OFFLINE_HINT = (
    "The offline model answers here: a rule-based stand-in for an LLM (configure one in "
    "agentdeck.toml; `agentdeck info` shows where its key is read from). It runs "
    "`commands` in backticks once you approve them, and knows: list files, read PATH, "
    'write "TEXT" to PATH, calc 6*7, what time is it, fetch URL.'
)


class ChatPane(Vertical):
    """Chat of one thread; Enter in the input sends a chat message to it, Esc leaves the
    input for the panes (where letters are keys again; `i` comes back). Up and down in
    the input bring back the thread's earlier messages, as a shell's history does; a
    message of several lines (pasted, or brought back) is written in an editor."""

    BINDINGS = [
        Binding("escape", "leave", "Leave chat"),
        Binding(
            "escape",
            "leave(True)",
            "Leave (twice: stop turn)",
            tooltip="While a turn runs: leave; Esc again at once stops it",
        ),
        Binding("tab", "to_card", "Decide", show=False),
        Binding("up", "recall(-1)", "Earlier message", show=False),
        Binding("down", "recall(1)", "Later message", show=False),
    ]

    class Send(Message):
        """The operator sent `text` to the pane's thread."""

        def __init__(self, thread_id: str, text: str) -> None:
            super().__init__()
            self.thread_id, self.text = thread_id, text

    class StopArmed(Message):
        """Esc left the chat while its thread's turn runs: Esc again, at once, stops it."""

        def __init__(self, thread_id: str) -> None:
            super().__init__()
            self.thread_id = thread_id

    class Compose(Message):
        """`text`, of several lines, is to be written in the editor and then sent to
        `thread_id`: the input's text with a paste put in (`recalled` False: once sent,
        the input is empty), or an earlier message brought back (`recalled` True: the
        input keeps what it holds). The screen opens the editor and calls `composed`."""

        def __init__(self, thread_id: str, text: str, recalled: bool) -> None:
            super().__init__()
            self.thread_id, self.text, self.recalled = thread_id, text, recalled

    def __init__(self, thread_id: str, clock: Callable[[], float] = time.time,
                 keys_clock: Callable[[], float] = time.monotonic, workspace: Path | None = None,
                 **kw: object) -> None:  # fmt: skip
        super().__init__(**kw)  # type: ignore[arg-type]
        self.thread_id = thread_id
        self.clock, self.keys_clock, self.workspace = clock, keys_clock, workspace
        self.calls_of: Callable[[str], list[CallRow]] = lambda turn_id: []  # set by the screen
        self.stoppable: Callable[[], bool] = lambda: False  # a turn runs or waits here (screen's)
        self.tools = ToolFacts()  # the tools and the sandbox, for the card (set by the screen)
        self._view: ThreadView | None = None
        self._told = ""  # the thread's model and context use, for the title
        self._recalled: int | None = None  # index into the sent messages, None: the draft
        self._on_draft = True  # the input holds the draft (not a message brought back)
        # Each thread's draft; the shown thread's is kept here while the input shows a
        # message brought back, and is otherwise what the input holds.
        self._drafts: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        yield ChatLog(self.calls_of, id="chat-log")
        yield DecisionCard(self.clock, self.keys_clock, self.workspace, tools=self.tools, id="card")
        field = ChatInput(
            placeholder="Message the agent — Enter sends", id="chat-input", select_on_focus=False
        )  # a draft is added to, never replaced
        field.keys_clock = self.keys_clock
        yield field

    def on_mount(self) -> None:
        self._title()

    def show_context(self, said: str) -> None:
        """What the title says of the thread's model and context ("" nothing yet)."""
        if said != self._told:
            self._told = said
            self._title()

    def _title(self) -> None:
        set_title(self, f"Chat · {self.thread_id}" + (f" · {self._told}" if self._told else ""))

    def show(self, view: ThreadView) -> None:
        """Draw `view`; a different thread also retitles the pane."""
        if view.thread_id != self.thread_id:  # each thread keeps its own draft, as chats do
            self._back_to_draft()
            field = self.query_one(ChatInput)
            self._drafts[self.thread_id] = field.value
            field.value = self._drafts.get(view.thread_id, "")
            field.cursor_position = len(field.value)
        self.thread_id, self._view = view.thread_id, view
        self._title()
        self.query_one(ChatLog).show(view)

    def show_call(self, call: CallRow | None, *, by_operator: bool = False) -> None:
        """Show the call waiting in this thread on the card (None: none waits). A new one
        takes the keyboard from an empty input once the operator has not typed for QUIET
        seconds (a draft keeps it: Tab goes to the card); the card hands the keyboard back
        when no call is left."""
        card = self.query_one(DecisionCard)
        had_focus = card.has_focus
        changed = card.show_call(call, by_operator=by_operator)
        if call is None:
            if had_focus:
                self.query_one(ChatInput).focus()
            return
        if changed:
            self._take_keyboard()

    def _take_keyboard(self) -> None:
        card, field = self.query_one(DecisionCard), self.query_one(ChatInput)
        if card.call is None or not field.has_focus or field.value:
            return
        quiet = self.keys_clock() - field.typed_at
        if quiet >= QUIET:
            card.hold(arm_now=False)
        else:  # the operator is typing (or just sent): when they stop
            self.set_timer(QUIET - quiet, self._take_keyboard, name="take keyboard")

    def on_decision_card_give_back(self, event: DecisionCard.GiveBack) -> None:
        """A key for the chat reached the card: the input takes the focus, and the key."""
        event.stop()
        field = self.query_one(ChatInput)
        field.focus()
        if event.character:
            field.insert_text_at_cursor(event.character)
            field.typed_at = self.keys_clock()

    def action_to_card(self) -> None:
        """Tab from the input: to the card, its keys armed (a key that types no text)."""
        card = self.query_one(DecisionCard)
        if card.call is not None:
            card.hold(arm_now=True)
        else:
            self.screen.focus_next()

    def describe(self, room: str, model: str) -> None:
        """What an empty thread shows: how to start, the room and how to open another, and
        what the offline model knows."""
        hint = f"{EMPTY_HINT}\n\n{ROOM_HINT.format(room=room)}"
        offline = model.split(":", 1)[0] == "offline"
        self.query_one(ChatLog).hint = f"{hint}\n\n{OFFLINE_HINT}" if offline else hint

    def redraw(self) -> None:
        self.query_one(ChatLog).rebuild()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc's word in the footer says that a second one stops the thread's turn, while
        there is one."""
        if action == "leave":
            return bool(parameters) == self.stoppable()
        return True

    def action_leave(self, arm: bool = False) -> None:
        """Esc: from the input or the card, to the first pane after the chat (`arm`: and
        a second Esc at once stops the thread's turn, as Claude Code's and Codex's do)."""
        if arm:
            self.post_message(self.StopArmed(self.thread_id))
        chain = self.screen.focus_chain
        mine = [i for i, w in enumerate(chain) if self in w.ancestors_with_self]
        after = chain[mine[-1] + 1 :] if mine else chain
        if after:
            after[0].focus()

    def action_recall(self, delta: int) -> None:
        """Put the thread's previous (-1) or next (+1) message of the operator in the input;
        past the newest, what was being typed comes back. A message of several lines is
        shown in the editor instead, the input left as it is."""
        field = self.query_one(ChatInput)
        if self.screen.focused is not field or self._view is None:
            return
        sent = [e.text for e in self._view.entries if e.role == "user"]
        at = len(sent) if self._recalled is None else self._recalled
        to = max(0, min(len(sent), at + delta))
        if to == at:
            return
        if self._on_draft:  # what was typed since is the draft too
            self._drafts[self.thread_id] = field.value
        self._recalled = None if to == len(sent) else to
        text = self._drafts[self.thread_id] if self._recalled is None else sent[to]
        if "\n" in text:  # only sent messages have several lines: the draft is typed here
            self.post_message(self.Compose(self.thread_id, text, recalled=True))
            return
        self._on_draft = self._recalled is None
        field.value = text
        field.cursor_position = len(text)

    def on_chat_input_several_lines(self, event: ChatInput.SeveralLines) -> None:
        event.stop()
        self.post_message(self.Compose(self.thread_id, event.text, recalled=False))

    def composed(self, thread_id: str, text: str, recalled: bool) -> None:
        """The editor asked for by `Compose` sent `text` (going back without sending
        leaves the input and the history as they are)."""
        if not recalled:  # the paste held the input's text: it is sent
            self.query_one(ChatInput).clear()
        self._back_to_draft()  # sent from the history: what was being typed comes back
        self.post_message(self.Send(thread_id, text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if text := event.value.strip():
            if self._on_draft:
                event.input.clear()
            self._back_to_draft()  # a message sent again: the draft is there to go on with
            self.post_message(self.Send(self.thread_id, text))

    def _back_to_draft(self) -> None:
        """End a walk through the history: the input holds the draft again."""
        if not self._on_draft:
            field = self.query_one(ChatInput)
            field.value = self._drafts.get(self.thread_id, "")
            field.cursor_position = len(field.value)
        self._recalled, self._on_draft = None, True
