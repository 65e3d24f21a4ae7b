"""Cluster coordination on a real PostgreSQL, continued: singleton loops (advisory locks),
work notices across workers (LISTEN/NOTIFY), group budgets across workers. Connections stand
in for workers; expiry is driven by explicit `now` values."""

from __future__ import annotations

import random

import anyio
import pytest

from engine.cluster import Fenced, SingletonLock
from engine.cluster.listen import Listener
from engine.store.pg import claims, locks
from engine.store.pg import cluster as sql
from tests.test_pg_cluster import LEASE, T0, connect, workers
from tests.wait import PATIENCE, until

pytestmark = pytest.mark.anyio


# --- singleton loops -------------------------------------------------------------------------


async def test_a_loop_lock_moves_when_its_holders_connection_closes(pg_url: str, pg_pool) -> None:
    admin = await connect(pg_url)
    one = SingletonLock(pg_pool, "pulse", application_name="agentdeck:w1")
    two = SingletonLock(pg_pool, "pulse", application_name="agentdeck:w2")
    hook = SingletonLock(pg_pool, "hook", application_name="agentdeck:w2")
    try:
        assert await one.try_acquire() and one.held
        assert not await two.try_acquire()
        assert await hook.try_acquire()  # another loop's lock is another lock
        assert await locks.advisory_lock_holder(admin, "pulse") == "agentdeck:w1"
        assert await locks.advisory_lock_holder(admin, "poll") is None
        assert await one.try_acquire() and await one.still_held()  # idempotent for the holder
        conn = one.connection
        assert conn is not None
        await conn.close()  # the holder goes away without unlocking
        await until(two.try_acquire, "the lock to pass to w2")
        assert await locks.advisory_lock_holder(admin, "pulse") == "agentdeck:w2"
        assert not await one.still_held() and not one.held
        assert not await one.try_acquire()  # it reconnects, but w2 holds the lock now
        await two.release()
        assert await one.try_acquire()
    finally:
        for lock in (one, two, hook):
            await lock.release()
        await admin.close()


async def test_a_loop_lock_moves_when_its_holders_backend_is_killed(pg_url: str, pg_pool) -> None:
    """pg_terminate_backend: the server side of a kill -9 or of a lost host."""
    admin = await connect(pg_url)
    one = SingletonLock(pg_pool, "poll", application_name="agentdeck:w1")
    two = SingletonLock(pg_pool, "poll", application_name="agentdeck:w2")
    try:
        assert await one.try_acquire() and not await two.try_acquire()
        assert one.connection is not None
        pid = one.connection.info.backend_pid
        cur = await admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
        assert await cur.fetchone() == (True,)
        await until(two.try_acquire, "the lock to pass to w2")
        assert not await one.still_held()  # the holder finds out at its next check
        assert not await one.try_acquire()
    finally:
        await one.release()
        await two.release()
        await admin.close()


# --- work notices: requests, decisions, freed slots ------------------------------------------


async def test_a_notice_goes_out_with_its_write_and_never_for_one_rolled_back(
    pg_url: str, pg_pool
) -> None:
    """What a worker's writes of a request or a decision carry (`announce`): the notice
    leaves at the commit, so it is never heard before the row is durable, nor for a write
    that failed; a cancel notice goes to the cancel callback."""
    heard: list[str] = []
    cancels: list[str] = []
    rules: list[str] = []
    got = anyio.Event()

    async def on_thread(thread: str) -> None:
        heard.append(thread)
        got.set()

    ear = Listener(pg_pool, "test", on_thread=on_thread, on_cancel=cancels.append,
                   on_rules=lambda: _append(rules, "read again"))  # fmt: skip
    await ear.start()
    async with workers(pg_url, 1) as (w,):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ear.run)
            with pytest.raises(RuntimeError):
                async with w.conn.transaction():
                    await w.conn.execute("SELECT pg_notify(%s, 'rolled')", (claims.WORK_CHANNEL,))
                    raise RuntimeError("the decision's transaction failed")
            async with w.conn.transaction():
                await w.conn.execute("CREATE TABLE d(id text)")
                await w.conn.execute("INSERT INTO d VALUES ('d1')")
                await w.conn.execute("SELECT pg_notify(%s, 't')", (claims.WORK_CHANNEL,))
            sql, args = claims.cancel_notice("turn1", "stop it")
            await w.conn.execute(sql.replace("?", "%s"), args)
            sql, args = claims.rules_changed()
            await w.conn.execute(sql.replace("?", "%s"), args)
            with anyio.fail_after(PATIENCE):
                await got.wait()
            await until(lambda: cancels, "the cancel notice heard")
            await until(lambda: rules, "the rules notice heard")
            tg.cancel_scope.cancel()
    await ear.close()
    assert heard == ["t"]
    assert cancels == ["turn1\nstop it"]
    assert rules == ["read again"]


