"""Cluster coordination on a real PostgreSQL, continued: singleton loops (advisory locks),
decisions across workers (LISTEN/NOTIFY), group budgets across workers. Connections stand
in for workers; expiry is driven by explicit `now` values."""

from __future__ import annotations

import logging
import random

import anyio
import psycopg
import pytest

from engine.cluster import Fenced, Notifier, SingletonLock
from engine.cluster.notify import DecisionNotice, parse_notice
from engine.store.pg import cluster as sql
from tests.test_pg_cluster import LEASE, T0, connect, eventually, workers

pytestmark = pytest.mark.anyio


# --- singleton loops -------------------------------------------------------------------------


async def test_a_loop_lock_moves_when_its_holders_connection_closes(pg_url: str) -> None:
    admin = await connect(pg_url)
    one = SingletonLock(pg_url, "pulse", application_name="agentdeck:w1")
    two = SingletonLock(pg_url, "pulse", application_name="agentdeck:w2")
    hook = SingletonLock(pg_url, "hook", application_name="agentdeck:w2")
    try:
        assert await one.try_acquire() and one.held
        assert not await two.try_acquire()
        assert await hook.try_acquire()  # another loop's lock is another lock
        assert await sql.advisory_lock_holder(admin, "pulse") == "agentdeck:w1"
        assert await sql.advisory_lock_holder(admin, "poll") is None
        assert await one.try_acquire() and await one.still_held()  # idempotent for the holder
        conn = one.connection
        assert conn is not None
        await conn.close()  # the holder goes away without unlocking
        await eventually(two.try_acquire, "the lock to pass to w2")
        assert await sql.advisory_lock_holder(admin, "pulse") == "agentdeck:w2"
        assert not await one.still_held() and not one.held
        assert not await one.try_acquire()  # it reconnects, but w2 holds the lock now
        await two.release()
        assert await one.try_acquire()
    finally:
        for lock in (one, two, hook):
            await lock.release()
        await admin.close()


async def test_a_loop_lock_moves_when_its_holders_backend_is_killed(pg_url: str) -> None:
    """pg_terminate_backend: the server side of a kill -9 or of a lost host."""
    admin = await connect(pg_url)
    one = SingletonLock(pg_url, "poll", application_name="agentdeck:w1")
    two = SingletonLock(pg_url, "poll", application_name="agentdeck:w2")
    try:
        assert await one.try_acquire() and not await two.try_acquire()
        assert one.connection is not None
        pid = one.connection.info.backend_pid
        cur = await admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
        assert await cur.fetchone() == (True,)
        await eventually(two.try_acquire, "the lock to pass to w2")
        assert not await one.still_held()  # the holder finds out at its next check
        assert not await one.try_acquire()
    finally:
        await one.release()
        await two.release()
        await admin.close()


# --- decisions across workers ----------------------------------------------------------------


async def decide(conn: psycopg.AsyncConnection, decision: str, call: str, thread: str) -> None:
    """What the store does when a decision arrives: the row and the notice, one transaction."""
    async with conn.transaction():
        await conn.execute("INSERT INTO tool_calls VALUES (%s, %s) ON CONFLICT DO NOTHING",
                           (call, thread))  # fmt: skip
        await conn.execute("INSERT INTO decisions VALUES (%s, %s, 'queued')", (decision, call))
        await sql.notify_decision(conn, decision, thread)


async def first_notice(notifier: Notifier, holds=None) -> DecisionNotice:  # noqa: ANN001
    with anyio.fail_after(20):
        async for notice in notifier.notices(holds):
            return notice
    raise AssertionError("the notices ended")


