"""execution.db: WAL, one writer thread with group commit, reads over aiosqlite.

A checkpoint is a list of statements handed to the writer (engine/store/writer.py) in one
piece; the writer commits every checkpoint waiting in one transaction, a savepoint each.
Reads stay on aiosqlite's thread with a connection of their own: in WAL mode they never
wait for the writer, and a read made after a write returned sees it. Statements come by name
from the catalogue of SQLite's own (engine/store/sql/sqlite/).

Two jobs stay off a checkpoint's transaction because each costs more than the checkpoint
itself: copying the WAL back into the database (a background thread with its own
connection does it, so no commit pays for it) and the history bookkeeping (`index`: the
full-text indexes and the marks tool calls give their turns, one batch for everything
written since the last one, engine/store/index_batch.py; the runtime calls it about once
a second).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import aiosqlite
import anyio

from engine.store.base import DiskFull, LeaseLost, Store, StoreError, json_or_text
from engine.store.index_batch import INDEX_BATCH
from engine.store.migrations import VERSION, TooNew, script
from engine.store.space import INCREMENTAL, SPACE, Space, files_of, sqlite_reclaim
from engine.store.sql import dialect
from engine.store.writer import Op, Writer, WriterStatistics

__all__ = [
    "DiskFull",
    "LeaseLost",
    "Op",
    "SqliteStore",
    "Store",
    "StoreError",
    "WriterStatistics",
    "json_or_text",
]
Synchronous = Literal["FULL", "NORMAL"]


def _failed_write(path: Path, exc: sqlite3.Error) -> StoreError:
    code = getattr(exc, "sqlite_errorcode", None)
    full = code is not None and code & 0xFF == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return (DiskFull if full else StoreError)(f"write to {path.name} failed: {exc}")


# Writes committed between two background WAL checkpoints. A pass copies each page the
# WAL holds once, however often it changed: at 64 the pass cost 40-50 us of CPU per step of
# bench_throughput --short, at 256 22 us (the WAL then holds about 1 MB between passes).
CHECKPOINT_EVERY = 256


class Checkpointer(threading.Thread):
    """Copies the WAL back into the database on its own connection, so that commits do not
    wait for it (the writer sets wal_autocheckpoint=0).

    A PASSIVE checkpoint copies while the writer goes on committing, so it never catches up
    with a busy writer, and SQLite starts the WAL file over only once every frame is copied.
    So each pass copies the bulk beside the writer, then copies the few frames committed
    meanwhile while holding `write_lock` (the writer's transactions hold it too): the
    writer waits for that short tail, and its next commit starts the WAL over.

    The pass that completes syncs the database file (and the WAL before it copies), and that
    sync writes out every page the first pass copied: under load the writer, and so every
    admission, waited 1-5 ms (p50-p90) for the lock, a few times a second. So between the
    two passes the files are synced here, without the lock, and the locked pass's syncs find
    only its tail to write (p50 about 1 ms, p90 1.5-2 ms). The sync goes through a
    descriptor SQLite holds (Linux's /proc/self/fd names them): one of our own could not be
    closed safely while SQLite's connections are open, since closing any descriptor of a
    file drops the process's POSIX locks on it, SQLite's among them.
    """

    def __init__(self, path: Path, write_lock: threading.Lock) -> None:
        super().__init__(name="agentdeck-wal-checkpoint", daemon=True)
        self.path = path
        self.write_lock = write_lock
        self._wake = threading.Event()
        self._closing = False
        self._names = (os.path.realpath(path), os.path.realpath(path) + "-wal")
        self._files: dict[str, int] = {}  # name -> a descriptor SQLite holds open on it

    def poke(self) -> None:
        self._wake.set()

    def run(self) -> None:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout=5000")
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._closing:
                    return
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self._sync()
                    with self.write_lock:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:  # the next one will try again; the writer goes on
                    logging.getLogger("agentdeck").warning("WAL checkpoint failed", exc_info=True)
        finally:
            conn.close()

    def _sync(self) -> None:
        """Write out what the unlocked pass copied (and the WAL), so that the locked pass's
        own syncs are short. Only an extra sync: a failure is left to SQLite's."""
        for name in self._names:
            fd = self._files.get(name)
            if fd is None or _target(fd) != name:  # (closed since, or its number reused)
                self._files = _held_open(self._names)
                fd = self._files.get(name)
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.fdatasync(fd)

    def close(self) -> None:
        self._closing = True
        self._wake.set()
        self.join()


def _target(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # closed, or no /proc (the extra sync is Linux's)
        return None


def _held_open(names: tuple[str, ...]) -> dict[str, int]:
    """A descriptor this process holds open on each of `names` that has one."""
    found: dict[str, int] = {}
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for fd in map(int, fds):
        if (name := _target(fd)) in names:
            found.setdefault(name, fd)
    return found


def _schema() -> str:
    return resources.files("engine.store").joinpath("schema.sql").read_text()


def _open_writer(path: Path, synchronous: Synchronous) -> sqlite3.Connection:
    """The writer's connection, with the schema migrated and created (blocking).

    One transaction: a new room costs one sync, not one per statement, and a migration
    interrupted half-way leaves the room as it was. The version is read first: only the
    room's owner opens it for writing, so nobody migrates between.
    """
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path}: {exc}") from exc
    try:
        # A new room gives back the pages retention frees (engine/store/space.py); an older
        # one is made so by the VACUUM an operator asks for (`agentdeck gc --vacuum`).
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")  # (before WAL: it starts the file)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the Checkpointer's job
        version = (conn.execute("PRAGMA user_version").fetchone() or (0,))[0]
        conn.executescript(
            f"BEGIN IMMEDIATE;\n{script(version)}{_schema()}\n"
            f"PRAGMA user_version = {VERSION};\nCOMMIT;"
        )
    except (sqlite3.Error, TooNew) as exc:
        conn.close()
        raise StoreError(f"cannot prepare {path}: {exc}") from exc
    return conn


class SqliteStore(Store):
    """The one writer of a room's execution.db (a `Writer` thread), and its reads."""

    def __init__(self, db: aiosqlite.Connection, path: Path, conn: sqlite3.Connection) -> None:
        super().__init__(path, dialect("sqlite"))
        self.file = path
        self._db = db  # reads: aiosqlite's thread, beside the writer (WAL)
        self._since_checkpoint = 0
        self._write_lock = threading.Lock()
        self._checkpointer = Checkpointer(path, self._write_lock)
        self._checkpointer.start()
        self._writer = Writer(conn, self._write_lock, asyncio.get_running_loop(), self._committed)
        self._writer.start()

    @classmethod
    async def open(cls, path: Path, synchronous: Synchronous = "FULL") -> SqliteStore:
        """Open (creating if needed) the database for writing."""
        if synchronous not in ("FULL", "NORMAL"):
            raise StoreError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        conn = await anyio.to_thread.run_sync(_open_writer, path, synchronous)
        try:
            db = await aiosqlite.connect(path, isolation_level=None)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"cannot open {path}: {exc}") from exc
        db.row_factory = sqlite3.Row
        try:
            # the writer's settings, so that a read of them tells what writes get
            await db.execute(f"PRAGMA synchronous={synchronous}")
            await db.execute("PRAGMA foreign_keys=ON")
            await db.execute("PRAGMA busy_timeout=5000")
            await db.execute("PRAGMA wal_autocheckpoint=0")
        except sqlite3.Error as exc:
            await db.close()
            conn.close()
            raise StoreError(f"cannot prepare {path}: {exc}") from exc
        store = cls(db, path, conn)
        await store._index_at_open()
        return store

    async def _shutdown(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._writer.close)  # commits what is queued
            self._checkpointer.close()
            await self._db.close()  # the last connection out checkpoints the rest

    async def index(self) -> None:
        """Bring the full-text indexes up to date, in one transaction."""
        if self.unindexed:
            self.unindexed = False  # a write made while the batch runs sets it again
            try:
                await self._apply(self._texts(INDEX_BATCH), urgent=False)
            except BaseException:
                self.unindexed = True
                raise

    async def _apply(
        self,
        ops: Sequence[Op],
        *,
        urgent: bool,
        key: str | None = None,
        then: Callable[[], None] | None = None,
    ) -> None:
        try:
            await self._writer.submit(ops, urgent, key, then)
        except sqlite3.Error as exc:
            raise _failed_write(self.file, exc) from exc

    def _committed(self, writes: int) -> None:
        """On the writer's thread, after each COMMIT: poke the WAL checkpointer now and then."""
        self._since_checkpoint += writes
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            self._checkpointer.poke()

    def statistics(self) -> WriterStatistics:
        """The writer's counts: transactions, writes, what is queued."""
        return self._writer.statistics()

    async def _rows(self, sql: str, params: Sequence[Any]) -> list[sqlite3.Row]:
        try:
            return list(await self._db.execute_fetchall(sql, params))
        except sqlite3.Error as exc:
            raise StoreError(f"read from {self.file.name} failed: {exc}") from exc

    async def integrity_check(self) -> str:
        return str(await self.scalar("PRAGMA integrity_check"))

    async def space(self) -> Space:
        pages, free, size, auto = [int(await self.scalar(f"PRAGMA {name}")) for name in SPACE]
        return Space(files_of(self.file), (pages - free) * size, auto == INCREMENTAL)

    async def reclaim(self, *, full: bool = False) -> None:
        try:
            await anyio.to_thread.run_sync(sqlite_reclaim, self.file, self._write_lock, full)
        except sqlite3.Error as exc:
            raise _failed_write(self.file, exc) from exc
