"""execution.db over aiosqlite: WAL, one writer, one transaction per checkpoint.

A checkpoint is a list of statements run in one hop to the database thread (one queue
item, one BEGIN..COMMIT), not one await per statement. SQL stays portable so the store can
later move behind the same interface to a shared server database.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import aiosqlite

Op = tuple[str, Sequence[Any]]
Synchronous = Literal["FULL", "NORMAL"]


def json_or_text(text: str | None) -> Any:
    """A stored JSON column as data; text that is not JSON (a model's raw arguments) as is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return text


class StoreError(RuntimeError):
    """The truth layer could not be read or written."""


def _schema() -> str:
    return resources.files("engine.store").joinpath("schema.sql").read_text()


class Store:
    """The one writer of a room's execution.db."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path

    @classmethod
    async def open(cls, path: Path, synchronous: Synchronous = "FULL") -> Store:
        """Open (creating if needed) the database for writing."""
        if synchronous not in ("FULL", "NORMAL"):
            raise StoreError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        try:
            db = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {path}: {exc}") from exc
        db.row_factory = sqlite3.Row
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute(f"PRAGMA synchronous={synchronous}")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute("PRAGMA busy_timeout=5000")
            await db.executescript(_schema())
        except sqlite3.Error as exc:
            await db.close()
            raise StoreError(f"cannot prepare {path}: {exc}") from exc
        return cls(db, path)

    async def close(self) -> None:
        await self._db.close()

    async def write(self, ops: Sequence[Op]) -> None:
        """Run `ops` in one transaction, in one hop to the database thread."""

        def apply() -> None:
            conn = self._db._conn  # noqa: SLF001 - we are on aiosqlite's own thread here
            try:
                conn.execute("BEGIN IMMEDIATE")
                for sql, params in ops:
                    conn.execute(sql, params)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        try:
            # aiosqlite has no public "run this function on the connection's thread";
            # _execute is how its own methods do it, and it keeps a checkpoint one hop.
            await self._db._execute(apply)  # noqa: SLF001
        except sqlite3.Error as exc:
            raise StoreError(f"write to {self.path.name} failed: {exc}") from exc

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            return list(await self._db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise StoreError(f"read from {self.path.name} failed: {exc}") from exc

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = await self.fetchone(sql, params)
        return None if row is None else row[0]

    async def integrity_check(self) -> str:
        return str(await self.scalar("PRAGMA integrity_check"))
