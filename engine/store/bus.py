"""bus/events.db: the shared projection of the public events of one machine's rooms.

Each room's runtime copies its own public events here (engine/services/projector.py) after they
are in its execution.db, keyed by (room, seq) where seq is the event's id in that room's
truth, and keeps one `rooms` row current: its counts, its owner's pid and the last seq it
copied. Several processes write one file, each only its own room's rows, so the
connection is WAL with a busy timeout, and each copy is one short IMMEDIATE transaction.
The bus is a projection, rebuilt from the truth whenever it lags or is lost, so it is
written with synchronous=NORMAL. A plain sqlite3 connection used from a worker thread
(`anyio.to_thread`), one call at a time.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from engine.store.sqlite import Store, StoreError

SCHEMA = """
CREATE TABLE IF NOT EXISTS rooms (
    room        TEXT PRIMARY KEY,       -- the room's path
    name        TEXT NOT NULL,
    updated_at  REAL NOT NULL,
    running     INTEGER NOT NULL DEFAULT 0,  -- turns running, as its truth says
    waiting     INTEGER NOT NULL DEFAULT 0,  -- turns waiting for a decision
    pid         INTEGER,                -- the process that owns it (NULL: stopped)
    last_seq    INTEGER NOT NULL DEFAULT 0   -- the truth's events are copied up to here
);
CREATE TABLE IF NOT EXISTS bus_events (
    room        TEXT NOT NULL,
    seq         INTEGER NOT NULL,       -- the event's id in the room's execution.db
    at          REAL NOT NULL,
    kind        TEXT NOT NULL,
    thread_id   TEXT NOT NULL,
    turn_id     TEXT NOT NULL,
    data        TEXT NOT NULL,          -- JSON: the event's public fields
    PRIMARY KEY (room, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS bus_events_at ON bus_events(at);
"""

BusEvent = tuple[int, float, str, str, str, str]  # seq, at, kind, thread, turn, data JSON


@dataclass(frozen=True)
class RoomRow:
    """One room as the bus shows it."""

    room: str
    name: str
    updated_at: float
    running: int
    waiting: int
    pid: int | None
    last_seq: int


class Bus:
    """One process's connection to a bus file."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path, self._conn = path, conn
        self._lock = threading.Lock()

    @classmethod
    async def open(cls, path: Path) -> Bus:
        """Open (creating it and its folder if needed) the bus at `path`."""
        return cls(path, await anyio.to_thread.run_sync(_connect, path))

    async def close(self) -> None:
        await self._run(lambda conn: conn.close())

    async def _run(self, fn: Any, *args: Any) -> Any:
        def call() -> Any:
            with self._lock:
                try:
                    return fn(self._conn, *args)
                except sqlite3.Error as exc:
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise StoreError(f"bus {self.path}: {exc}") from exc

        return await anyio.to_thread.run_sync(call)

    async def last_seq(self, room: str) -> int:
        """The last seq of `room` the bus holds (0: none)."""
        found = await self._run(_scalar, "SELECT last_seq FROM rooms WHERE room=?", (room,))
        return int(found or 0)

    async def append(self, room: RoomRow, events: Sequence[BusEvent]) -> None:
        """One transaction: `events` of `room` (those already there are left as they are)
        and its row, with `room.last_seq` as the seq copied up to."""
        await self._run(_append, room, list(events))

    async def reset(self, room: str) -> None:
        """Forget `room`'s events and row (its truth is not the one they came from)."""
        await self._run(_reset, room)

    async def rooms(self) -> list[RoomRow]:
        """Every room on the bus, by name."""
        found = await self._run(_all, "SELECT room, name, updated_at, running, waiting, pid,"
                                      " last_seq FROM rooms ORDER BY name, room", ())  # fmt: skip
        return [RoomRow(*r) for r in found]

    async def events(self, room: str, after: int = 0, limit: int = 500) -> list[BusEvent]:
        """`room`'s events after seq `after`, in order, `limit` at a time."""
        found = await self._run(
            _all, "SELECT seq, at, kind, thread_id, turn_id, data FROM bus_events"
            " WHERE room=? AND seq>? ORDER BY seq LIMIT ?", (room, after, limit)
        )  # fmt: skip
        return [tuple(r) for r in found]


def _connect(path: Path) -> sqlite3.Connection:
    try:
        # Private to its owner, as the room is: the folder 0700, the file 0600 before SQLite
        # opens it (its -wal and -shm files take the database file's mode).
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"cannot open the bus {path}: {exc}") from exc
    try:
        conn.execute("PRAGMA busy_timeout=5000")  # other rooms' processes write it too
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # a projection: rebuilt from the truth
        conn.executescript(SCHEMA)
    except sqlite3.Error as exc:
        conn.close()
        raise StoreError(f"cannot prepare the bus {path}: {exc}") from exc
    return conn


def _scalar(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> Any:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def _all(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _reset(conn: sqlite3.Connection, room: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM bus_events WHERE room=?", (room,))
    conn.execute("DELETE FROM rooms WHERE room=?", (room,))
    conn.execute("COMMIT")


def _append(conn: sqlite3.Connection, room: RoomRow, events: list[BusEvent]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO bus_events(room, seq, at, kind, thread_id, turn_id, data)"
        " VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
        [(room.room, *e) for e in events],
    )
    conn.execute(
        "INSERT INTO rooms(room, name, updated_at, running, waiting, pid, last_seq)"
        " VALUES (?,?,?,?,?,?,?) ON CONFLICT(room) DO UPDATE SET name=excluded.name,"
        " updated_at=excluded.updated_at, running=excluded.running, waiting=excluded.waiting,"
        " pid=excluded.pid, last_seq=excluded.last_seq",
        (room.room, room.name, room.updated_at, room.running, room.waiting, room.pid,
         room.last_seq),
    )  # fmt: skip
    conn.execute("COMMIT")


# -- what the projector reads of a room's truth (execution.db) ---------------------------------

# The kinds of event the bus shows (engine/store/sql/*/projection.sql names them too).
PUBLIC_KINDS = ("turn_started", "turn_changed", "call_changed", "decision_recorded",
                "delivery_changed")  # fmt: skip


async def top_seq(store: Store) -> int:
    """The id of the room's newest stored event (0: none)."""
    return int(await store.scalar("projection.top_seq"))


async def public_events(store: Store, after: int, upto: int, limit: int) -> list[Any]:
    """The room's public events with `after` < id <= `upto`, in order, `limit` at a time: a
    call's only while it waits (its other states carry results, and are not news)."""
    return await store.fetchall("projection.public_events", (after, upto, limit))


async def turn_counts(store: Store) -> tuple[int, int]:
    """Turns running and waiting in the room's truth."""
    rows = await store.fetchall("projection.turn_counts")
    found: dict[str, int] = {status: n for status, n in rows}
    return int(found.get("running", 0)), int(found.get("waiting", 0))
