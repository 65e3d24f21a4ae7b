"""What an operator's console shows first, read from the truth layer without owning the room.

The runtime publishes only what changes from now on; the threads, the recent turns and
steps, the calls of those turns and every suspended call come from here, as do a
thread's stored messages when the console opens it. Reading goes through a read-only
connection (`engine.store.reader.open_reader`: execution.db, or the room's PostgreSQL
database): it never contends with the room's writer, and it works the same in the owner's
process and in an attached one. A PostgreSQL store that cannot be reached is a StoreError,
never an empty view.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.lifecycle import CallStatus, StepStatus, TurnStatus
from engine.lifecycle.call import Awaiting
from engine.room import Room
from engine.store.reader import open_reader
from engine.store.sqlite import json_or_text

RECENT_STEPS = 500
RECENT_TURNS = 200


@dataclass(frozen=True)
class TurnRecord:
    turn_id: str
    thread_id: str
    status: TurnStatus
    reason: str | None
    created_at: float
    text: str
    group: str | None = None  # its thread's group
    channel: str | None = None  # the channel its message came from (None: not a channel's)
    sender: str = ""


@dataclass(frozen=True)
class CallRecord:
    call_id: str
    turn_id: str
    thread_id: str
    tool: str
    args: Any
    status: CallStatus
    result: str | None
    error: str | None  # the suspend reason while suspended
    created_at: float
    updated_at: float
    ended_at: float | None
    awaiting: Awaiting | None = None  # suspended: a decision, or a review after a crash


@dataclass(frozen=True)
class StepRecord:
    step_id: int
    turn_id: str
    thread_id: str
    kind: str
    status: StepStatus
    summary: str
    started_at: float
    duration: float | None
    group: str | None = None  # its thread's group
    channel: str | None = None  # its turn's channel


@dataclass(frozen=True)
class Recent:
    """Threads (most recently used first), recent turns and steps (oldest first), and the
    calls of those turns plus every suspended call."""

    threads: list[str] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)


@dataclass(frozen=True)
class ChatRecord:
    """One stored message; a turn's user message (its first) carries who sent it and
    through which channel, as its turn recorded them (the others: None and "")."""

    role: str
    text: str
    turn_id: str
    channel: str | None = None
    sender: str = ""
    seq: int = -1  # its place in the thread's conversation


@dataclass(frozen=True)
class Conversation:
    """A thread's newest messages, oldest first, and how its ended turns ended."""

    messages: list[ChatRecord]
    ends: dict[str, tuple[str | None, str | None]]  # turn id -> (reason, detail), done only


async def read_recent(room: Room) -> Recent:
    """The room's recent state (empty for a room with no database yet)."""
    db = await open_reader(room)
    if db is None:
        return Recent()
    try:
        threads = [r[0] for r in await db.fetchall("recent.threads")]
        turns = await db.fetchall("recent.turns", (RECENT_TURNS,))
        turn_ids = tuple(r["id"] for r in turns)
        calls = await db.fetchall("recent.calls", (json.dumps(turn_ids),))
        steps = await db.fetchall("recent.steps", (RECENT_STEPS,))
    finally:
        await db.close()
    return Recent(
        threads=threads,
        turns=[TurnRecord(r["id"], r["thread_id"], TurnStatus(r["status"]), r["reason"],
                          r["created_at"], r["text"], r["group_name"], r["channel"],
                          r["sender"]) for r in turns],
        calls=[CallRecord(r["id"], r["turn_id"], r["thread_id"], r["tool"],
                          json_or_text(r["args"]), CallStatus(r["status"]), r["result"],
                          r["suspend_reason"] if r["status"] == "suspended" else r["error"],
                          r["created_at"], r["updated_at"], r["ended_at"], r["awaiting"])
               for r in calls],
        steps=[StepRecord(r["id"], r["turn_id"], r["thread_id"], r["kind"],
                          StepStatus(r["status"]), r["summary"], r["started_at"],
                          r["ended_at"] - r["started_at"] if r["ended_at"] is not None else None,
                          r["group_name"], r["channel"])
               for r in steps],
    )  # fmt: skip


async def read_conversation(room: Room, thread_id: str, limit: int) -> Conversation:
    """A thread's newest `limit` messages, and how the turns among them ended."""
    db = await open_reader(room)
    if db is None:
        return Conversation([], {})
    try:
        rows = await db.fetchall("recent.conversation", (thread_id, limit))
        turn_ids = list(dict.fromkeys(r["turn_id"] for r in rows))
        turns = await db.fetchall("recent.turn_ends", (json.dumps(turn_ids),))
    finally:
        await db.close()
    firsts = {r["first_seq"]: r for r in turns}
    return Conversation(
        [_chat(r, firsts.get(r["seq"])) for r in reversed(list(rows))],
        {r["id"]: (r["reason"], r["detail"]) for r in turns if r["status"] == "done"},
    )


def _chat(row: Any, turn: Any) -> ChatRecord:
    """A stored message; its turn's sender and channel when it is the turn's user message."""
    if turn is None or turn["id"] != row["turn_id"] or row["role"] != "user":
        return ChatRecord(row["role"], row["text"], row["turn_id"], seq=row["seq"])
    return ChatRecord(row["role"], row["text"], row["turn_id"], turn["channel"], turn["sender"],
                      row["seq"])  # fmt: skip
