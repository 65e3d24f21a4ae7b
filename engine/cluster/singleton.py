"""A loop that must run on one worker at a time (pulse, hook, poll): a session advisory lock,
held on a connection the lock keeps (borrowed from the runtime's pool, and only its own
while borrowed) so nothing else the worker does can drop it.

The lock lives as long as the session: when the holder's connection closes, or its backend
is terminated, or the server finds the holder's host gone (TCP keepalives), it is released
and the next worker's `try_acquire` takes it. A holder checks `still_held` before each round
of its loop; between the holder's death and that check the two cannot overlap, but a holder
cut off from the server runs on until its check fails, so a loop's writes stay idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import psycopg

from engine.store.pg import locks as sql
from engine.store.pg.cluster import Conn
from engine.store.pg.pool import Pool

log = logging.getLogger("agentdeck")


class SingletonLock:
    """The lock of one named loop, for one worker."""

    def __init__(self, pool: Pool, name: str, *, application_name: str = "agentdeck") -> None:
        self.name = name
        self._pool = pool
        self._application_name = application_name
        self._conn: Conn | None = None
        self._held = False

    @property
    def held(self) -> bool:
        """What this worker last learned: True after a won `try_acquire` until a failed
        `still_held` or `release`."""
        return self._held

    @property
    def connection(self) -> Conn | None:
        return self._conn

    async def try_acquire(self) -> bool:
        """Take the lock if no other session holds it; never waits for it."""
        if self._held:
            return await self.still_held()
        try:
            if self._conn is None or self._conn.closed:
                await self._drop()
                self._conn = await self._pool.borrow(self._application_name)
            self._held = await sql.try_advisory_lock(self._conn, self.name)
        except psycopg.Error as exc:
            log.warning("loop lock %s: %s", self.name, type(exc).__name__)
            await self._drop()
        return self._held

    async def still_held(self) -> bool:
        """Ask the server whether this session still holds the lock (False if the session
        is gone: the loop must stop)."""
        if not self._held or self._conn is None:
            return False
        try:
            self._held = await sql.advisory_lock_held(self._conn, self.name)
        except psycopg.Error as exc:
            log.warning("loop lock %s lost: %s", self.name, type(exc).__name__)
            await self._drop()
        return self._held

    async def release(self) -> None:
        """Let another worker run the loop: unlock, and give the session back."""
        if self._conn is not None and self._held and not self._conn.closed:
            try:
                await sql.advisory_unlock(self._conn, self.name)
            except psycopg.Error:
                pass  # closing the session below releases it anyway
        await self._drop()

    async def _drop(self) -> None:
        self._held = False
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._pool.give_back(conn)  # (the pool unlocks what it still holds)

    async def __aenter__(self) -> SingletonLock:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


async def run_as_singleton(
    lock: SingletonLock,
    body: Callable[[], Coroutine[Any, Any, object]],
    *,
    every: float,
    said: Callable[[str, str], None] = lambda _level, _text: None,
    who: str = "this worker",
) -> None:
    """Run `body` while this worker holds `lock`, and only then: try for the lock every
    `every` seconds; once won, check it is still held as often, and cancel `body` the
    moment it is not (its session ended: the server restarted, a partition). Forever."""
    try:
        while True:
            if await lock.try_acquire():
                said("info", f"{who} now runs the cluster's {lock.name}")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(body)
                    while True:  # noqa: ASYNC110 - the server is asked, nothing to wait on
                        await anyio.sleep(every)
                        if not await lock.still_held():
                            break
                    tg.cancel_scope.cancel()
                said("warning", f"{who} lost the lock of the cluster's {lock.name}: they stop")
            await anyio.sleep(every)
    finally:
        with anyio.CancelScope(shield=True):
            await lock.release()
