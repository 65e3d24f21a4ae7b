"""Cluster coordination on a real PostgreSQL (engine/cluster, engine/store/pg/cluster.py):
several connections stand in for workers. Expiry is driven by explicit `now` values, never
by sleeping."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import anyio
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cluster import ClusterError, ClusterWorker, Fenced
from engine.store.pg import cluster as sql
from engine.store.pg.migrations import migrate

pytestmark = pytest.mark.anyio

T0 = 1_000.0
LEASE = 10.0

# The store's tables the runnable-work query reads (their PostgreSQL port lives elsewhere;
# only the columns it reads), plus a table standing in for a checkpoint's writes.
STORE_STANDIN = """
CREATE TABLE turn_requests (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE turns (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE tool_calls (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL);
CREATE TABLE decisions (id TEXT PRIMARY KEY, call_id TEXT NOT NULL, status TEXT NOT NULL);
CREATE TABLE checkpoint_writes (id BIGSERIAL PRIMARY KEY, thread_id TEXT NOT NULL,
                          token BIGINT NOT NULL, worker TEXT NOT NULL);
"""


async def connect(url: str, name: str = "agentdeck-test") -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(url, autocommit=True, application_name=name)


@contextlib.asynccontextmanager
async def workers(url: str, n: int, *, standin: bool = True) -> AsyncIterator[list[ClusterWorker]]:
    """`n` registered workers at T0, each on its own connection."""
    conns = [await connect(url, f"agentdeck:w{i}") for i in range(n)]
    try:
        if standin:
            await conns[0].execute(STORE_STANDIN)
        ws = [ClusterWorker(c, f"w{i}", lease_seconds=LEASE, host="h", pid=100 + i)
              for i, c in enumerate(conns)]  # fmt: skip
        for w in ws:
            await w.register(now=T0)
        yield ws
    finally:
        for c in conns:
            await c.close()


async def checkpoint(
    w: ClusterWorker, conn: psycopg.AsyncConnection, thread: str, now: float
) -> None:
    """A checkpoint transaction of `thread`: fenced, then a write."""
    async with conn.transaction():
        await w.fence(conn, thread, now=now)
        await conn.execute(
            "INSERT INTO checkpoint_writes(thread_id, token, worker) VALUES (%s, %s, %s)",
            (thread, w.token(thread), w.id),
        )


# --- workers -------------------------------------------------------------------------------


async def test_workers_register_heartbeat_die_and_deregister(pg_url: str) -> None:
    async with workers(pg_url, 2) as (a, b):
        rows = await sql.list_workers(a.conn, LEASE, now=T0 + 1)
        assert [(r.id, r.host, r.pid, r.state, r.alive) for r in rows] == [
            ("w0", "h", 100, "running", True), ("w1", "h", 101, "running", True)]  # fmt: skip
        await a.acquire(["t1", "t2"], now=T0)
        await a.heartbeat(now=T0 + 8)
        rows = await sql.list_workers(a.conn, LEASE, now=T0 + 12)
        assert {r.id: (r.alive, r.leases) for r in rows} == {"w0": (True, 2), "w1": (False, 0)}
        # a clean stop frees the leases at once, no waiting for expiry
        await a.deregister(now=T0 + 13)
        assert [x.thread_id for x in await b.acquire(["t1", "t2"], now=T0 + 13)] == ["t1", "t2"]
        rows = await sql.list_workers(a.conn, LEASE, now=T0 + 13)
        assert rows[0].state == "stopped" and not rows[0].alive
        with pytest.raises(ClusterError, match="not registered"):
            await a.heartbeat(now=T0 + 14)
        await a.register(now=T0 + 20)  # the same id comes back after a restart
        rows = await sql.list_workers(a.conn, LEASE, now=T0 + 20)
        assert [(r.id, r.alive) for r in rows] == [("w1", False), ("w0", True)]


# --- leases --------------------------------------------------------------------------------


async def test_expired_lease_is_taken_over_with_a_higher_token(pg_url: str) -> None:
    async with workers(pg_url, 2) as (a, b):
        (first,) = await a.acquire(["t"], now=T0)
        assert (first.worker_id, first.expires_at, first.taken_from) == ("w0", T0 + LEASE, None)
        assert await b.acquire(["t"], now=T0 + 9.9) == []
        assert await a.heartbeat(now=T0 + 9) == set()  # renewed to T0 + 19
        assert await b.acquire(["t"], now=T0 + 18) == []
        (taken,) = await b.acquire(["t"], now=T0 + 19)  # expires_at <= now: expired
        assert taken.worker_id == "w1" and taken.taken_from == "w0"
        assert taken.token > first.token
        # the old holder learns at its next heartbeat; its late heartbeat revives nothing
        assert await a.heartbeat(now=T0 + 20) == {"t"}
        assert not a.holds("t") and b.holds("t")
        assert [(x.worker_id, x.token) for x in await sql.leases(a.conn, now=T0 + 20)] == [
            ("w1", taken.token)]  # fmt: skip
        # released, it goes to the next taker with a higher token still
        assert await b.release(["t"]) == ["t"]
        (again,) = await a.acquire(["t"], now=T0 + 20)
        assert again.token > taken.token and again.taken_from is None


async def test_limit_and_a_lease_of_ones_own_that_expired(pg_url: str) -> None:
    async with workers(pg_url, 1) as (a,):
        got = await a.acquire(["t3", "t1", "t2", "t1"], limit=2, now=T0)
        assert [x.thread_id for x in got] == ["t1", "t2"]
        (own,) = await a.acquire(["t1"], now=T0 + LEASE)  # its own, expired: a new grant
        assert own.taken_from == "w0" and own.token > got[0].token


async def test_a_zombie_whose_lease_was_taken_cannot_commit(pg_url: str) -> None:
    async with workers(pg_url, 2) as (a, b):
        a_store, b_store = await connect(pg_url), await connect(pg_url)
        try:
            await a.acquire(["t"], now=T0)
            await checkpoint(a, a_store, "t", now=T0 + 1)
            # a stalls (GC pause, partition): no heartbeat; b takes the thread over
            (taken,) = await b.acquire(["t"], now=T0 + LEASE + 1)
            assert a.holds("t")  # a still believes it holds it: a zombie
            with pytest.raises(Fenced, match="superseded"):
                await checkpoint(a, a_store, "t", now=T0 + 2)  # even with a stale clock
            await checkpoint(b, b_store, "t", now=T0 + LEASE + 2)
            cur = await a_store.execute("SELECT worker, token FROM checkpoint_writes ORDER BY id")
            rows = await cur.fetchall()
            assert [w for w, _ in rows] == ["w0", "w1"] and rows[1][1] == taken.token
            assert a_store.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        finally:
            await a_store.close()
            await b_store.close()


async def test_an_expired_lease_fences_even_before_anyone_takes_it(pg_url: str) -> None:
    async with workers(pg_url, 1) as (a,):
        store = await connect(pg_url)
        try:
            await a.acquire(["t"], now=T0)
            with pytest.raises(Fenced, match="expired"):
                await checkpoint(a, store, "t", now=T0 + LEASE)
            with pytest.raises(ClusterError, match="inside the checkpoint's transaction"):
                await a.fence(store, "t", now=T0)
            with pytest.raises(Fenced, match="not leased"):
                await a.fence(store, "other", now=T0)
        finally:
            await store.close()


async def test_a_takeover_waits_for_a_checkpoint_in_flight(pg_url: str) -> None:
    """The fence share-locks the lease row until commit: a worker taking over skips the
    thread while the holder's checkpoint is open, then finds it committed."""
    async with workers(pg_url, 2) as (a, b):
        store = await connect(pg_url)
        try:
            (lease,) = await a.acquire(["t"], now=T0)
            async with store.transaction():
                await a.fence(store, "t", now=T0 + 9)
                await store.execute(
                    "INSERT INTO checkpoint_writes(thread_id, token, worker) VALUES ('t', %s, 'w0')",
                    (lease.token,),
                )
                assert await b.acquire(["t"], now=T0 + LEASE + 5) == []  # skipped, not waited
            (taken,) = await b.acquire(["t"], now=T0 + LEASE + 5)
            assert taken.taken_from == "w0"
            cur = await b.conn.execute("SELECT worker FROM checkpoint_writes")
            assert await cur.fetchall() == [("w0",)]
        finally:
            await store.close()


async def test_a_heartbeat_never_waits_for_a_checkpoint_in_flight(pg_url: str) -> None:
    """A batch of checkpoints fences its threads in the batch's order and the heartbeat
    renews them in thread order: were one to wait for the other they could deadlock (found
    by bench_cluster: the server broke it after a second, and a 1 s lease ran out)."""
    async with workers(pg_url, 2) as (a, b):
        store = await connect(pg_url)
        try:
            await a.acquire(["t1", "t2"], now=T0)
            await a.conn.execute("SET lock_timeout = '5s'")  # fails here, rather than hangs
            async with store.transaction():
                await a.fence(store, "t2", now=T0 + 1)
                assert await a.heartbeat(now=T0 + 2) == set()  # t2's checkpoint still open
                await a.fence(store, "t1", now=T0 + 2)
                # expired by then, and skipped all the same: a takeover still waits for it
                assert await b.acquire(["t1", "t2"], now=T0 + LEASE + 2.5) == []
            leases = await sql.leases(a.conn, now=T0 + LEASE + 1)
            assert [(x.thread_id, x.expires_at) for x in leases] == [
                ("t1", T0 + 2 + LEASE), ("t2", T0 + 2 + LEASE)]  # fmt: skip
        finally:
            await store.close()


async def test_acquire_any_takes_threads_with_runnable_work(pg_url: str) -> None:
    async with workers(pg_url, 2) as (a, b):
        await a.conn.execute(
            "INSERT INTO turn_requests VALUES ('r1', 'queued-req', 'queued'),"
            " ('r2', 'admitted-req', 'admitted');"
            "INSERT INTO turns VALUES ('u1', 'crashed', 'running'), ('u2', 'finished', 'done');"
            "INSERT INTO tool_calls VALUES ('c1', 'decided'), ('c2', 'applied');"
            "INSERT INTO decisions VALUES ('d1', 'c1', 'queued'), ('d2', 'c2', 'applied')"
        )
        got = await a.acquire(limit=2, now=T0)
        assert [x.thread_id for x in got] == ["crashed", "decided"]
        assert [x.thread_id for x in await b.acquire(now=T0)] == ["queued-req"]
        assert await b.acquire(now=T0) == []


async def test_cluster_tables_sit_beside_the_stores_schema(pg_url: str) -> None:
    """On the store's real schema (engine/store/pg/schema.sql): no name clashes, and the
    runnable-work query reads its tables as they are."""
    with psycopg.connect(pg_url, autocommit=True) as sync:
        migrate(sync)
    async with workers(pg_url, 2, standin=False) as (a, b):
        await sql.ensure_schema(b.conn)  # again, from another worker: nothing changes
        assert await a.acquire(now=T0) == []
        cur = await a.conn.execute("SELECT to_regclass('thread_leases') IS NOT NULL")
        assert await cur.fetchone() == (True,)


async def test_workers_acquiring_the_same_threads_at_once_split_them(pg_url: str) -> None:
    threads = [f"t{i:02}" for i in range(20)]
    async with workers(pg_url, 4) as ws:
        for rnd in range(30):
            now = T0 + rnd
            results: list[list[sql.Lease]] = [[] for _ in ws]

            limit = None if rnd % 2 else 6

            async def take(
                i: int, out: list[list[sql.Lease]], limit: int | None, now: float
            ) -> None:
                out[i] = await ws[i].acquire(threads, limit=limit, now=now)

            async with anyio.create_task_group() as tg:
                for i in range(len(ws)):
                    tg.start_soon(take, i, results, limit, now)
            taken = [x.thread_id for r in results for x in r]
            assert len(taken) == len(set(taken)), f"round {rnd}: a thread went to two workers"
            if rnd % 2:
                assert sorted(taken) == threads  # no limit: every free thread is taken
            for w in ws:
                await w.release()


# Each step: the time moves on, then every worker does one thing, all at once.
ACTION = st.one_of(
    st.tuples(st.just("acquire"), st.sets(st.sampled_from("abcde"), min_size=1)),
    st.tuples(st.just("release"), st.sets(st.sampled_from("abcde"), min_size=1)),
    st.tuples(st.just("heartbeat"), st.just(frozenset())),
    st.tuples(st.just("checkpoint"), st.sampled_from("abcde").map(lambda t: frozenset({t}))),
)
STEP = st.tuples(st.sampled_from([0.0, 1.0, 4.0, 9.0, 10.0, 15.0]),
                 st.lists(ACTION, min_size=3, max_size=3))  # fmt: skip


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(steps=st.lists(STEP, min_size=1, max_size=12))
async def test_racing_workers_never_share_a_thread_and_zombies_never_commit(
    pg_url: str, steps: list[tuple[float, list[tuple[str, frozenset[str]]]]]
) -> None:
    conn = await connect(pg_url)
    try:
        await conn.execute("DROP TABLE IF EXISTS thread_leases, group_slots, group_budgets,"
                           " workers, turn_requests, turns, tool_calls, decisions, checkpoint_writes;"
                           " DROP SEQUENCE IF EXISTS thread_lease_token")  # fmt: skip
    finally:
        await conn.close()
    async with workers(pg_url, 3) as ws:
        stores = [await connect(pg_url) for _ in ws]
        try:
            await _race(ws, stores, steps)
        finally:
            for s in stores:
                await s.close()


async def _race(ws: list[ClusterWorker], stores: list[psycopg.AsyncConnection],
                steps: list[tuple[float, list[tuple[str, frozenset[str]]]]]) -> None:  # fmt: skip
    now = T0
    granted: dict[str, tuple[str, int]] = {}  # thread -> the last grant (worker, token)
    for advance, actions in steps:
        now += advance
        before = await sql.leases(ws[0].conn, now=now)  # held, unexpired, as the round starts
        got: dict[int, list[sql.Lease]] = {}

        async def act(
            i: int, kind: str, threads: frozenset[str], got: dict[int, list[sql.Lease]], now: float
        ) -> None:
            w = ws[i]
            if kind == "acquire":
                got[i] = await w.acquire(sorted(threads), now=now)
            elif kind == "release":
                await w.release(sorted(threads))
            elif kind == "heartbeat":
                await w.heartbeat(now=now)
            else:
                (thread,) = threads
                if w.holds(thread):
                    with contextlib.suppress(Fenced):
                        await checkpoint(w, stores[i], thread, now)

        async with anyio.create_task_group() as tg:
            for i, (kind, threads) in enumerate(actions):
                tg.start_soon(act, i, kind, threads, got, now)
        taken = [x for leases in got.values() for x in leases]
        assert len({x.thread_id for x in taken}) == len(taken), "two workers took one thread"
        for x in taken:
            held = [h for h in before if h.thread_id == x.thread_id]
            if held:  # taken only if free, expired, or released by its holder in this round
                kind, threads = actions[int(held[0].worker_id[1:])]
                assert kind == "release" and x.thread_id in threads
            if x.thread_id in granted:
                assert x.token > granted[x.thread_id][1]
            granted[x.thread_id] = (x.worker_id, x.token)
        for lease in await sql.leases(ws[0].conn, now=now):
            assert granted[lease.thread_id] == (lease.worker_id, lease.token)
    # checkpoints of a thread committed in token order: no zombie wrote after a takeover
    cur = await ws[0].conn.execute("SELECT thread_id, token FROM checkpoint_writes ORDER BY id")
    rows = await cur.fetchall()
    by_thread: dict[str, list[int]] = {}
    for thread, token in rows:
        by_thread.setdefault(thread, []).append(token)
    for thread, tokens in by_thread.items():
        assert tokens == sorted(tokens), (
            f"{thread}: a checkpoint under an old token after a newer one"
        )


async def test_a_worker_renews_only_the_leases_it_took_and_a_restart_frees_the_old_ones(
    pg_url: str,
) -> None:
    """A worker restarted under its name (the soak restarts a killed one so) shares its id
    with its dead life's leases: its heartbeat renewed them as if it had taken them up, and
    a second process misnamed the same would have renewed the first's (two turns of one
    thread at once). A heartbeat renews only what this process took; registering frees
    what the name still held, for any worker to take over at once."""
    async with workers(pg_url, 2) as (w0, w1):
        (lease,) = await w0.acquire(["t"], now=T0)
        again = ClusterWorker(await connect(pg_url), "w0", lease_seconds=LEASE, host="h",
                              pid=999)  # fmt: skip
        try:
            assert await again.heartbeat(now=T0 + 1) == set()  # renews nothing of the old
            assert not again.holds("t")
            await again.register(now=T0 + 2)  # its restart: the old life's lease is freed
            (taken,) = await w1.acquire(["t"], now=T0 + 3)  # at once, not at the expiry
            assert taken.token > lease.token and taken.taken_from is None
        finally:
            await again.conn.close()


async def test_an_idempotent_use_runs_again_when_its_connection_closes_under_it(
    pg_url: str,
) -> None:
    """Found by CI: a turn's admission ran on the worker's connection when it was closed
    under it (a query's cancel cut short closes it); the OperationalError ended the
    runtime. An idempotent use (`again`: the admission, counted per turn) runs once more
    on a new connection; any other still says what happened."""
    worker = ClusterWorker(await connect(pg_url), "w", lease_seconds=5.0, url=pg_url)
    seen: list[psycopg.AsyncConnection] = []

    async def closed_the_first_time(conn: psycopg.AsyncConnection) -> int:
        seen.append(conn)
        if len(seen) % 2 == 1:
            await conn.close()  # as psycopg does mid-query
        row = await (await conn.execute("SELECT 1")).fetchone()
        return int(row[0]) if row else 0

    try:
        assert await worker.use(closed_the_first_time, again=True) == 1
        assert len(seen) == 2 and seen[0] is not seen[1]
        with pytest.raises(psycopg.OperationalError):
            await worker.use(closed_the_first_time)
    finally:
        await worker.conn.close()
