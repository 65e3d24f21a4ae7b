"""The one writer of a room's PostgreSQL database: engine/store/writer.py's queue, on psycopg.

`PgWriter` keeps everything `Writer` promises (group commit, urgent writes first, a
bounded queue, a cancelled awaiter's write still commits, `then` after the COMMIT) and
replaces only how a batch reaches the database: one transaction on a psycopg connection
(in autocommit mode, so BEGIN and COMMIT are the writer's own), statements in
PostgreSQL's dialect (the store resolves their names before they are queued). As on SQLite, a batch is first run as a plan of
groups (rows of one SQL in one `executemany`, which psycopg pipelines); if a statement
fails, the batch is rolled back and run again write by write, a SAVEPOINT each, so a bad
write fails alone.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import pq

from engine.store.writer import Writer

RETRY_STATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure


class PgWriter(Writer):
    """Owns `conn` (a psycopg Connection in autocommit mode) and every write made through it."""

    BEGIN = "BEGIN"

    def __init__(self, conn: psycopg.Connection[Any], loop: asyncio.AbstractEventLoop,
                 on_commit: Callable[[int], None]) -> None:  # fmt: skip
        super().__init__(conn, threading.Lock(), loop, on_commit)  # type: ignore[arg-type]
        self.write_lock = self._write_lock
        self.name = "agentdeck-pg-writer"
        self._pg = conn

    def _in_transaction(self) -> bool:
        pg = self._pg
        return not pg.closed and pg.info.transaction_status != pq.TransactionStatus.IDLE

    def _retryable(self, exc: BaseException) -> bool:
        """A deadlock with another worker's writer (over the counters the history triggers
        keep), or a serialization failure: PostgreSQL rolled the transaction back; run
        again, it commits."""
        return getattr(exc, "sqlstate", None) in RETRY_STATES

    def _close_connection(self) -> None:
        """Give the database's owner lock back before closing: closing alone frees it only
        once the server's backend has exited, and a command run right after this one (the
        next `agentdeck rules add` on a free room) found it still held."""
        try:
            if not self._pg.closed and not self._in_transaction():
                self._pg.execute("SELECT pg_advisory_unlock_all()")
        except psycopg.Error:
            pass  # closing frees it anyway, a moment later
        finally:
            self._pg.close()
