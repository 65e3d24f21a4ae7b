"""The runtime's PostgreSQL pool (engine/store/pg/pool.py, issue 28): uses run at once, a
session comes back reset, a cancelled borrower gives its connection back."""

from __future__ import annotations

import anyio
import pytest

from engine.store.pg.pool import MAX_SIZE, Pool
from tests.wait import PATIENCE

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


async def test_uses_of_the_pool_run_at_once(pg_pool: Pool) -> None:
    """The store's reads, the listener, the relay and the locks share the pool: a use that
    holds its connection does not keep another from running."""
    holding, release = anyio.Event(), anyio.Event()

    async def slow(conn) -> int:  # noqa: ANN001
        holding.set()
        await release.wait()
        return int((await (await conn.execute("SELECT 1")).fetchone())[0])

    async def quick(conn) -> int:  # noqa: ANN001
        return int((await (await conn.execute("SELECT 2")).fetchone())[0])

    async def use(fn) -> int:  # noqa: ANN001
        async with pg_pool.connection() as conn:
            return int(await fn(conn))

    async with anyio.create_task_group() as tg:
        tg.start_soon(use, slow)
        await holding.wait()
        with anyio.fail_after(PATIENCE):
            assert await use(quick) == 2  # while `slow` still holds its connection
        release.set()


async def test_a_session_comes_back_reset(pg_pool: Pool) -> None:
    """What a borrower leaves on its session (a LISTEN, an advisory lock, a setting) is
    gone when the connection is lent again: a lock left held would keep a singleton loop
    from moving to another worker."""
    conns = [await pg_pool.borrow(f"agentdeck-test {i}") for i in range(MAX_SIZE)]
    first = conns[0]
    await first.execute("LISTEN somewhere")
    await first.execute("SELECT pg_advisory_lock(42)")
    for conn in conns:
        await pg_pool.give_back(conn)
    for _ in range(MAX_SIZE):  # every connection the pool has, the used one among them
        async with pg_pool.connection() as conn:
            cur = await conn.execute(
                "SELECT (SELECT count(*) FROM pg_listening_channels()),"
                " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                "  AND pid = pg_backend_pid()), current_setting('application_name')"
            )
            listening, locks, name = await cur.fetchone() or (None, None, None)
            assert (listening, locks) == (0, 0)
            assert name == "agentdeck-test"


async def test_a_cancelled_borrower_gives_its_connection_back(pg_pool: Pool) -> None:
    """A use cancelled mid-query (the console leaving a view) returns its connection, which
    the pool closes and replaces: cancelled uses never drain the pool."""
    for _ in range(MAX_SIZE + 2):
        with anyio.CancelScope() as scope:

            async def sleepy(conn) -> None:  # noqa: ANN001
                scope.cancel()
                await conn.execute("SELECT pg_sleep(30)")

            async with pg_pool.connection() as conn:
                await sleepy(conn)
    with anyio.fail_after(PATIENCE):
        async with pg_pool.connection() as conn:
            assert await _one(conn) == 1


async def _one(conn) -> int:  # noqa: ANN001
    return int((await (await conn.execute("SELECT 1")).fetchone())[0])


async def test_a_kept_connection_serves_one_use_at_a_time_and_is_replaced_when_closed(
    pg_pool: Pool,
) -> None:
    """A cluster worker's coordination: its admissions and settles run on one session,
    one after the other; a connection closed under it (a cancelled query closes it) is
    replaced, and an idempotent use runs once more on the new one."""
    kept = await pg_pool.keep("agentdeck-coordination test")
    try:
        first = await kept.use(_pid)
        assert await kept.use(_pid) == first  # the same session
        await kept.use(lambda conn: conn.close())
        assert await kept.use(_pid) != first  # a new one
        tries: list[int] = []

        async def closes_once(conn) -> int:  # noqa: ANN001
            tries.append(1)
            if len(tries) == 1:
                await conn.close()
                await conn.execute("SELECT 1")  # OperationalError: the connection is closed
            return await _one(conn)

        assert await kept.use(closes_once, again=True) == 1 and len(tries) == 2
    finally:
        await kept.close()


async def _pid(conn) -> int:  # noqa: ANN001
    return int(conn.info.backend_pid)
