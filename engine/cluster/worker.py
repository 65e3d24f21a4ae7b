"""One runtime worker's side of the cluster: its registration, heartbeat, thread leases
and group admissions, kept as the worker sees them (which threads it holds, under which
fencing token) over the SQL of engine/store/pg/cluster.py.

The worker runs a thread's turns only while `holds(thread)`; every checkpoint transaction
calls `fence(conn, thread)` so a worker that lost its lease (a zombie: paused, partitioned,
its heartbeat late) cannot commit after another worker took the thread over.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio
import psycopg

from engine.store.pg import cluster as sql
from engine.store.pg.cluster import Conn, Fenced, Lease
from engine.store.pg.pool import on_one

T = TypeVar("T")
log = logging.getLogger("agentdeck")


class ClusterWorker:
    """A worker registered in the cluster, over a connection of its own (autocommit).

    `now` everywhere is epoch seconds; None means the database's clock (what a real worker
    uses, so hosts with skewed clocks agree); tests pass explicit times."""

    def __init__(
        self,
        conn: Conn,
        worker_id: str,
        *,
        lease_seconds: float = 30.0,
        host: str | None = None,
        pid: int | None = None,
        url: str | None = None,
    ) -> None:
        if lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds}")
        self.conn = conn
        self.id = worker_id
        self.lease_seconds = lease_seconds
        self.host = host if host is not None else socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self._held: dict[str, Lease] = {}
        self.url = url  # to connect again (None: the connection is the caller's to mend)
        self._lock = anyio.Lock()  # the connection, one user at a time

    # --- its connection ---

    async def use(self, fn: Callable[[Conn], Awaitable[T]], *, again: bool = False) -> T:
        """`fn(conn)`, one caller at a time (psycopg's transactions on one connection must
        not interleave), on the worker's connection, replaced when closed under it, keeping
        the worker's leases (`on_one`)."""
        async with self._lock:
            return await on_one(lambda: self.conn, self._renew, fn, again=again)

    async def _renew(self) -> None:
        if self.url is None:  # the caller's to mend: say so with the closed connection's error
            return
        log.warning("worker %s: its connection was closed: connecting again", self.id)
        await self._connect(register=False)

    async def reconnect(self) -> None:
        """A new connection, the worker registered anew: every lease still under its name
        is freed (its holder took them all for lost first)."""
        async with self._lock:
            await self._connect(register=True)

    async def _connect(self, *, register: bool) -> None:
        assert self.url is not None
        await self.conn.close()
        self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        if register:
            await self.register()

    # --- membership ---

    async def register(self, *, now: float | None = None) -> None:
        """Join the cluster (creating its tables if this is the first worker)."""
        await sql.ensure_schema(self.conn)
        await sql.register_worker(self.conn, self.id, self.host, self.pid, now=now)

    async def heartbeat(self, *, now: float | None = None) -> set[str]:
        """Say this worker is alive and renew its leases; returns the threads it lost
        (expired before this heartbeat): their turns must stop, uncommitted."""
        held = {t: lease.token for t, lease in self._held.items()}
        kept = await sql.heartbeat(self.conn, self.id, self.lease_seconds, held=held, now=now)
        lost = set(self._held) - {lease.thread_id for lease in kept}
        self._held = {lease.thread_id: lease for lease in kept}
        return lost

    async def deregister(self, *, now: float | None = None) -> None:
        """Leave cleanly: every lease is released at once (no wait for expiry)."""
        await sql.deregister_worker(self.conn, self.id, now=now)
        self._held.clear()

    async def leave(self) -> None:
        """Deregister (on a new connection if a cancelled query closed this one) and close
        the connection; if the database cannot be reached, the leases expire instead."""
        try:
            if self.conn.closed and self.url is not None:
                self.conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
            await self.deregister()
        except psycopg.Error as exc:
            log.warning("worker %s: not deregistered: %s", self.id, type(exc).__name__)
        await self.conn.close()

    # --- leases ---

    async def acquire(
        self,
        threads: Sequence[str] | None = None,
        *,
        limit: int | None = None,
        now: float | None = None,
    ) -> list[Lease]:
        """Lease free or expired threads among `threads` (None: threads with runnable work).
        A lease with `taken_from` set was another worker's (or this one's, expired): the
        thread goes through crash recovery before its turns go on."""
        got = await sql.acquire(self.conn, self.id, threads, self.lease_seconds,
                                limit=limit, now=now)  # fmt: skip
        self._held.update((lease.thread_id, lease) for lease in got)
        return got

    async def release(self, threads: Sequence[str] | None = None) -> list[str]:
        """Give threads back (None: all), e.g. when a thread has no more work."""
        released = await sql.release(self.conn, self.id, threads)
        for thread in threads if threads is not None else list(self._held):
            self._held.pop(thread, None)
        return released

    def holds(self, thread_id: str) -> bool:
        """Whether this worker believes it holds the thread (the database has the last word,
        in `fence`)."""
        return thread_id in self._held

    def token(self, thread_id: str) -> int:
        """The fencing token of a held thread; `Fenced` if this worker does not hold it."""
        lease = self._held.get(thread_id)
        if lease is None:
            raise Fenced(f"thread {thread_id}: not leased by worker {self.id}")
        return lease.token

    @property
    def held(self) -> dict[str, Lease]:
        return dict(self._held)

    async def fence(self, conn: Conn, thread_id: str, *, now: float | None = None) -> None:
        """The check every checkpoint transaction of the thread runs on `conn` (any of this
        worker's connections, inside the transaction): raises `Fenced` if the lease is lost."""
        await sql.fenced(conn, thread_id, self.token(thread_id), now=now)

    # --- cluster-wide group budgets ---

    async def try_admit(
        self, conn: Conn, *, group: str, limit: int, turn_id: str, thread_id: str,
        now: float | None = None,
    ) -> bool:  # fmt: skip
        """Start `turn_id` of a held thread if its group runs fewer than `limit` turns across
        the cluster (on `conn`, any connection: admissions need not wait for each other);
        False leaves it queued. Call `finished` when it ends or waits."""
        return await sql.try_admit(conn, group, limit, turn_id=turn_id,
                                   thread_id=thread_id, token=self.token(thread_id), now=now)  # fmt: skip

    async def finished(self, conn: Conn, turn_id: str) -> None:
        await sql.finished(conn, turn_id)
