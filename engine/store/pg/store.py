"""A room's truth layer on PostgreSQL: the `Store` interface over psycopg 3.

Why psycopg 3 (not asyncpg): it is libpq, so a URL's credentials can come from where
libpq finds them (PGPASSFILE, PGSERVICEFILE, `service=` in the URL, the environment),
which keeps passwords out of agentdeck.toml; and it has a sync API (the writer's thread)
and an async one (reads on the event loop).

One writer connection on a thread of its own does group commit exactly as the SQLite
store does (pg/writer.py); reads borrow from the runtime's pool (pg/pool.py, psycopg_pool) of
async connections in autocommit mode, so a read made after a write returned sees it. Statements come by name from
PostgreSQL's own catalogue (engine/store/sql/postgres/). Rows index by position and
by name, like sqlite3.Row. The URL's password never reaches logs or error text: the
store names its database by `display_url` (password removed) and scrubs errors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import psycopg
from psycopg import conninfo, postgres
from psycopg.abc import Buffer
from psycopg.adapt import Dumper
from psycopg.types.string import StrDumperUnknown

from engine.store.pg.batch import PG_INDEX_BATCH
from engine.store.pg.claims import FENCED
from engine.store.pg.migrations import TooNew, migrate
from engine.store.pg.pool import Pool, open_pool
from engine.store.pg.writer import PgWriter
from engine.store.space import Space
from engine.store.sql import dialect
from engine.store.sqlite import LeaseLost, Store, StoreError
from engine.store.writer import Op, WriterStatistics

__all__ = ["PgStore", "Row", "display_url", "scrub"]
OWNER_WAIT = 3.0  # seconds an open waits for the owner lock of a runtime that just ended
log = logging.getLogger("agentdeck")


class Row(tuple[Any, ...]):
    """A result row indexed by position and by column name (as sqlite3.Row)."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names[key])
            except KeyError:
                raise IndexError(f"no such column: {key}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _rows(cursor: Any) -> Callable[[Sequence[Any]], Row]:
    names: dict[str, int] = {}
    for i, column in enumerate(cursor.description or ()):
        names.setdefault(column.name, i)  # the first of two same-named columns, as SQLite
    return lambda values: Row(values, names)


class _BoolAsInt(Dumper):
    """Python bools as integers: the schema's flags are integer columns, as on SQLite."""

    oid = postgres.types["int8"].oid

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class _NulAsReplacement(StrDumperUnknown):
    """Python strs as text, as psycopg's own, but a NUL character (0x00), which text in
    PostgreSQL cannot hold, as U+FFFD: a tool's output or a message with one is stored,
    not refused (SQLite keeps the NUL; the rest of the text is the same on both)."""

    def dump(self, obj: str) -> Buffer | None:
        return super().dump(obj.replace("\x00", "\ufffd"))


def adapt(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """How the store's values go to PostgreSQL on `conn` (bools as integers, NUL in text)."""
    conn.adapters.register_dumper(bool, _BoolAsInt)
    conn.adapters.register_dumper(str, _NulAsReplacement)


def _password(url: str) -> str | None:
    try:
        return conninfo.conninfo_to_dict(url).get("password") or None  # type: ignore[return-value]
    except psycopg.Error:
        return None


def display_url(url: str) -> str:
    """`url` without its password (or, when it cannot be read, only its scheme)."""
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        return "postgresql://(unreadable URL)"
    params.pop("password", None)
    return "postgresql: " + conninfo.make_conninfo(**{k: str(v) for k, v in params.items()})


def scrub(text: str, url: str) -> str:
    """`text` with the URL's password, if any, replaced."""
    secret = _password(url)
    return text.replace(secret, "***") if secret else text


class PgStore(Store):
    """The one writer of a room's PostgreSQL database (a `PgWriter` thread), and its reads:
    SQLite's `SqliteStore`'s sibling behind the one `Store` interface."""

    def __init__(self, url: str, writer_conn: psycopg.Connection[Any], pool: Pool) -> None:
        # (errors name the database without its password)
        super().__init__(display_url(url), dialect("postgres"))
        self._url = url
        self.pool = pool  # reads; a cluster worker's coordination, ear, relay and locks
        self._writer = PgWriter(writer_conn, asyncio.get_running_loop(), lambda _n: None)
        self._write_lock = self._writer.write_lock  # as SQLite's: the writer takes it per batch
        self._writer.start()

    @classmethod
    async def open(cls, url: str, *, shared: bool = False) -> PgStore:
        """Connect to the database at `url`, migrate it (one worker at a time), start the
        writer and the readers. `shared`: as one worker of a cluster, which shares the
        database with other workers (else this runtime owns it while open)."""
        conn = await anyio.to_thread.run_sync(_open_writer, url, shared)
        try:
            pool = await open_pool(url, "agentdeck-reader", configure=adapt)
        except psycopg.Error as exc:
            conn.close()
            raise StoreError(scrub(f"cannot open {display_url(url)}: {exc}", url)) from None
        except BaseException:
            conn.close()
            raise
        store = cls(url, conn, pool)
        await store._index_at_open()
        return store

    async def _shutdown(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._writer.close)
            await self.pool.close()

    async def _apply(self, ops: Sequence[Op], *, urgent: bool, key: str | None = None,
                     then: Callable[[], None] | None = None) -> None:  # fmt: skip
        try:
            await self._writer.submit(ops, urgent, key, then)
        except Exception as exc:
            if getattr(exc, "sqlstate", None) == FENCED:
                raise LeaseLost(self._error("write", exc)) from None
            if isinstance(exc, psycopg.Error) or "closed" in str(exc):
                raise StoreError(self._error("write", exc)) from None
            raise

    def _error(self, what: str, exc: BaseException) -> str:
        return scrub(f"{what} on {self.path} failed: {exc}", self._url)

    async def index(self) -> None:
        """Bring the marks calls give their turns up to date (the full text needs no batch
        here: generated tsvector columns)."""
        if self.unindexed:
            self.unindexed = False
            try:
                await self._apply(self._texts(PG_INDEX_BATCH), urgent=False)
            except BaseException:
                self.unindexed = True
                raise

    def statistics(self) -> WriterStatistics:
        return self._writer.statistics()

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        try:
            async with self.pool.connection() as conn, conn.cursor(row_factory=_rows) as cur:
                await cur.execute(sql, params)
                return await cur.fetchall()
        except psycopg.Error as exc:  # (a pool that cannot lend one in time: PoolTimeout)
            raise StoreError(self._error("read", exc)) from None

    async def space(self) -> Space:
        from engine.store.pg.space import pg_space

        try:
            async with self.pool.connection() as conn:
                return await pg_space(conn)
        except psycopg.Error as exc:
            raise StoreError(self._error("read", exc)) from None

    async def reclaim(self, *, full: bool = False) -> None:
        from engine.store.pg.space import pg_reclaim

        try:
            async with self.pool.connection() as conn:
                await pg_reclaim(conn, full)
        except psycopg.Error as exc:
            raise StoreError(self._error("vacuum", exc)) from None

    async def integrity_check(self) -> str:
        """'ok' when the database answers with its schema at this agentdeck's version."""
        from engine.store.pg.migrations import VERSION

        version = await self.scalar("SELECT max(version) FROM agentdeck_schema")
        return "ok" if version == VERSION else f"schema at version {version}, not {VERSION}"


def _open_writer(url: str, shared: bool) -> psycopg.Connection[Any]:
    """The writer's connection, with the schema migrated and the database owned (or, for
    a cluster's worker, shared) for as long as the connection lives (blocking)."""
    me = f"agentdeck-writer {socket.gethostname()[:30]} pid {os.getpid()}"
    try:
        conn = psycopg.connect(url, autocommit=True, application_name=me)
    except psycopg.Error as exc:
        raise StoreError(scrub(f"cannot open {display_url(url)}: {exc}", url)) from None
    adapt(conn)
    try:
        migrate(conn)
        holder = _own(conn, shared)
    except (psycopg.Error, TooNew) as exc:
        conn.close()
        raise StoreError(scrub(f"cannot prepare {display_url(url)}: {exc}", url)) from None
    if holder is not None:
        conn.close()
        how = ("it is owned by a runtime outside the cluster" if shared else
               "several runtimes share a database only as workers of a cluster: set [cluster]"
               " enabled = true in each one's agentdeck.toml")  # fmt: skip
        raise StoreError(f"{display_url(url)} is in use by another agentdeck runtime"
                         f" ({holder}): {how}")  # fmt: skip
    return conn


def _own(conn: psycopg.Connection[Any], shared: bool) -> str | None:
    """Take the database's owner lock for this session (released when it ends, a kill -9
    included), shared by a cluster's workers; None when taken, else who holds it. Two
    runtimes on one database outside a cluster would both run its queued turns, a call
    twice among them; a cluster's workers take threads by lease (engine/cluster)."""
    from engine.store.pg.locks import advisory_key

    key = advisory_key("runtime")
    take = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
    # A runtime that just ended (killed, or closed by another command a moment ago) holds
    # it until its backend has exited, which a loaded server takes a while to do: ask
    # again for a little while before saying who holds it.
    deadline = time.monotonic() + OWNER_WAIT
    while True:
        row = conn.execute(f"SELECT {take}(%s)", (key,)).fetchone()
        if row and row[0]:
            return None
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    unsigned = key & 0xFFFFFFFFFFFFFFFF
    found = conn.execute(
        "SELECT COALESCE(NULLIF(a.application_name, ''), l.pid::text) FROM pg_locks l"
        " LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
        " AND l.granted AND l.objsubid = 1 AND l.classid::int8 = %s AND l.objid::int8 = %s",
        (unsigned >> 32, unsigned & 0xFFFFFFFF),
    ).fetchone()
    return str(found[0]) if found else "a session that just ended"
