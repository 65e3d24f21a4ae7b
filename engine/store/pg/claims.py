"""What a worker of a cluster claims, in SQL: which threads have work it may take, the
fence every checkpoint of a leased thread runs, blocks of step ids, and the wake-up sent
when work appears or a budget slot frees (engine/cluster/member.py uses these).

The fence is a function in the database (`agentdeck_fence`), so that a checkpoint can
carry it as one more statement of its write: the writer runs it first in the write's
transaction, and a lease that is no longer the worker's fails that write alone, with
SQLSTATE `AD409` (the store raises `LeaseLost`), while the other writes of the batch commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from engine.store.pg.cluster import FENCED, Conn, ensure_schema
from engine.store.sqlite import Op, Store

WORK_CHANNEL = "agentdeck_work"  # notices: a request queued, a slot freed, a turn settled
CANCEL_CHANNEL = "agentdeck_cancel"  # "<turn id>\n<reason>": the worker running it cancels it
RULES_CHANNEL = "agentdeck_rules"  # a rule made, revoked or spent: every worker reads them again
STEP_BLOCK = 1 << 20  # step ids a worker takes at a time (ids are unique across workers)
_LOCK = 0x61646B636C6D73  # "adkclms": serializes `ensure` across workers


def announce(thread_id: str) -> list[Op]:
    """A statement that wakes the cluster when the write it rides commits."""
    return [("SELECT pg_notify(%s, %s)", (WORK_CHANNEL, thread_id))]


SCHEMA = f"""
CREATE SEQUENCE IF NOT EXISTS step_blocks;
CREATE OR REPLACE FUNCTION agentdeck_fence(p_thread text, p_token bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE holder text; current bigint; expires float8;
BEGIN
    -- KEY SHARE, as fenced() in cluster.py: a takeover waits for it, the heartbeat does not
    SELECT worker_id, token, expires_at INTO holder, current, expires
        FROM thread_leases WHERE thread_id = p_thread FOR KEY SHARE;
    IF NOT FOUND OR holder IS NULL OR current <> p_token THEN
        RAISE EXCEPTION 'agentdeck fenced: the lease of thread % under token % is not held',
            p_thread, p_token USING ERRCODE = '{FENCED}';
    END IF;
    IF expires <= extract(epoch FROM clock_timestamp()) THEN
        RAISE EXCEPTION 'agentdeck fenced: the lease of thread % under token % has expired',
            p_thread, p_token USING ERRCODE = '{FENCED}';
    END IF;
    RETURN 1;
END $$;
"""

# The fence as a write's first statement.
FENCE_SQL = "SELECT agentdeck_fence(%s, %s)"

# Threads with work a worker may take, best first: turns left running (a dead worker's:
# recovery), waiting turns with a queued decision, and queued requests of a thread no
# turn holds waiting, in groups not full across the cluster (%(full)s).
CLAIMABLE = """
WITH work AS (
    SELECT thread_id, 1000000 AS rank, created_at FROM turns WHERE status = 'running'
    UNION ALL
    SELECT c.thread_id, 1000000, d.created_at FROM decisions d
        JOIN tool_calls c ON c.id = d.call_id
        WHERE d.status = 'queued' AND c.status = 'suspended'
    UNION ALL
    SELECT r.thread_id, COALESCE((%(priorities)s::jsonb ->> r.group_name)::int, 0), r.created_at
        FROM turn_requests r WHERE r.status = 'queued'
        AND NOT (r.group_name = ANY(%(full)s::text[]))
        AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.thread_id = r.thread_id
                        AND t.status = 'waiting')
)
SELECT w.thread_id FROM work w LEFT JOIN thread_leases l ON l.thread_id = w.thread_id
WHERE l.worker_id IS NULL OR l.expires_at <= extract(epoch FROM clock_timestamp())
GROUP BY w.thread_id ORDER BY max(w.rank) DESC, min(w.created_at) LIMIT %(limit)s
"""


async def ensure(conn: Conn) -> None:
    """The cluster's tables (cluster.py), the fence and the step-id blocks; the blocks
    start above every step id already in the room (one that ran without a cluster)."""
    await ensure_schema(conn)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        await conn.execute(SCHEMA)
        await conn.execute(
            "SELECT setval('step_blocks', GREATEST((SELECT last_value FROM step_blocks),"
            " (SELECT coalesce(max(id), 0) FROM steps) / %s + 1))",
            (STEP_BLOCK,),
        )
        # Rule ids come from the rules table's own sequence, above every id in the room
        # (rules made by a runtime alone on this database gave their ids themselves).
        await conn.execute(
            "SELECT setval(seq, GREATEST(coalesce(pg_sequence_last_value(seq), 0),"
            " (SELECT coalesce(max(id), 0) FROM rules), 1))"
            " FROM (SELECT pg_get_serial_sequence('rules', 'id')::regclass AS seq) s"
        )


async def claimable(
    conn: Conn, *, full: Sequence[str], priorities: Mapping[str, int], limit: int
) -> list[str]:
    """Up to `limit` threads with work that no live lease holds, best first."""
    cur = await conn.execute(
        CLAIMABLE, {"full": list(full), "priorities": json.dumps(dict(priorities)),
                    "limit": limit},
    )  # fmt: skip
    return [row[0] for row in await cur.fetchall()]


async def step_block(conn: Conn) -> int:
    """The first id of a block of STEP_BLOCK step ids no other worker will use; taken
    after a lease is, it is above every id the thread's earlier holders used."""
    cur = await conn.execute("SELECT nextval('step_blocks')")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0]) * STEP_BLOCK


async def rule_id(conn: Conn) -> int:
    """The id of a new rule: no other worker gets it."""
    cur = await conn.execute("SELECT nextval(pg_get_serial_sequence('rules', 'id'))")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


def rules_changed() -> Op:
    """The statement that tells every worker to read the rules again, once the write it
    rides commits."""
    return ("SELECT pg_notify(%s, %s)", (RULES_CHANNEL, ""))


async def notify_work(conn: Conn, thread_id: str | None = None) -> None:
    """Wake every worker's claim: a request was queued, a decision recorded, a slot freed."""
    await conn.execute("SELECT pg_notify(%s, %s)", (WORK_CHANNEL, thread_id or ""))


def cancel_notice(turn_id: str, reason: str) -> Op:
    """Tell the worker running the turn to cancel it, when the cancel's record commits."""
    return ("SELECT pg_notify(%s, %s)", (CANCEL_CHANNEL, f"{turn_id}\n{reason}"[:7000]))


async def listen_work(conn: Conn) -> None:
    await conn.execute(f"LISTEN {WORK_CHANNEL}")
    await conn.execute(f"LISTEN {CANCEL_CHANNEL}")
    await conn.execute(f"LISTEN {RULES_CHANNEL}")


async def going_on(store: Store, turn_id: str, now: float) -> bool:
    """Whether a turn that reads `waiting` on a cluster is about to go on: a suspended call
    of it has a decision queued, or a worker leases its thread (a waiting turn's thread is
    given back at once, so a lease on it means a worker is resuming it, or just left it)."""
    return bool(await store.scalar(
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM decisions d JOIN tool_calls c ON c.id = d.call_id"
        " WHERE d.status='queued' AND c.status='suspended' AND c.turn_id = %s)"
        " OR EXISTS (SELECT 1 FROM thread_leases l JOIN turns t ON t.thread_id = l.thread_id"
        " WHERE t.id = %s AND l.worker_id IS NOT NULL AND l.expires_at > %s)",
        (turn_id, turn_id, now),
    ))  # fmt: skip
