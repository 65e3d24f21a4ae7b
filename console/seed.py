"""What the console shows at start (and after a gap in the events), read from the room.

The runtime publishes only what changes from now on; threads, recent steps, unfinished
turns and their calls, and a thread's conversation come from the truth layer through the
room's client (`recent`, `conversation`), which reads the room's store read-only
(execution.db, or its PostgreSQL database), so it never contends with the room's writer
and works the same hosted or attached. Today's spend and what budgets hold come from the
room's budgets (`budgets`), read last: a step the first read showed finished is then in
the spend read (console/spend.py); the tools and the shell's sandbox (`tools`) after them
(console/tool_facts.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.state import CallRow, DeckState, TurnRow
from console.steps import StepRow
from console.threads import ChatEntry, turn_note, via

if TYPE_CHECKING:
    from engine.api.client import RoomClient
    from engine.api.watch import Watch


async def seed(client: RoomClient, state: DeckState) -> None:
    """Fill `state` with recent history and the room's threads."""
    recent = await client.recent()
    for thread_id in reversed(recent.threads):  # most recently used first: noted last
        state.note_thread(thread_id)
    for t in recent.turns:
        state.add_turn(TurnRow(t.turn_id, t.thread_id, t.status, t.reason, t.created_at, t.text,
                               group=t.group, channel=t.channel,
                               sender=t.sender))  # fmt: skip
    waiting = {p.call_id: p for p in await client.pending()} if recent.calls else {}
    for c in recent.calls:
        w = waiting.get(c.call_id)
        state.add_call(CallRow(c.call_id, c.turn_id, c.thread_id, c.tool, c.args, c.status,
                               c.result, c.error, c.created_at, c.updated_at, c.ended_at,
                               w.deadline_at if w else None, w.on_deadline if w else None,
                               c.awaiting))  # fmt: skip
    for s in recent.steps:
        state.add_step(StepRow(0, s.step_id, s.started_at, s.thread_id, s.turn_id, s.kind,
                               s.status.value, s.duration, s.summary, s.group,
                               s.channel))  # fmt: skip
    state.spend.load(await client.budgets())
    state.tools.load(await client.tools())


async def load_thread(client: RoomClient, state: DeckState, thread_id: str,
                      watch: Watch | None = None) -> None:  # fmt: skip
    """Fill a thread's chat entries from its stored conversation (once while it is kept);
    `watch` (the console's event stream) follows the threads kept from then on."""
    view = state.show_thread(thread_id)
    if watch is not None:
        watch.set(state.lanes())
    if view.loaded:
        return
    view.loaded = True
    conv = await client.conversation(thread_id, view.entries.maxlen or 0)
    notes = {
        turn_id: note
        for turn_id, (reason, detail) in conv.ends.items()
        if (note := turn_note(reason, detail))
    }
    stored: list[ChatEntry] = []
    for m in conv.messages:
        if stored and stored[-1].turn_id != m.turn_id:
            _note_end(stored, notes)
        stored.append(ChatEntry(m.role, m.text, m.turn_id, via(m.channel, m.sender), m.seq))
    if stored:
        _note_end(stored, notes)
    upto = max((e.seq for e in stored), default=-1)
    # folded while the read ran: messages after the stored ones, and the console's notes
    live = [e for e in view.entries if (e.seq > upto if e.seq >= 0 else e not in stored)]
    view.replace([*stored, *live])


def _note_end(entries: list[ChatEntry], notes: dict[str, str]) -> None:
    """After the last entry of a turn, the note on how it ended, if it has one."""
    turn_id = entries[-1].turn_id
    if turn_id in notes:
        entries.append(ChatEntry("system", notes[turn_id], turn_id))
