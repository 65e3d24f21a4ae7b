"""A worker's ear on the cluster: a connection it keeps (borrowed from the runtime's pool)
LISTENing for work notices (a
request queued, a decision recorded, a budget slot freed: the thread's id, or ""), for
cancels and for rule changes (engine/store/pg/claims.py). A notice is a wake-up, not the record: one sent while
the connection was down is not replayed, so after each reconnect the worker is told to
claim as if it had missed one (`on_thread("")`), and reads the truth."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import psycopg

from engine.store.pg import claims as sql
from engine.store.pg.pool import Pool

log = logging.getLogger("agentdeck")


class Listener:
    def __init__(self, pool: Pool, application_name: str, *,
                 on_thread: Callable[[str], Awaitable[None]],
                 on_cancel: Callable[[str], None],
                 on_rules: Callable[[], Awaitable[None]]) -> None:  # fmt: skip
        self.pool, self.application_name = pool, application_name
        self.on_thread, self.on_cancel, self.on_rules = on_thread, on_cancel, on_rules
        self._conn: psycopg.AsyncConnection[Any] | None = None

    async def start(self) -> None:
        self._conn = await self.pool.borrow(self.application_name)
        try:
            await sql.listen_work(self._conn)
        except BaseException:
            await self.close()
            raise

    async def run(self) -> None:
        """Hand each notice on, until cancelled; reconnect when the connection drops."""
        while True:
            try:
                if self._conn is None or self._conn.closed:
                    await self.start()
                    await self.on_thread("")  # a notice may have been missed: claim,
                    await self.on_rules()  # and read the rules again
                assert self._conn is not None
                async for note in self._conn.notifies():
                    if note.channel == sql.CANCEL_CHANNEL:
                        self.on_cancel(note.payload)
                    elif note.channel == sql.RULES_CHANNEL:
                        await self.on_rules()
                    else:
                        await self.on_thread(note.payload)
            except psycopg.Error as exc:
                log.warning("%s: listener dropped: %s", self.application_name, type(exc).__name__)
                await self.close()
                await anyio.sleep(1.0)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await self.pool.give_back(conn)  # (its LISTENs end there)
