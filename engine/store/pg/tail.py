"""The newest rows of the `events` and `messages` tables, read past a cursor: what the other
workers of a cluster committed, for this worker's event bus (engine/cluster/relay.py).

A cursor is the highest id read and the ids below it that were missing then. PostgreSQL
hands out identity ids when a row is inserted, not when its transaction commits: a worker's
batch holding id 10 may commit after another worker's id 11 is visible, so a reader that
only asks for `id > 11` next would never see 10. The missing ids are asked for again by
name (`id = ANY(...)`) until they show up (or the relay gives up on them: a rolled-back
write leaves ids that never will).

This worker's own events are read for their ids only (their body is not sent): its bus
handed them already.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.store.pg.cluster import Conn

EVENTS = """
SELECT id, run_id = %(me)s, CASE WHEN run_id = %(me)s THEN NULL ELSE body END
FROM events WHERE id > %(after)s{missing} ORDER BY id LIMIT %(limit)s
"""
MESSAGES = """
SELECT id, thread_id, turn_id, seq, role, text, created_at
FROM messages WHERE id > %(after)s{missing} ORDER BY id LIMIT %(limit)s
"""
_MISSING = " OR id = ANY(%(missing)s::bigint[])"


async def tops(conn: Conn, lookback: int) -> tuple[int, list[int], int, list[int]]:
    """Where a reader starting now begins: for events, then messages, the highest id and
    the ids of the `lookback` ids below it that are not there (maybe not committed yet)."""
    found: list[Any] = []
    for table in ("events", "messages"):
        cur = await conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
        row = await cur.fetchone()
        top = int(row[0]) if row else 0
        cur = await conn.execute(f"SELECT id FROM {table} WHERE id > %s AND id <= %s",
                                 (top - lookback, top))  # fmt: skip
        there = {int(r[0]) for r in await cur.fetchall()}
        found += [top, [i for i in range(max(1, top - lookback + 1), top + 1) if i not in there]]
    return found[0], found[1], found[2], found[3]


async def events_after(conn: Conn, me: str, after: int, missing: Sequence[int],
                       limit: int) -> list[tuple[int, bool, str | None]]:  # fmt: skip
    """Events with id above `after` or among `missing`, in id order, `limit` at most: (id,
    whether run `me` stored it, its JSON unless it did)."""
    sql = EVENTS.format(missing=_MISSING if missing else "")
    cur = await conn.execute(sql, {"me": me, "after": after, "missing": list(missing),
                                   "limit": limit})  # fmt: skip
    return [(int(r[0]), bool(r[1]), r[2]) for r in await cur.fetchall()]


async def messages_after(conn: Conn, after: int, missing: Sequence[int],
                         limit: int) -> list[tuple[Any, ...]]:  # fmt: skip
    """Conversation entries with id above `after` or among `missing`, in id order, `limit`
    at most: (id, thread, turn, seq, role, text, created_at)."""
    sql = MESSAGES.format(missing=_MISSING if missing else "")
    cur = await conn.execute(sql, {"after": after, "missing": list(missing), "limit": limit})
    return [tuple(r) for r in await cur.fetchall()]
