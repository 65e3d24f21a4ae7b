"""The conversations a runtime keeps in memory, up to a size.

A turn appends to its thread's conversation in memory (engine/turn/conversation.py), so a
step never reads the thread again. A runtime that lives for months sees far more threads
than it can hold, though: the conversations of idle threads leave memory, least recently
used first, once those kept pass `limit` bytes (an estimate: `Conversation.memory`), and
are read from the store again when a turn needs one. A conversation in use, one with a
turn running, waiting for a decision or in line to resume, never leaves while it is.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from engine.domain.messages import ConvMessage
from engine.store import Store
from engine.store import turns as rows
from engine.turn.conversation import Conversation


@dataclass(frozen=True)
class ConversationStats:
    """What the runtime keeps of conversations now."""

    kept: int  # conversations in memory
    memory: (
        int  # their estimated bytes (as last counted: a running turn's growth counts when it stops)
    )
    limit: int  # the bound idle ones leave memory past
    loaded: int  # conversations read from the store in this run
    dropped: int  # conversations that left memory in this run


class Conversations:
    """Threads' conversations, most recently used last, within `limit` bytes but for those
    `in_use` says a turn holds."""

    def __init__(self, store: Store, limit: int, in_use: Callable[[str], bool]) -> None:
        self.store, self.limit, self._in_use = store, limit, in_use
        self._kept: OrderedDict[str, Conversation] = OrderedDict()
        self._counted: dict[str, int] = {}  # thread -> its memory as last counted
        self.memory = 0
        self._loaded = self._dropped = 0

    async def get(self, thread_id: str, *, fresh: bool = False) -> Conversation:
        """The thread's conversation: the one kept, else (or `fresh`: always) as the store
        has it."""
        conv = None if fresh else self._kept.get(thread_id)
        if conv is not None:
            self._kept.move_to_end(thread_id)
            return conv
        return self.adopt(thread_id, await rows.message_bodies(self.store, thread_id))

    def kept(self, thread_id: str, *, fresh: bool = False) -> bool:
        """Whether `get` answers without reading the store."""
        return not fresh and thread_id in self._kept

    def adopt(self, thread_id: str, bodies: list[str]) -> Conversation:
        """The thread's conversation from its messages as the store has them (`bodies`,
        rows.message_bodies' answer), kept from now on."""
        conv = Conversation(thread_id, [ConvMessage.model_validate_json(b) for b in bodies])
        self._loaded += 1
        self.forget(thread_id)
        self._kept[thread_id] = conv
        self._count(thread_id, conv)
        self._trim()
        return conv

    def forget(self, thread_id: str) -> None:
        """The thread's conversation leaves memory (the store may be ahead of it)."""
        if self._kept.pop(thread_id, None) is not None:
            self.memory -= self._counted.pop(thread_id)

    def settled(self, thread_id: str) -> None:
        """A turn on the thread stopped: what it appended is counted, and idle threads
        leave memory if the kept ones are past the limit."""
        conv = self._kept.get(thread_id)
        if conv is not None:
            self._count(thread_id, conv)
        self._trim()

    def statistics(self) -> ConversationStats:
        return ConversationStats(len(self._kept), self.memory, self.limit, self._loaded,
                                 self._dropped)  # fmt: skip

    def _count(self, thread_id: str, conv: Conversation) -> None:
        self.memory += conv.memory - self._counted.get(thread_id, 0)
        self._counted[thread_id] = conv.memory

    def _trim(self) -> None:
        """Least recently used first, idle conversations leave until the rest fit; one in
        use is passed over and counts as just used (so the next trim does not look at it
        again first)."""
        kept = self._kept
        for _ in range(len(kept)):
            if self.memory <= self.limit:
                return
            thread_id = next(iter(kept))
            if self._in_use(thread_id):
                kept.move_to_end(thread_id)
                continue
            self.forget(thread_id)
            self._dropped += 1
