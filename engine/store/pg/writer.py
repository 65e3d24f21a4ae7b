"""The one writer of a room's PostgreSQL database: engine/store/writer.py's queue, on psycopg.

`PgWriter` keeps everything `Writer` promises (group commit, urgent writes first, a
bounded queue, a cancelled awaiter's write still commits, `then` after the COMMIT) and
replaces only how a batch reaches the database: one transaction on a psycopg connection
(in autocommit mode, so BEGIN and COMMIT are the writer's own), every statement turned
into PostgreSQL's dialect (dialect.py). As on SQLite, a batch is first run as a plan of
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

from engine.store.pg.dialect import to_pg
from engine.store.plan import plan
from engine.store.writer import Writer, _Job


class PgWriter(Writer):
    """Owns `conn` (a psycopg Connection in autocommit mode) and every write made through it."""

    def __init__(self, conn: psycopg.Connection[Any], loop: asyncio.AbstractEventLoop,
                 on_commit: Callable[[int], None]) -> None:  # fmt: skip
        super().__init__(conn, threading.Lock(), loop, on_commit)  # type: ignore[arg-type]
        self.write_lock = self._write_lock
        self.name = "agentdeck-pg-writer"
        self._pg = conn

    def run(self) -> None:
        try:
            self._drain()
        finally:
            self._pg.close()

    def _in_transaction(self) -> bool:
        return self._pg.info.transaction_status != pq.TransactionStatus.IDLE

    def _commit(self, batch: list[_Job]) -> None:
        with self._write_lock:  # held by tests to choose what one batch holds
            self._transaction(batch)

    def _transaction(self, batch: list[_Job]) -> None:
        conn = self._pg
        if len(batch) > 1:
            self._multi += 1
        try:
            conn.execute("BEGIN")
            try:
                self._grouped(batch)
            except Exception:
                if len(batch) == 1:  # the transaction is the write: it fails
                    raise
                # one write failed: run them again one by one, so that it fails alone
                conn.execute("ROLLBACK")
                conn.execute("BEGIN")
                for i, job in enumerate(batch):
                    if i == 1:
                        self._maybe_kill("savepoint", batch)
                    self._savepoint(job)
            self._maybe_kill("commit", batch)
            conn.execute("COMMIT")
        except Exception as exc:  # the whole batch fails: nothing of it is committed
            if not conn.closed and self._in_transaction():
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    pass
            for job in batch:
                job.error = job.error or exc

    def _grouped(self, batch: list[_Job]) -> None:
        with self._pg.cursor() as cur:
            for i, (sql, rows) in enumerate(plan((job.key, job.ops) for job in batch)):
                if i == 1:
                    self._maybe_kill("savepoint", batch)
                if len(rows) == 1:
                    cur.execute(to_pg(sql), rows[0])
                else:
                    cur.executemany(to_pg(sql), rows)

    def _savepoint(self, job: _Job) -> None:
        conn = self._pg
        conn.execute("SAVEPOINT w")
        try:
            for sql, params in job.ops:
                conn.execute(to_pg(sql), params)
        except Exception as exc:  # this write alone rolls back
            job.error = exc
            conn.execute("ROLLBACK TO SAVEPOINT w")
        conn.execute("RELEASE SAVEPOINT w")
