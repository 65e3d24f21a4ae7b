"""A read-only connection to a room's PostgreSQL database: what history and the console's
first view read through when the room's store is PostgreSQL (execution.db's `mode=ro`).

It needs no owner and never writes: the session is READ ONLY, so a statement that would
write fails. Statements are PostgreSQL's (names resolved by the caller: `ReadsFrom`, History); rows
index by position and by name. One connection, one statement at a time (a lock: the
console's history screen runs several reads at once); a statement that began runs to its
end even if its caller is cancelled, so no read leaves the connection mid-query or in a
transaction, and a read still waiting for the lock never begins. Every failure is a
`StoreError` of one line that names the database without its password.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import anyio
import psycopg
from psycopg import pq

from engine.store.pg.store import Row, _rows, adapt, display_url, scrub
from engine.store.sqlite import StoreError

__all__ = ["PgReader"]

Statement = tuple[str, Sequence[Any]]


class PgReader:
    """One read-only connection; `execute_fetchall` as aiosqlite's, `snapshot` for several
    statements that must see one state of the database."""

    def __init__(self, url: str, conn: psycopg.AsyncConnection[Any]) -> None:
        self._url, self._conn = url, conn
        self._lock = asyncio.Lock()
        self.path = display_url(url)

    @classmethod
    async def connect(cls, url: str) -> PgReader:
        """Open a read-only session on the database at `url`."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                url, autocommit=True, application_name="agentdeck-reader"
            )
        except psycopg.Error as exc:
            raise StoreError(_line(scrub(f"cannot open {display_url(url)}: {exc}", url))) from None
        adapt(conn)  # as the writer sends values: bools as integers, NUL in text
        try:
            await conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        except psycopg.Error as exc:
            await conn.close()
            raise StoreError(_line(scrub(f"cannot read {display_url(url)}: {exc}", url))) from None
        return cls(url, conn)

    async def migrated(self) -> bool:
        """Whether a runtime has made the room's tables in this database yet."""
        rows = await self.execute_fetchall("SELECT to_regclass('agentdeck_schema') IS NOT NULL")
        return bool(rows[0][0])

    async def execute_fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """The rows of one statement (PostgreSQL's dialect)."""
        return (await self.snapshot([(sql, params)], consistent=False))[0]

    async def snapshot(self, statements: Sequence[Statement], *,
                       consistent: bool = True) -> list[list[Row]]:  # fmt: skip
        """The rows of each statement; `consistent`: all read in one REPEATABLE READ
        transaction, so they see one state of the database."""
        async with self._lock:
            with anyio.CancelScope(shield=True):  # begun: ends, so nothing is left open
                rows = await self._run(statements, consistent)
        return rows

    async def _run(self, statements: Sequence[Statement], consistent: bool) -> list[list[Row]]:
        conn = self._conn
        out: list[list[Row]] = []
        try:
            if consistent and len(statements) > 1:
                await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                for sql, params in statements:
                    async with conn.cursor(row_factory=_rows) as cur:
                        await cur.execute(sql, params)
                        out.append(await cur.fetchall())
            finally:
                if (
                    not conn.closed
                    and not conn.broken
                    and conn.info.transaction_status != pq.TransactionStatus.IDLE
                ):
                    await conn.execute("ROLLBACK")  # read only: nothing to keep
        except psycopg.Error as exc:
            raise StoreError(self._error(exc)) from None
        return out

    def _error(self, exc: BaseException) -> str:
        return _line(scrub(f"read on {self.path} failed: {exc}", self._url))

    async def close(self) -> None:
        """Close the connection."""
        with anyio.CancelScope(shield=True):
            await self._conn.close()


def _line(text: str) -> str:
    """`text` on one line (libpq's messages span several)."""
    return " ".join(text.split())
