"""A thread's conversation as the chat pane draws it: its entries (bounded), the answer
streaming now, and the words for how a turn ended."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from engine.lifecycle import turn as turn_lifecycle

MAX_CHAT = 500  # entries kept per thread


@dataclass
class ChatEntry:
    """One line of a conversation: operator, agent or tool (or a `system` note); `via`
    names a channel message's sender and channel ("ann via tg")."""

    role: str
    text: str
    turn_id: str = ""
    via: str = ""
    seq: int = -1  # a stored message's place in its thread (-1: a note of the console's)


def via(channel: str | None, sender: str) -> str:
    """How the chat labels a message that came from a channel: "ann via tg" ("" for the
    console's own, which says "you", and for a turn that came from no channel)."""
    if channel in (None, "", "console"):
        return ""
    return f"{sender} via {channel}"


QUIET_ENDS = frozenset({turn_lifecycle.NATURAL, turn_lifecycle.BEHAVIOR_REQUESTED})
_END_WORDS = {turn_lifecycle.ERROR: "turn failed", turn_lifecycle.CANCELLED: "turn cancelled",
              turn_lifecycle.BUDGET: "stopped by a budget"}  # fmt: skip


def turn_note(reason: str | None, detail: str | None) -> str | None:
    """What the chat says after a turn that ended other than by answering (else None)."""
    if reason is None or reason in QUIET_ENDS:
        return None
    words = _END_WORDS.get(reason) or f"turn ended: {reason}"
    return f"{words}: {detail}" if detail else words


class ThreadView:
    """A thread's conversation as the chat pane draws it, plus the answer streaming now.

    Entries are kept only while the thread is `loaded` (shown, or recently shown); the
    others are in the room's history and are read when the operator opens the thread.
    The streaming answer is kept as pieces and joined when read, so a long answer costs
    O(length) to fold, not O(length²).
    """

    __slots__ = ("thread_id", "entries", "loaded", "upto", "version", "_parts")

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.entries: deque[ChatEntry] = deque(maxlen=MAX_CHAT)
        self.loaded = False
        self.upto = -1  # the newest message's place in the thread (those up to it are here)
        self.version = 0  # bumped when `entries` change, so a drawn view knows to redraw
        self._parts: list[str] = []

    @property
    def streaming(self) -> str:
        parts = self._parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""

    @streaming.setter
    def streaming(self, text: str) -> None:
        self._parts = [text] if text else []

    def append(self, entry: ChatEntry) -> None:
        """Add an entry; a message it has already (read from the room and also streamed
        while the read ran) is not added twice, but takes its new text if it has one (an
        operator edited it at a breakpoint before the model read it)."""
        if entry.seq >= 0:
            if entry.seq <= self.upto:
                for index in range(len(self.entries) - 1, -1, -1):
                    if self.entries[index].seq == entry.seq:
                        if self.entries[index].text != entry.text:
                            self.entries[index] = entry
                            self.version += 1
                        break
                return
            self.upto = entry.seq
        self.entries.append(entry)
        self.version += 1

    def discard(self, entry: ChatEntry) -> None:
        """Take `entry` out (a note of the console's that is over, e.g. "sending…")."""
        if entry in self.entries:
            self.entries.remove(entry)
            self.version += 1

    def replace(self, entries: Iterable[ChatEntry]) -> None:
        self.entries.clear()
        self.entries.extend(entries)
        self.upto = max((e.seq for e in self.entries), default=-1)
        self.version += 1
