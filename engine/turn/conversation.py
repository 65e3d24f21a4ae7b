"""A thread's conversation: append-only entries, each one row in `messages`.

The runtime keeps each thread's conversation in memory once loaded, so appending costs
the same at message 800 as at message 5: one INSERT, never a rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.domain.events import MessageAppended
from engine.domain.messages import ConvMessage
from engine.store import Op
from engine.store import turns as rows


@dataclass
class Conversation:
    """The entries of one thread, in order."""

    thread_id: str
    messages: list[ConvMessage] = field(default_factory=list)

    @property
    def next_seq(self) -> int:
        return len(self.messages)

    def append(self, msg: ConvMessage, turn_id: str, at: float) -> tuple[Op, MessageAppended]:
        """Append `msg`; return the INSERT to commit and the event to publish."""
        seq = self.next_seq
        self.messages.append(msg)
        op = rows.message_appended(self.thread_id, turn_id, seq, msg.role, msg.text,
                                   msg.model_dump_json(), at)  # fmt: skip
        event = MessageAppended(
            at=at, thread_id=self.thread_id, turn_id=turn_id, role=msg.role, text=msg.text, seq=seq
        )
        return op, event

    @property
    def awaits_answer(self) -> bool:
        """True when the newest entry is input the model has not answered yet."""
        return bool(self.messages) and self.messages[-1].role != "assistant"
