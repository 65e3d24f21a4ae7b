"""A thread's conversation: append-only entries, each one row in `messages`.

The runtime keeps a thread's conversation in memory while it is in use (and others, up
to a size: engine/services/supervisor.py), so appending costs the same at message 800 as
at message 5: one INSERT, never a rewrite; and so does the request a step sends
(engine/turn/view.py's `View`, extended as entries are appended).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.domain.events import MessageAppended
from engine.domain.messages import ConvMessage
from engine.providers.windows import estimate_tokens
from engine.store import Op
from engine.store import turns as rows
from engine.turn.view import View, marker_of
from engine.turn.window import PER_MESSAGE, SHORTENED, ContextWindow, message_tokens

HUGE = 2048  # tokens: an entry this large is remembered, as the view may read it cut
# What a conversation holds in memory, estimated (tracemalloc, CPython 3.11): a ConvMessage
# with its fields, its size sums and its place in the view, beside its texts; a call part;
# the conversation's own objects.
ENTRY_BYTES, CALL_BYTES, BASE_BYTES = 800, 450, 600


def entry_bytes(msg: ConvMessage) -> int:
    """About the memory one entry takes, its texts included."""
    size = ENTRY_BYTES + len(msg.text) + len(msg.context or "")
    for call in msg.tool_calls:
        size += CALL_BYTES + len(call.id) + len(call.name) + len(json.dumps(call.arguments))
    if msg.compaction is not None:
        size += len(json.dumps(msg.compaction))
    return size


@dataclass
class Conversation:
    """The entries of one thread, in order; and, kept as they are appended, what the
    request's size needs without a pass over them all (engine/turn/window.py): the
    entries' estimated sizes summed from the start (compaction markers count nothing: the
    view never sends them), the large ones, and the newest marker in effect; the
    request's entries as last built (`view`), and about the memory all this takes."""

    thread_id: str
    messages: list[ConvMessage] = field(default_factory=list)
    sums: list[int] = field(default_factory=lambda: [0], repr=False)
    huge: dict[int, int] = field(default_factory=dict, repr=False)  # index -> tokens
    marker: tuple[int, dict[str, Any]] | None = field(default=None, repr=False)
    memory: int = field(default=BASE_BYTES, repr=False)  # bytes it holds, about
    _view: View = field(default_factory=View, repr=False)

    def __post_init__(self) -> None:
        for index, msg in enumerate(self.messages):
            self._count(index, msg)
        self.marker = marker_of(self.messages)

    def _count(self, index: int, msg: ConvMessage) -> None:
        self.memory += entry_bytes(msg)
        tokens = 0 if msg.compaction is not None else message_tokens(msg)
        self.sums.append(self.sums[-1] + tokens)
        if tokens > HUGE:
            self.huge[index] = tokens

    def tokens(self, start: int = 0, end: int | None = None) -> int:
        """The estimated size of entries [start, end), markers left out."""
        return self.sums[len(self.messages) if end is None else end] - self.sums[start]

    @property
    def next_seq(self) -> int:
        return len(self.messages)

    def append(self, msg: ConvMessage, turn_id: str, at: float) -> tuple[Op, MessageAppended]:
        """Append `msg`; return the INSERT to commit and the event to publish."""
        seq = self.next_seq
        self.messages.append(msg)
        self._count(seq, msg)
        if msg.compaction is not None:
            self.marker = marker_of(self.messages)
        op = rows.message_appended(self.thread_id, turn_id, seq, msg.role, msg.text,
                                   msg.model_dump_json(), at)  # fmt: skip
        event = MessageAppended(
            at=at, thread_id=self.thread_id, turn_id=turn_id, role=msg.role, text=msg.text, seq=seq
        )
        return op, event

    def unread(self) -> list[int]:
        """The entries after the model's last answer: what its next request reads first."""
        seqs: list[int] = []
        for seq in range(len(self.messages) - 1, -1, -1):
            msg = self.messages[seq]
            if msg.role == "assistant":
                break
            if msg.compaction is None:
                seqs.append(seq)
        return seqs[::-1]

    def edit_unread(self, seq: int, text: str, turn_id: str,
                    at: float) -> tuple[Op, MessageAppended]:  # fmt: skip
        """An operator's new text for entry `seq`, one no request has read yet (a
        breakpoint's edit: engine/turn/breaks.py); returns the UPDATE to commit and the
        event that says it (the entry again, with its seq). The sizes kept from `seq` on
        are counted again, and the view built again if it read it."""
        if seq not in self.unread():
            raise ValueError(f"entry {seq} was read by the model already: it cannot change")
        msg = self.messages[seq].model_copy(update={"text": text})
        tail = self.messages[seq:]
        self.memory -= sum(entry_bytes(m) for m in tail)
        del self.sums[seq + 1 :]
        self.huge = {i: n for i, n in self.huge.items() if i < seq}
        self.messages[seq] = msg
        for index in range(seq, len(self.messages)):
            self._count(index, self.messages[index])
        self._view = View()  # (rebuilt at the next request: O(thread) once)
        event = MessageAppended(at=at, thread_id=self.thread_id, turn_id=turn_id,
                                role=msg.role, text=text, seq=seq)  # fmt: skip
        return rows.message_edited(self.thread_id, seq, text, msg.model_dump_json()), event

    def view(self, window: int | None, large: dict[int, int] | None) -> list[ConvMessage]:
        """The entries as a request reads them (engine/turn/view.py's `request_messages`
        with the marker in effect; `large`: `huge`, or None for every entry to be looked
        at), extended from the previous request's: O(new entries), not O(thread)."""
        return self._view.of(self.messages, window, self.marker, large)

    def request_tokens(self, window: ContextWindow, system: str | None,
                       tools: list[dict[str, Any]]) -> int:  # fmt: skip
        """The size of the request a turn sends of this conversation (as engine/turn/view.py
        builds it), estimated from the sums kept: no pass over the entries."""
        conv = self
        found, start, total = conv.marker, 0, 0
        if found is not None:
            index, mark = found
            start = int(mark.get("covers", 0))
            if start > 0:
                total += estimate_tokens(conv.messages[index].text) + PER_MESSAGE
            for seq in mark.get("shortened", ()):  # read shortened: about 3,000 characters
                seq = int(seq)
                if start <= seq < len(conv.messages):
                    total -= max(0, conv.tokens(seq, seq + 1) - SHORTENED)
        total += conv.tokens(start)
        if window.tokens is not None:  # an entry over half the window is read cut to it
            for seq, size in conv.huge.items():
                if seq >= start and size > window.tokens // 2:
                    total -= size - window.tokens // 2
        if system:
            total += window.text(system)
        if tools:
            total += window.tools(tools)
        return int(total * window.ratio)

    @property
    def awaits_answer(self) -> bool:
        """True when the newest entry is input the model has not answered yet."""
        return bool(self.messages) and self.messages[-1].role != "assistant"
