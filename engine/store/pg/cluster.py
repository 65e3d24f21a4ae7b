"""Cluster coordination on PostgreSQL (issue 18): the SQL of workers, thread leases with
fencing tokens, singleton-loop advisory locks, decision notifications and group budgets.

Several runtime workers share one database. A worker runs a thread's turns only while it
holds the thread's lease (`acquire`, taken with FOR UPDATE SKIP LOCKED so two workers never
take the same thread), extends its leases with its heartbeat, and checks its lease's fencing
token in every checkpoint transaction (`fenced`): a lease that expired is taken over with a
new, higher token, so a worker that lost it (a zombie) can no longer commit.

These tables are this module's own, created by `ensure_schema` (IF NOT EXISTS, serialized by
a transaction advisory lock so workers starting together do not race on the catalog). Times
are epoch seconds (float8) like the rest of the room; every function takes `now`, and None
means the database's clock, so workers on hosts with skewed clocks agree on expiry.
Connections are expected in autocommit mode (each function runs its own transaction, or a
savepoint inside the caller's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.pq import TransactionStatus

Conn = AsyncConnection[Any]
FENCED = "AD409"  # the SQLSTATE of a write (or an admission) under a lease no longer held

_SCHEMA_LOCK = 0x61646B636C7573  # "adkclus": serializes ensure_schema across workers

SCHEMA = """
CREATE SEQUENCE IF NOT EXISTS thread_lease_token;

CREATE TABLE IF NOT EXISTS workers (
    id            TEXT PRIMARY KEY,
    host          TEXT NOT NULL,
    pid           INTEGER NOT NULL,
    started_at    DOUBLE PRECISION NOT NULL,
    heartbeat_at  DOUBLE PRECISION NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('running', 'stopped'))
);