async def test_a_decision_reaches_the_worker_holding_its_thread(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with workers(pg_url, 2) as (holder, other):
        await holder.acquire(["t"], now=T0)
        async with Notifier(pg_url) as notifier:
            # rolled back: never announced
            with pytest.raises(RuntimeError):
                async with other.conn.transaction():
                    await sql.notify_decision(other.conn, "d0", "t")
                    raise RuntimeError("the decision's transaction failed")
            await decide(other.conn, "d1", "c1", "elsewhere")  # a thread it does not hold
            await other.conn.execute("SELECT pg_notify(%s, 'not json')", (sql.DECISIONS_CHANNEL,))
            await decide(other.conn, "d2", "c2", "t")
            with caplog.at_level(logging.WARNING, logger="agentdeck"):
                got = await first_notice(notifier, holder.holds)
            assert got == DecisionNotice("d2", "t")
            assert "malformed decision notice" in caplog.text
            cur = await holder.conn.execute("SELECT status FROM decisions WHERE id = 'd2'")
            assert await cur.fetchone() == ("queued",)  # durable before the notice


async def test_a_decision_made_while_no_one_listens_is_found_by_reading(pg_url: str) -> None:
    async with workers(pg_url, 2) as (deciding, later):
        await decide(deciding.conn, "d1", "c1", "t")  # nobody is listening
        async with Notifier(pg_url) as notifier:
            # the worker starting later takes the thread because its decision is queued
            (lease,) = await later.acquire(now=T0)
            assert lease.thread_id == "t"
            cur = await later.conn.execute(
                "SELECT d.id FROM decisions d JOIN tool_calls c ON c.id = d.call_id"
                " WHERE c.thread_id = %s AND d.status = 'queued'",
                (lease.thread_id,),
            )
            assert await cur.fetchall() == [("d1",)]
            # and the notice for d1 was not replayed: the first one it hears is the next
            await decide(deciding.conn, "d2", "c2", "t")
            assert await first_notice(notifier, later.holds) == DecisionNotice("d2", "t")


def test_notice_payloads_parse_or_are_refused() -> None:
    assert parse_notice('{"decision": "d", "thread": "t"}') == DecisionNotice("d", "t")
    for bad in ("", "[]", '{"decision": "d"}', '{"decision": 1, "thread": "t"}', "\x00"):
        assert parse_notice(bad) is None


# --- group budgets across the cluster ----------------------------------------------------


async def test_a_group_budget_holds_with_concurrent_admitters(pg_url: str) -> None:
    limit = 3
    async with workers(pg_url, 8) as ws:
        for i, w in enumerate(ws):
            await w.acquire([f"t{i}"], now=T0)
        rng = random.Random(18)
        running: dict[int, str] = {}  # worker -> its admitted turn
        for rnd in range(15):
            now = T0 + rnd * 0.1
            admitted: list[int] = []

            async def admit(i: int, admitted: list[int], now: float, rnd: int) -> None:
                if await ws[i].try_admit("task", limit, turn_id=f"u{i}.{rnd}",
                                         thread_id=f"t{i}", now=now):  # fmt: skip
                    admitted.append(i)

            async with anyio.create_task_group() as tg:
                for i in range(len(ws)):
                    if i not in running:
                        tg.start_soon(admit, i, admitted, now, rnd)
            assert len(admitted) == limit - len(running), f"round {rnd}"
            running.update((i, f"u{i}.{rnd}") for i in admitted)
            assert await sql.running_turns(ws[0].conn, now=now) == {"task": limit}
            for i in rng.sample(sorted(running), rng.randint(1, limit)):
                await ws[i].finished(running.pop(i))


async def test_a_dead_workers_turns_free_their_slots_at_lease_expiry(pg_url: str) -> None:
    async with workers(pg_url, 3) as (a, b, c):
        for w, t in ((a, "ta"), (b, "tb"), (c, "tc")):
            await w.acquire([t], now=T0)
        assert await a.try_admit("chat", 2, turn_id="ua", thread_id="ta", now=T0)
        assert await b.try_admit("chat", 2, turn_id="ub", thread_id="tb", now=T0)
        assert not await c.try_admit("chat", 2, turn_id="uc", thread_id="tc", now=T0)
        assert await a.try_admit("chat", 2, turn_id="ua", thread_id="ta", now=T0)  # same turn
        await a.heartbeat(now=T0 + 5)
        await c.heartbeat(now=T0 + 5)  # b stops heartbeating: dead at T0 + LEASE
        assert not await c.try_admit("chat", 2, turn_id="uc", thread_id="tc", now=T0 + 9)
        assert await c.try_admit("chat", 2, turn_id="uc", thread_id="tc", now=T0 + LEASE)
        assert await sql.running_turns(a.conn, now=T0 + LEASE) == {"chat": 2}
        # b's thread is recovered by a: its turn is admitted again there, counted once
        (taken,) = await a.acquire(["tb"], now=T0 + LEASE)
        assert taken.taken_from == "w1"
        assert not await a.try_admit("chat", 2, turn_id="ub", thread_id="tb", now=T0 + LEASE)
        await c.finished("uc")
        assert await a.try_admit("chat", 2, turn_id="ub", thread_id="tb", now=T0 + LEASE)
        # b, a zombie, cannot admit under its lost lease
        with pytest.raises(Fenced):
            await b.try_admit("chat", 5, turn_id="ub2", thread_id="tb", now=T0 + LEASE)
        with pytest.raises(Fenced, match="not leased"):
            await c.try_admit("chat", 5, turn_id="x", thread_id="ta", now=T0 + LEASE)
