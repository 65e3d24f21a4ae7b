"""What the console shows at start, read from execution.db over a read-only connection.

The runtime publishes only what changes from now on; threads, recent steps, unfinished
turns and their calls come from the truth layer. Reading goes through
`engine.history.connect_readonly`, so it never contends with the room's writer.
"""

from __future__ import annotations

from console.state import CallRow, ChatEntry, DeckState, StepRow, TurnRow, turn_note
from engine.history import connect_readonly
from engine.room import Room
from engine.store import json_or_text

RECENT_STEPS = 500
RECENT_TURNS = 200


async def seed(room: Room, state: DeckState) -> list[str]:
    """Fill `state` with recent history; return the thread ids, most recently used first."""
    if not room.db.exists():
        return []
    db = await connect_readonly(room)
    try:
        threads = [r[0] for r in await db.execute_fetchall(
            "SELECT id FROM threads ORDER BY updated_at DESC, id")]  # fmt: skip
        turns = await db.execute_fetchall(
            "SELECT * FROM (SELECT id, thread_id, status, reason, created_at, text FROM turns"
            " ORDER BY created_at DESC, id DESC LIMIT ?) ORDER BY created_at, id",
            (RECENT_TURNS,),
        )
        for r in turns:
            state.add_turn(TurnRow(r["id"], r["thread_id"], r["status"], r["reason"],
                                   r["created_at"], r["text"]))  # fmt: skip
        known = ",".join("?" * len(state.turns)) or "''"
        calls = await db.execute_fetchall(
            f"SELECT * FROM tool_calls WHERE turn_id IN ({known}) OR status='suspended'"
            " ORDER BY updated_at, id",
            tuple(state.turns),
        )
        for r in calls:
            error = r["suspend_reason"] if r["status"] == "suspended" else r["error"]
            state.add_call(
                CallRow(r["id"], r["turn_id"], r["thread_id"], r["tool"], json_or_text(r["args"]),
                        r["status"], r["result"], error, r["created_at"], r["updated_at"],
                        r["ended_at"])
            )  # fmt: skip
        steps = await db.execute_fetchall(
            "SELECT * FROM (SELECT s.id, s.turn_id, t.thread_id, s.kind, s.status, s.summary,"
            " s.started_at, s.ended_at FROM steps s JOIN turns t ON t.id = s.turn_id"
            " ORDER BY s.id DESC LIMIT ?) ORDER BY id",
            (RECENT_STEPS,),
        )
        for r in steps:
            duration = r["ended_at"] - r["started_at"] if r["ended_at"] is not None else None
            state.add_step(StepRow(0, r["id"], r["started_at"], r["thread_id"], r["turn_id"],
                                   r["kind"], r["status"], duration, r["summary"]))  # fmt: skip
    finally:
        await db.close()
    return threads


async def load_thread(room: Room, state: DeckState, thread_id: str) -> None:
    """Fill a thread's chat entries from its stored conversation (once while it is kept)."""
    view = state.show_thread(thread_id)
    if view.loaded:
        return
    view.loaded = True
    if not room.db.exists():
        return
    db = await connect_readonly(room)
    try:
        rows = await db.execute_fetchall(
            "SELECT role, text, turn_id FROM messages WHERE thread_id=? ORDER BY seq DESC LIMIT ?",
            (thread_id, view.entries.maxlen),
        )
        turn_ids = list(dict.fromkeys(r["turn_id"] for r in rows))
        ends = await db.execute_fetchall(  # how its turns ended, noted after their messages
            f"SELECT id, reason, detail FROM turns WHERE id IN ({','.join('?' * len(turn_ids))})"
            " AND status='done'",
            turn_ids,
        )
    finally:
        await db.close()
    notes = {r["id"]: note for r in ends if (note := turn_note(r["reason"], r["detail"]))}
    stored: list[ChatEntry] = []
    for r in reversed(rows):
        if stored and stored[-1].turn_id != r["turn_id"]:
            _note_end(stored, notes)
        stored.append(ChatEntry(r["role"], r["text"], r["turn_id"]))
    if stored:
        _note_end(stored, notes)
    live = [e for e in view.entries if e not in stored]  # folded while the read ran
    view.replace([*stored, *live])


def _note_end(entries: list[ChatEntry], notes: dict[str, str]) -> None:
    """After the last entry of a turn, the note on how it ended, if it has one."""
    turn_id = entries[-1].turn_id
    if turn_id in notes:
        entries.append(ChatEntry("system", notes[turn_id], turn_id))