-- A row per thread ever leased. Held while worker_id is set and expires_at is ahead;
-- token comes from thread_lease_token at each grant, so a takeover always raises it.
CREATE TABLE IF NOT EXISTS thread_leases (
    thread_id    TEXT PRIMARY KEY,
    worker_id    TEXT REFERENCES workers(id) ON DELETE SET NULL,
    token        BIGINT NOT NULL DEFAULT 0,
    acquired_at  DOUBLE PRECISION,
    expires_at   DOUBLE PRECISION NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS thread_leases_worker ON thread_leases(worker_id)
    WHERE worker_id IS NOT NULL;

-- The row admitters of a group lock; group_slots holds its running turns, each counted
-- while the lease it was admitted under (thread, token) is still held.
CREATE TABLE IF NOT EXISTS group_budgets (
    group_name  TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS group_slots (
    turn_id      TEXT PRIMARY KEY,
    group_name   TEXT NOT NULL REFERENCES group_budgets(group_name),
    thread_id    TEXT NOT NULL,
    token        BIGINT NOT NULL,
    admitted_at  DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS group_slots_group ON group_slots(group_name);

-- try_admit in one statement: one round trip where the steps took nine, while the group's
-- row is locked (every admission of the group, cluster-wide, waits for it). A VOLATILE
-- function's statements each take a new snapshot, so the slots are read after the lock.
CREATE OR REPLACE FUNCTION agentdeck_admit(p_group text, p_limit bigint, p_turn text,
    p_thread text, p_token bigint, p_now float8) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE holder text; current bigint; expires float8; v_now float8; running bigint;
BEGIN
    v_now := COALESCE(p_now, extract(epoch FROM clock_timestamp())::float8);
    SELECT worker_id, token, expires_at INTO holder, current, expires
        FROM thread_leases WHERE thread_id = p_thread FOR KEY SHARE;  -- as fenced()
    IF NOT FOUND THEN
        RAISE EXCEPTION 'thread %: never leased, token % is not valid', p_thread, p_token
            USING ERRCODE = 'AD409';
    ELSIF holder IS NULL OR current <> p_token THEN
        RAISE EXCEPTION 'thread %: lease token % was superseded by %', p_thread, p_token,
            current USING ERRCODE = 'AD409';
    ELSIF expires <= v_now THEN
        RAISE EXCEPTION 'thread %: lease token % has expired', p_thread, p_token
            USING ERRCODE = 'AD409';
    END IF;
    INSERT INTO group_budgets(group_name) VALUES (p_group) ON CONFLICT DO NOTHING;
    PERFORM 1 FROM group_budgets WHERE group_name = p_group FOR UPDATE;
    DELETE FROM group_slots s WHERE s.group_name = p_group AND NOT EXISTS (
        SELECT 1 FROM thread_leases l WHERE l.thread_id = s.thread_id
        AND l.token = s.token AND l.worker_id IS NOT NULL AND l.expires_at > v_now);
    SELECT count(*) INTO running FROM group_slots
        WHERE group_name = p_group AND turn_id <> p_turn;
    IF running >= p_limit THEN
        RETURN false;
    END IF;
    INSERT INTO group_slots(turn_id, group_name, thread_id, token, admitted_at)
        VALUES (p_turn, p_group, p_thread, p_token, v_now) ON CONFLICT (turn_id) DO UPDATE SET
        group_name = excluded.group_name, thread_id = excluded.thread_id,
        token = excluded.token, admitted_at = excluded.admitted_at;
    RETURN true;
END $$;
"""

# Threads with work a worker should pick up, read from the store's own tables (the port of
# engine/store/schema.sql): queued turn requests, turns left running (crash recovery), and
# queued decisions for suspended calls.
RUNNABLE = """
SELECT thread_id FROM turn_requests WHERE status = 'queued'
UNION SELECT thread_id FROM turns WHERE status = 'running'
UNION SELECT c.thread_id FROM decisions d JOIN tool_calls c ON c.id = d.call_id
      WHERE d.status = 'queued'
"""

_DB_NOW = "extract(epoch FROM clock_timestamp())::float8"


class ClusterError(Exception):
    """A coordination step that cannot go on."""


class Fenced(ClusterError):
    """The lease a transaction was committing under is no longer this worker's."""


@dataclass(frozen=True, slots=True)
class Lease:
    """A thread leased to a worker; `taken_from` names the holder whose lease had expired."""

    thread_id: str
    worker_id: str
    token: int
    expires_at: float
    taken_from: str | None = None


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """One worker as `agentdeck status` lists it."""

    id: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    state: str  # running | stopped
    leases: int
    alive: bool


async def ensure_schema(conn: Conn) -> None:
    """Create the cluster's tables if they are missing; safe to run from every worker."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        await conn.execute(SCHEMA)


async def db_now(conn: Conn, now: float | None = None) -> float:
    """`now`, or the database's clock when None."""
    if now is not None:
        return now
    cur = await conn.execute(f"SELECT {_DB_NOW}")
    row = await cur.fetchone()
    assert row is not None
    return float(row[0])


def _thread(lease: Lease) -> str:
    return lease.thread_id


# --- workers -------------------------------------------------------------------------------


async def register_worker(
    conn: Conn, worker_id: str, host: str, pid: int, *, now: float | None = None
) -> None:
    """Record a worker as running (again, if the id comes back after a restart). Leases
    still under its id were its previous life's (killed, never taken up by this one): they
    are freed at once, for any worker to take over now rather than at their expiry."""
    async with conn.transaction():
        at = await db_now(conn, now)
        await conn.execute(
            "INSERT INTO workers(id, host, pid, started_at, heartbeat_at, state)"
            " VALUES (%s, %s, %s, %s, %s, 'running') ON CONFLICT (id) DO UPDATE SET"
            " host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,"
            " heartbeat_at = excluded.heartbeat_at, state = 'running'",
            (worker_id, host, pid, at, at),
        )
        await release(conn, worker_id, None)


async def heartbeat(
    conn: Conn,
    worker_id: str,
    lease_seconds: float,
    *,
    held: dict[str, int] | None = None,
    now: float | None = None,
) -> list[Lease]:
    """Mark the worker alive and extend every lease it still holds (of those, only the
    `held` thread -> token it took: a lease under its id it never took is not its own);
    returns those leases.

    A lease that already expired is not revived (another worker may be taking it): the
    worker has lost that thread and must acquire it again, with a new token."""
    names = None if held is None else list(held)
    tokens = None if held is None else list(held.values())
    async with conn.transaction():
        at = await db_now(conn, now)
        cur = await conn.execute(
            "UPDATE workers SET heartbeat_at = %s WHERE id = %s AND state = 'running'",
            (at, worker_id),
        )
        if cur.rowcount == 0:
            raise ClusterError(f"worker {worker_id!r} is not registered as running")
        # NO KEY UPDATE, as the UPDATE itself: compatible with the fence's KEY SHARE, so a
        # heartbeat never waits for a checkpoint in flight (a batch fences its threads in its
        # own order: FOR UPDATE here deadlocked with it, and the lease ran out meanwhile)
        cur = await conn.execute(
            "UPDATE thread_leases SET expires_at = %s WHERE thread_id IN ("
            " SELECT thread_id FROM thread_leases WHERE worker_id = %s AND expires_at > %s"
            " AND (%s::text[] IS NULL OR (thread_id, token) IN (SELECT * FROM"
            " unnest(%s::text[], %s::bigint[])))"
            " ORDER BY thread_id FOR NO KEY UPDATE) RETURNING thread_id, token, expires_at",
            (at + lease_seconds, worker_id, at, names, names, tokens),
        )
        rows = await cur.fetchall()
    return sorted((Lease(t, worker_id, tok, exp) for t, tok, exp in rows), key=_thread)


async def deregister_worker(conn: Conn, worker_id: str, *, now: float | None = None) -> None:
    """A worker stopping cleanly: its leases are released at once, it is listed as stopped."""
    async with conn.transaction():
        at = await db_now(conn, now)
        await release(conn, worker_id, None)
        await conn.execute(
            "UPDATE workers SET state = 'stopped', heartbeat_at = %s WHERE id = %s",
            (at, worker_id),
        )


async def list_workers(
    conn: Conn, lease_seconds: float, *, now: float | None = None
) -> list[WorkerRow]:
    """Every worker with its live lease count; dead once its heartbeat is a lease time old."""
    at = await db_now(conn, now)
    cur = await conn.execute(
        "SELECT w.id, w.host, w.pid, w.started_at, w.heartbeat_at, w.state,"
        " count(l.thread_id) FROM workers w LEFT JOIN thread_leases l"
        " ON l.worker_id = w.id AND l.expires_at > %s"
        " GROUP BY w.id ORDER BY w.started_at, w.id",
        (at,),
    )
    return [
        WorkerRow(i, h, p, s, hb, st, n, st == "running" and hb + lease_seconds > at)
        for i, h, p, s, hb, st, n in await cur.fetchall()
    ]


# --- thread leases -------------------------------------------------------------------------


async def runnable_threads(conn: Conn) -> list[str]:
    """Threads with work waiting (needs the store's tables: turn_requests, turns, ...)."""
    cur = await conn.execute(RUNNABLE)
    return sorted({r[0] for r in await cur.fetchall()})


async def acquire(
    conn: Conn,
    worker_id: str,
    threads: Sequence[str] | None,
    lease_seconds: float,
    *,
    limit: int | None = None,
    now: float | None = None,
) -> list[Lease]:
    """Lease to `worker_id` those of `threads` (None: the runnable ones) that no one holds or
    whose lease expired, at most `limit`; each grant gets a new token from the sequence.

    Rows another worker is granting at this moment are skipped (FOR UPDATE SKIP LOCKED), so
    two workers never take the same thread and neither waits for the other."""
    async with conn.transaction():
        at = await db_now(conn, now)
        candidates = await runnable_threads(conn) if threads is None else sorted(set(threads))
        if not candidates:
            return []
        # sorted, so two workers inserting overlapping sets wait on each other in one order
        await conn.execute(
            "INSERT INTO thread_leases(thread_id)"
            " SELECT t FROM unnest(%s::text[]) AS t ORDER BY t ON CONFLICT DO NOTHING",
            (candidates,),
        )
        cur = await conn.execute(
            "SELECT thread_id, worker_id FROM thread_leases WHERE thread_id = ANY(%s)"
            " AND (worker_id IS NULL OR expires_at <= %s)"
            " ORDER BY thread_id LIMIT %s FOR UPDATE SKIP LOCKED",
            (candidates, at, limit),
        )
        previous = dict(await cur.fetchall())
        if not previous:
            return []
        cur = await conn.execute(
            "UPDATE thread_leases SET worker_id = %s, token = nextval('thread_lease_token'),"
            " acquired_at = %s, expires_at = %s WHERE thread_id = ANY(%s)"
            " RETURNING thread_id, token, expires_at",
            (worker_id, at, at + lease_seconds, list(previous)),
        )
        rows = await cur.fetchall()
    return sorted((Lease(t, worker_id, tok, exp, previous[t]) for t, tok, exp in rows), key=_thread)


async def release(conn: Conn, worker_id: str, threads: Sequence[str] | None) -> list[str]:
    """Give up the worker's leases on `threads` (None: all of them); returns those released.
    A lease that has since passed to another worker is not touched."""
    cur = await conn.execute(
        "UPDATE thread_leases SET worker_id = NULL, expires_at = 0 WHERE thread_id IN ("
        " SELECT thread_id FROM thread_leases WHERE worker_id = %s"
        " AND (%s::text[] IS NULL OR thread_id = ANY(%s::text[]))"
        " ORDER BY thread_id FOR UPDATE) RETURNING thread_id",
        (worker_id, threads and list(threads), threads and list(threads)),
    )
    return sorted(r[0] for r in await cur.fetchall())


async def leases(
    conn: Conn, *, worker_id: str | None = None, now: float | None = None
) -> list[Lease]:
    """The leases held now (of one worker, or of all)."""
    at = await db_now(conn, now)
    cur = await conn.execute(
        "SELECT thread_id, worker_id, token, expires_at FROM thread_leases"
        " WHERE worker_id IS NOT NULL AND expires_at > %s"
        " AND (%s::text IS NULL OR worker_id = %s::text) ORDER BY thread_id",
        (at, worker_id, worker_id),
    )
    return [Lease(t, w, tok, exp) for t, w, tok, exp in await cur.fetchall()]


async def fenced(conn: Conn, thread_id: str, token: int, *, now: float | None = None) -> None:
    """Run inside every checkpoint transaction: raises `Fenced` (so the transaction rolls
    back) unless the thread's lease is still held, unexpired, under `token`.

    The lease row stays key-share-locked until the transaction ends, so no takeover can
    slip in between this check and the commit: a worker taking over (FOR UPDATE) waits
    (skips the thread) until the checkpoint is in, then reads it during recovery. The
    holder's heartbeat (NO KEY UPDATE) does not wait for it."""
    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        raise ClusterError("fenced() must run inside the checkpoint's transaction")
    cur = await conn.execute(
        f"SELECT worker_id, token, expires_at > COALESCE(%s::float8, {_DB_NOW})"
        " FROM thread_leases WHERE thread_id = %s FOR KEY SHARE",
        (now, thread_id),
    )
    row = await cur.fetchone()
    if row is None:
        raise Fenced(f"thread {thread_id}: never leased, token {token} is not valid")
    holder, current, live = row
    if holder is None or current != token:
        raise Fenced(f"thread {thread_id}: lease token {token} was superseded by {current}")
    if not live:
        raise Fenced(f"thread {thread_id}: lease token {token} has expired")


# --- group budgets across the cluster -------------------------------------------------------


async def try_admit(
    conn: Conn,
    group: str,
    limit: int,
    *,
    turn_id: str,
    thread_id: str,
    token: int,
    now: float | None = None,
) -> bool:
    """Count `turn_id` among its group's running turns if fewer than `limit` run now,
    cluster-wide. Admitters of one group queue on its group_budgets row; a turn counts while
    the lease it was admitted under is held, so a dead worker's turns free their slots at
    lease expiry. Admitting the same turn again (after a takeover) moves its slot.
    One statement (`agentdeck_admit`): in autocommit, its own transaction."""
    query = "SELECT agentdeck_admit(%s, %s, %s, %s, %s, %s)"
    params = (group, limit, turn_id, thread_id, token, now)
    try:
        if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
            cur = await conn.execute(query, params)
        else:
            async with conn.transaction():  # a savepoint in the caller's transaction
                cur = await conn.execute(query, params)
    except psycopg.Error as exc:
        if exc.sqlstate == FENCED:
            raise Fenced(exc.diag.message_primary or str(exc)) from None
        raise
    row = await cur.fetchone()
    return bool(row and row[0])


async def finished(conn: Conn, turn_id: str) -> None:
    """The turn stopped running (done, waiting, or given up): its slot is free."""
    await conn.execute("DELETE FROM group_slots WHERE turn_id = %s", (turn_id,))


async def running_turns(conn: Conn, *, now: float | None = None) -> dict[str, int]:
    """Running turns per group across the cluster (slots whose lease is still held)."""
    at = await db_now(conn, now)
    cur = await conn.execute(
        "SELECT s.group_name, count(*) FROM group_slots s JOIN thread_leases l"
        " ON l.thread_id = s.thread_id AND l.token = s.token"
        " WHERE l.worker_id IS NOT NULL AND l.expires_at > %s GROUP BY s.group_name",
        (at,),
    )
    return {g: n for g, n in await cur.fetchall()}
