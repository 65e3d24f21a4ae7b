"""Retention's reads and writes of the truth layer (engine/store/sql/*/retention.sql) and of
the bus: which finished turns may be pruned, what pruning them frees, and the statements
that prune a batch of them in one transaction. What a pruned turn keeps, and why, is
engine/services/retention.py's to say.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.store.base import Op, Reading

# The index retention finds a turn's events by, made by its first pass (so a room that never
# prunes never pays for it: every event written adds an entry). Not a catalogue statement:
# the same text on both databases, and PostgreSQL cannot PREPARE it.
EVENTS_INDEX = "CREATE INDEX IF NOT EXISTS events_turn ON events(turn_id)"

# The statements that prune turns, each run once per turn, in this order: the summary row
# first (it counts the steps before they go).
PER_TURN = (
    "retention.turn_pruned",
    "retention.calls_slimmed",
    "retention.steps_deleted",
    "retention.events_deleted",
    "retention.checkpoints_deleted",
    "retention.outbox_deleted",
)


@dataclass(frozen=True)
class Candidate:
    """A finished turn retention may prune."""

    turn_id: str
    thread_id: str
    ended_at: float


@dataclass(frozen=True)
class Weight:
    """What pruning one turn takes away: its steps, calls (slimmed, not gone) and events,
    and about how many bytes that frees (`bytes`, the estimate of retention.sql's
    `weights`; the outputs its messages give back are added by the service)."""

    turn_id: str
    steps: int
    calls: int
    events: int
    bytes: int


async def candidates(store: Reading, before: float, after: tuple[float, str],
                     limit: int) -> list[Candidate]:  # fmt: skip
    """Up to `limit` finished, unpruned turns that ended before `before`, oldest first,
    after the cursor `after` (ended_at, id), none with a call still open."""
    rows = await store.fetchall("retention.candidates", (before, *after, limit))
    return [Candidate(r[0], r[1], float(r[2])) for r in rows]


async def weights(store: Reading, turn_ids: Sequence[str]) -> list[Weight]:
    rows = await store.fetchall("retention.weights", (json.dumps(list(turn_ids)),))
    return [Weight(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]


async def event_ids(store: Reading, turn_ids: Sequence[str]) -> list[int]:
    """The ids of the turns' events: their seqs on the bus."""
    rows = await store.fetchall("retention.event_ids", (json.dumps(list(turn_ids)),))
    return [int(r[0]) for r in rows]


async def markers(store: Reading, thread_id: str) -> list[tuple[int, str]]:
    """A thread's system entries (compaction markers and their undoing): (seq, body)."""
    return [(int(r[0]), r[1]) for r in await store.fetchall("retention.markers", (thread_id,))]


async def outputs(store: Reading, turn_ids: Sequence[str]) -> list[Any]:
    """The turns' tool results and assistant entries: id, thread_id, seq, role, body."""
    return await store.fetchall("retention.outputs", (json.dumps(list(turn_ids)),))


def pruned(turn_ids: Sequence[str], at: float) -> list[Op]:
    """The statements that prune `turn_ids` (one transaction), the summary rows first."""
    ops: list[Op] = []
    for name in PER_TURN:
        first = name == "retention.turn_pruned"
        ops += [(name, (at, turn_id) if first else (turn_id,)) for turn_id in turn_ids]
    return ops


def events_indexed() -> Op:
    """Retention's index of events by turn, made if it is not there yet (the first pass on a
    large room builds it once, holding the writes meanwhile)."""
    return (EVENTS_INDEX, ())


def message_slimmed(message_id: int, text: str, body: str) -> Op:
    return ("retention.message_slimmed", (text, body, message_id))


# -- the bus (bus/events.db, a plain SQLite file several rooms may share) ----------------------


def bus_forget(path: Path, room: str, seqs: Sequence[int]) -> int:
    """Delete `room`'s events with these seqs from the bus at `path`, if there is one, in
    one short transaction (blocking: call it in a worker thread); how many went."""
    import sqlite3

    if not seqs or not path.exists():
        return 0
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=5000")  # other rooms' processes write it too
        conn.execute("BEGIN IMMEDIATE")
        before = conn.total_changes
        conn.executemany("DELETE FROM bus_events WHERE room = ? AND seq = ?",
                         [(room, seq) for seq in seqs])  # fmt: skip
        conn.execute("COMMIT")
        return conn.total_changes - before
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):  # a bus file no runtime prepared yet
            return 0
        raise
    finally:
        conn.close()
