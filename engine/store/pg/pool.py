"""A runtime's PostgreSQL connections but the writer's and the heartbeat's: one pool.

Why psycopg_pool (not connections opened by each part): the store's reads, a cluster
worker's admissions and settles, its claims, its LISTEN, its relay and the sessions that
hold the singleton loops' advisory locks each borrow a connection from one bounded pool,
so admissions and settles no longer queue behind one coordination connection, a
connection that breaks is replaced by the pool (not by each part's own reconnect code),
and the runtime's connections to the server are bounded by one number. The writer keeps
its own connection (a thread, and the session holding the database's owner lock) and so
does a worker's heartbeat (a lease must be renewed even when the pool is exhausted).

A connection kept (`borrow`: a LISTEN, an advisory lock, a setting) is reset when given
back (`UNLISTEN *`, every advisory lock unlocked, `RESET ALL`: one round trip); a short use
(`connection`, `use`) leaves nothing on its session and is returned as is (a reset there
cost every read and admission a round trip). A connection is given back even when its
borrower is cancelled (a shielded return); one returned mid-query or broken is closed by
the pool, which opens another.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import psycopg
from psycopg_pool import AsyncConnectionPool

__all__ = ["MAX_SIZE", "Kept", "Pool", "on_one", "open_pool"]

MIN_SIZE = 4  # connections kept open while idle (the store had 4 readers)
MAX_SIZE = 16  # readers, coordination, the listener, the relay and the singletons' locks
OPEN_TIMEOUT = 10.0  # seconds `open_pool` waits for its first connections
Conn = psycopg.AsyncConnection[Any]
T = TypeVar("T")


class Pool:
    """The pool, and borrowing from it."""

    def __init__(self, pool: AsyncConnectionPool[Conn]) -> None:
        self._pool = pool

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Conn]:
        """A connection for the block (autocommit), given back when it ends, cancelled or
        not."""
        conn = await self._pool.getconn()
        try:
            yield conn
        finally:
            with anyio.CancelScope(shield=True):
                await self._pool.putconn(conn)

    async def borrow(self, application_name: str) -> Conn:
        """A connection kept until `give_back` (a LISTEN, a relay, an advisory lock), its
        session named `application_name` (what pg_stat_activity shows)."""
        conn = await self._pool.getconn()
        try:
            await conn.execute("SELECT set_config('application_name', %s, false)",
                               (application_name[:63],))  # fmt: skip
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._pool.putconn(conn)
            raise
        return conn

    async def give_back(self, conn: Conn) -> None:
        """Return a borrowed connection, its session reset first (see the module); one
        that cannot be reset is closed, and the pool opens another."""
        with anyio.CancelScope(shield=True):
            try:
                if not conn.closed:
                    await conn.execute("UNLISTEN *; SELECT pg_advisory_unlock_all(); RESET ALL")
            except psycopg.Error:
                await conn.close()
            await self._pool.putconn(conn)

    async def keep(self, application_name: str) -> Kept:
        """One connection kept for a run of uses, one at a time (`Kept.use`)."""
        return Kept(self, application_name, await self.borrow(application_name))

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._pool.close()


async def on_one(
    current: Callable[[], Conn], renew: Callable[[], Awaitable[None]],
    fn: Callable[[Conn], Awaitable[T]], *, again: bool = False,
) -> T:  # fmt: skip
    """`fn` on one kept connection (`current()`; the caller holds it alone): a connection
    closed under it (a query cut short by a cancel closes it) is `renew`ed first; with
    `again` (an idempotent `fn`), also when it closes during `fn`, which then runs once
    more on the new one."""
    for last in (not again, True):
        if current().closed:
            await renew()
        try:
            return await fn(current())
        except psycopg.OperationalError:
            if last or not current().closed:
                raise
    raise AssertionError("unreachable")


class Kept:
    """A connection of the pool kept for one purpose, used by one task at a time: the
    statements of a purpose run on one session, which prepares them once (a cluster
    worker's admissions and settles: spread over the pool's connections they cost
    bench_cluster 13% of its steps/s). A connection closed under it is replaced."""

    def __init__(self, pool: Pool, application_name: str, conn: Conn) -> None:
        self._pool, self._name, self._conn = pool, application_name, conn
        self._lock = anyio.Lock()

    async def use(self, fn: Callable[[Conn], Awaitable[T]], *, again: bool = False) -> T:
        """`fn` on the kept connection (see `on_one`)."""
        async with self._lock:
            return await on_one(lambda: self._conn, self._renew, fn, again=again)

    async def _renew(self) -> None:
        await self._pool.give_back(self._conn)
        self._conn = await self._pool.borrow(self._name)

    async def close(self) -> None:
        await self._pool.give_back(self._conn)


async def open_pool(url: str, name: str, configure: Any = None) -> Pool:
    """A pool of autocommit connections to `url` (psycopg.OperationalError, or
    psycopg_pool.PoolTimeout, when the server cannot be reached in OPEN_TIMEOUT)."""

    async def prepare(conn: Conn) -> None:
        if configure is not None:
            configure(conn)

    pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
        url, kwargs={"autocommit": True, "application_name": name},
        min_size=MIN_SIZE,
        max_size=MAX_SIZE, open=False, configure=prepare, name=name,
    )  # fmt: skip
    try:
        await pool.open(wait=True, timeout=OPEN_TIMEOUT)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await pool.close()
        raise
    return Pool(pool)
