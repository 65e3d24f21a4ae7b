"""Reading a room's truth layer without owning it, on either backend.

On SQLite a read-only connection to execution.db (`mode=ro`: WAL readers never block the
writer); on PostgreSQL (the room's `[store] url` or AGENTDECK_STORE_URL) a read-only
session (`engine.store.pg.reader.PgReader`). `open_reader` gives either as `ReadsFrom`:
the store's reads (statements by name, rows indexed by position and by name) in the
dialect of the database below.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import aiosqlite

from engine.room import Room
from engine.store.base import Reading
from engine.store.select import room_store_url
from engine.store.sql import dialect
from engine.store.sqlite import StoreError

__all__ = ["Reader", "Reads", "ReadsFrom", "connect_readonly", "is_current", "open_reader"]


class Reader(Protocol):
    """A read-only connection: aiosqlite's, or `PgReader`."""

    async def execute_fetchall(self, sql: str, parameters: Sequence[Any] = ...) -> Iterable[Any]:
        """The rows of one statement."""

    async def close(self) -> None:
        """Let the connection go."""


# What the store's reads take: the room's `Store` (the owner's), or `ReadsFrom` a read-only
# connection (a room read without opening a run).
Reads = Reading


class ReadsFrom(Reading):
    """The store's reads over a read-only connection (`open_reader`'s), which it closes."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        sqlite = isinstance(reader, aiosqlite.Connection)
        self.dialect = dialect("sqlite" if sqlite else "postgres")

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return list(await self.reader.execute_fetchall(sql, params))

    async def close(self) -> None:
        await self.reader.close()


async def is_current(reads: ReadsFrom) -> bool:
    """Whether the store is at the schema this agentdeck writes: an older one (a room made
    by an earlier release) is read only after a runtime of this one has migrated it."""
    if reads.dialect.name == "sqlite":
        from engine.store.migrations import VERSION

        rows = await reads.fetchall("SELECT user_version FROM pragma_user_version")
    else:
        from engine.store.pg.migrations import VERSION

        rows = await reads.fetchall("SELECT max(version) FROM agentdeck_schema")
    return [tuple(r) for r in rows] == [(VERSION,)]


async def connect_readonly(room: Room) -> aiosqlite.Connection:
    """A read-only connection to execution.db that never blocks the room's owner (WAL
    readers don't). A room on a read-only filesystem (a mounted backup) is read as
    immutable: a WAL reader needs to write the -shm file, and nothing can change the
    database there. sqlite3.Error when it cannot be read."""
    uri = f"file:{quote(str(room.db))}?mode=ro"
    if _read_only_fs(room.path):
        uri += "&immutable=1"
    db = await aiosqlite.connect(uri, uri=True)
    try:
        db.row_factory = sqlite3.Row
        await db.execute("PRAGMA busy_timeout=2000")
        await db.execute("SELECT count(*) FROM sqlite_master")  # opens the file: fails here
    except BaseException:
        await db.close()  # (its thread would keep the process alive)
        raise
    return db


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


async def connect_postgres(url: str) -> Any:
    """A `PgReader` on the database at `url` (StoreError: psycopg is missing, or the
    database cannot be reached)."""
    try:
        from engine.store.pg.reader import PgReader
    except ImportError as exc:
        raise StoreError("a PostgreSQL store needs psycopg: pip install 'agentdeck[postgres]'"
                         ) from exc  # fmt: skip
    return await PgReader.connect(url)


async def open_reader(room: Room) -> ReadsFrom | None:
    """A read-only connection to the room's store; None when it is SQLite and has no
    database yet. StoreError when a PostgreSQL store cannot be reached (never an empty
    view in its place)."""
    url = room_store_url(room.config)
    if url is not None:
        pg = await connect_postgres(url)
        if not await pg.migrated():  # no runtime has opened it yet: nothing to read
            await pg.close()
            return None
        return ReadsFrom(pg)
    if not room.db.exists():
        return None
    return ReadsFrom(await connect_readonly(room))
