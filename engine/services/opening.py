"""What a new turn reads before its admission commits: its thread's conversation, and the
thread's own instructions with it.

A thread new to this run has both read from the store. Read one after the other they were
two round trips through the store's reader, and each costs its admission two passes of a
busy event loop (the answer is handed to the loop, then the turn resumes): with 64 turns
running, 0.3 ms at the median and 3 ms at the 99th percentile each. So the two are one
read (`turns.thread_opening`) when neither is kept; a thread whose conversation or
instructions are kept reads the other alone, as before.
"""

from __future__ import annotations

from engine.services.conversations import Conversations
from engine.services.instructions import InstructionsBook
from engine.store import Store
from engine.store import turns as rows
from engine.turn.conversation import Conversation


async def conversation(
    store: Store,
    conversations: Conversations,
    book: InstructionsBook | None,
    thread_id: str,
    *,
    fresh: bool,
) -> Conversation:
    """The thread's conversation (`fresh`: read even if kept), its own instructions kept in
    `book` by the same read when it must read both."""
    if book is None or book.knows(thread_id) or conversations.kept(thread_id, fresh=fresh):
        return await conversations.get(thread_id, fresh=fresh)
    bodies, own = await rows.thread_opening(store, thread_id)
    book.adopt(thread_id, own)
    return conversations.adopt(thread_id, bodies)
