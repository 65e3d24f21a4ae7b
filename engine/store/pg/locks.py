"""Advisory locks of the cluster's singleton loops (engine/cluster/singleton.py): a loop's
name as a 64-bit key, taken for a session, and who holds it (pg_locks)."""

from __future__ import annotations

import hashlib

from engine.store.pg.cluster import Conn


def advisory_key(name: str) -> int:
    """The 64-bit advisory lock key of a singleton loop's name (stable across versions)."""
    digest = hashlib.sha256(f"agentdeck:loop:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


async def try_advisory_lock(conn: Conn, name: str) -> bool:
    """Take the loop's lock for this session if no other session holds it."""
    cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (advisory_key(name),))
    row = await cur.fetchone()
    return bool(row and row[0])


async def advisory_unlock(conn: Conn, name: str) -> bool:
    cur = await conn.execute("SELECT pg_advisory_unlock(%s)", (advisory_key(name),))
    row = await cur.fetchone()
    return bool(row and row[0])


_LOCK_WHERE = (
    "l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " AND l.classid::int8 = %s AND l.objid::int8 = %s"
)


def _halves(name: str) -> tuple[int, int]:
    key = advisory_key(name) & 0xFFFFFFFFFFFFFFFF
    return key >> 32, key & 0xFFFFFFFF


async def advisory_lock_held(conn: Conn, name: str) -> bool:
    """Whether this session still holds the loop's lock (asks the server)."""
    cur = await conn.execute(
        f"SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE {_LOCK_WHERE}"
        " AND l.pid = pg_backend_pid())",
        _halves(name),
    )
    row = await cur.fetchone()
    return bool(row and row[0])


async def advisory_lock_holder(conn: Conn, name: str) -> str | None:
    """The application_name (else the backend pid) of the session holding the loop's lock."""
    cur = await conn.execute(
        "SELECT COALESCE(NULLIF(a.application_name, ''), l.pid::text) FROM pg_locks l"
        f" LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE {_LOCK_WHERE}",
        _halves(name),
    )
    row = await cur.fetchone()
    return None if row is None else str(row[0])