async def test_a_listener_that_loses_its_connection_comes_back_and_says_so(
    pg_url: str, pg_pool
) -> None:
    """A notice sent while the connection was down is not replayed: on reconnecting, the
    listener says a notice may have been missed (`""`: claim, read the truth)."""
    heard: list[str] = []
    ear = Listener(pg_pool, "agentdeck-ear", on_thread=lambda t: _append(heard, t),
                   on_cancel=lambda _p: None,
                   on_rules=lambda: _append(heard, "rules"))  # fmt: skip
    await ear.start()
    admin = await connect(pg_url)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ear.run)
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                " WHERE application_name = 'agentdeck-ear'")  # fmt: skip
            await until(lambda: heard, "the listener says a notice may have been missed",
                        ok=lambda heard: {"", "rules"} <= set(heard))  # (and reads the rules)  # fmt: skip
            tg.cancel_scope.cancel()
    finally:
        await ear.close()
        await admin.close()


async def _append(heard: list[str], thread: str) -> None:
    heard.append(thread)


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
                if await ws[i].try_admit(ws[i].conn, group="task", limit=limit, turn_id=f"u{i}.{rnd}",
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
                await ws[i].finished(ws[i].conn, running.pop(i))


async def test_a_dead_workers_turns_free_their_slots_at_lease_expiry(pg_url: str) -> None:
    async with workers(pg_url, 3) as (a, b, c):
        for w, t in ((a, "ta"), (b, "tb"), (c, "tc")):
            await w.acquire([t], now=T0)
        assert await a.try_admit(
            a.conn, group="chat", limit=2, turn_id="ua", thread_id="ta", now=T0
        )
        assert await b.try_admit(
            b.conn, group="chat", limit=2, turn_id="ub", thread_id="tb", now=T0
        )
        assert not await c.try_admit(
            c.conn, group="chat", limit=2, turn_id="uc", thread_id="tc", now=T0
        )
        assert await a.try_admit(
            a.conn, group="chat", limit=2, turn_id="ua", thread_id="ta", now=T0
        )  # same turn
        await a.heartbeat(now=T0 + 5)
        await c.heartbeat(now=T0 + 5)  # b stops heartbeating: dead at T0 + LEASE
        assert not await c.try_admit(
            c.conn, group="chat", limit=2, turn_id="uc", thread_id="tc", now=T0 + 9
        )
        assert await c.try_admit(
            c.conn, group="chat", limit=2, turn_id="uc", thread_id="tc", now=T0 + LEASE
        )
        assert await sql.running_turns(a.conn, now=T0 + LEASE) == {"chat": 2}
        # b's thread is recovered by a: its turn is admitted again there, counted once
        (taken,) = await a.acquire(["tb"], now=T0 + LEASE)
        assert taken.taken_from == "w1"
        assert not await a.try_admit(
            a.conn, group="chat", limit=2, turn_id="ub", thread_id="tb", now=T0 + LEASE
        )
        await c.finished(c.conn, "uc")
        assert await a.try_admit(
            a.conn, group="chat", limit=2, turn_id="ub", thread_id="tb", now=T0 + LEASE
        )
        # b, a zombie, cannot admit under its lost lease
        with pytest.raises(Fenced):
            await b.try_admit(
                b.conn, group="chat", limit=5, turn_id="ub2", thread_id="tb", now=T0 + LEASE
            )
        with pytest.raises(Fenced, match="not leased"):
            await c.try_admit(
                c.conn, group="chat", limit=5, turn_id="x", thread_id="ta", now=T0 + LEASE
            )


async def test_a_loop_lock_taken_is_told_naming_its_worker(pg_url: str, pg_pool) -> None:
    """The notice goes to every worker's console (the relay carries it): it names the
    worker that took the loops (it said "this worker", read on another worker's console)."""
    from engine.cluster.singleton import run_as_singleton

    said: list[str] = []
    ran = anyio.Event()

    async def body() -> None:
        ran.set()
        await anyio.sleep_forever()

    lock = SingletonLock(pg_pool, "loops", application_name="agentdeck:w7")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run_as_singleton(lock, body, every=0.1,
                                               said=lambda _l, text: said.append(text),
                                               who="worker w7"))  # fmt: skip
        with anyio.fail_after(PATIENCE):
            await ran.wait()
        tg.cancel_scope.cancel()
    assert said == ["worker w7 now runs the cluster's loops"]
