"""The one writer of execution.db: a thread with its own sqlite3 connection, group commit.

Every write of the room goes through `Writer.submit`. The thread drains its queue and
commits everything waiting (up to MAX_BATCH_OPS statements) in ONE transaction: first as
few statements as it can (the rows of one SQL in one `executemany`, engine/store/plan.py);
if one of them fails, it rolls that back and runs each write (a checkpoint: a list of
statements that must apply together) inside its own SAVEPOINT, so a write that fails rolls
back alone while the others commit. One fsync then covers the
whole batch, which is how many concurrent turns commit faster than the disk syncs. The
event loop is woken once per batch (one `call_soon_threadsafe` that settles every future
of the batch), and a future is settled only after the COMMIT that holds its statements:
with synchronous=FULL, nothing is acknowledged before it is on disk.

Urgent writes (admission of turn requests, decisions) go to the front of the next batch,
which starts as soon as the current one commits; they never wait behind a queue of step
checkpoints. The queue is bounded (by statements, `max_ops`): a producer that finds it full
waits, in order, until a batch frees room; nothing is dropped or reordered.

A write handed to the writer is committed or failed, never half-known and never dropped:
once `submit` is called, a cancel of its awaiter (even one that comes while it waits for
room in the queue) leaves the write to commit with its batch, so callers need no shielded
scope. What must follow the commit whether or not the awaiter is still there (publishing
a checkpoint's events) is its `then`, run on the loop when the batch settles.

AGENTDECK_WRITER_KILL=POINT:N makes the writer SIGKILL its own process at POINT of its N-th
batch of two writes or more (POINT: `savepoint`, between two statements or savepoints; `commit`, before
COMMIT; `wake`, after COMMIT, before the loop hears of it). Only the crash test sets it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.store.plan import plan

Op = tuple[str, Sequence[Any]]
MAX_OPS = 8192  # statements queued or committing before producers wait
# Statements of step checkpoints per transaction: an urgent write waits for at most one
# batch this size (with 1,000 threads a batch would otherwise hold everything queued).
MAX_BATCH_OPS = 1024
KILL_POINTS = ("savepoint", "commit", "wake")
RETRIES = 8  # runs of a batch that met another writer (a deadlock) before its writes fail
log = logging.getLogger("agentdeck")


@dataclass(frozen=True)
class WriterStatistics:
    """What the writer has done since it started."""

    transactions: int  # COMMITs (batches)
    writes: int  # writes committed or failed
    queued_ops: int  # statements queued or committing now
    producers_waiting: int  # awaiting room in the queue
    cpu: float  # seconds of CPU the writer's thread has used


class _Job:
    __slots__ = ("ops", "key", "future", "then", "error")

    def __init__(
        self,
        ops: Sequence[Op],
        key: str | None,
        future: asyncio.Future[None],
        then: Callable[[], None] | None,
    ) -> None:
        self.ops = ops
        self.key = key
        self.future = future
        self.then = then
        self.error: BaseException | None = None


def _kill_plan() -> tuple[str, int] | None:
    spec = os.environ.get("AGENTDECK_WRITER_KILL", "")
    point, _, n = spec.partition(":")
    if point not in KILL_POINTS:
        return None
    return point, int(n or "1")


class Writer(threading.Thread):
    """Owns `conn` (opened, configured) and every write made through it."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        write_lock: threading.Lock,
        loop: asyncio.AbstractEventLoop,
        on_commit: Callable[[int], None],
        max_ops: int = MAX_OPS,
    ) -> None:
        super().__init__(name="agentdeck-writer", daemon=True)
        self._conn = conn
        self._cur = conn.cursor()
        self._write_lock = write_lock  # shared with the WAL checkpointer
        self._loop = loop
        self._on_commit = on_commit  # called on the writer's thread with the batch size
        self.max_ops = max_ops
        self.max_batch_ops = MAX_BATCH_OPS
        self._cond = threading.Condition(threading.Lock())
        self._urgent: deque[_Job] = deque()
        self._normal: deque[_Job] = deque()
        self._closing = False
        # the event loop's side: statements in flight, producers waiting for room (FIFO)
        self._in_flight = 0
        self._space: deque[asyncio.Future[None]] = deque()
        self._transactions = 0
        self._writes = 0
        self._cpu = 0.0
        self._kill = _kill_plan()
        self._multi = 0  # batches of two writes or more, for the kill plan

    # -- the event loop's side ----------------------------------------------------------------

    async def submit(
        self,
        ops: Sequence[Op],
        urgent: bool = False,
        key: str | None = None,
        then: Callable[[], None] | None = None,
    ) -> None:
        """Commit `ops` atomically in the next batch; return after its COMMIT.

        `then` runs on the loop right after that COMMIT (before this returns), also when
        the awaiter was cancelled meanwhile; not if the write failed.

        Raises the statement's error (sqlite3.Error, or what sqlite3 raised) if it failed.
        Writes with different `key`s (a turn's id) touch different rows: the batch may run
        their statements of one SQL together (engine/store/plan.py); without a key, a write
        keeps its place against every other.
        """
        size = max(1, len(ops))
        if not urgent and (self._space or self._full(size)):  # behind those already waiting
            room: asyncio.Future[None] = self._loop.create_future()
            self._space.append(room)
            while True:
                try:
                    await room
                except BaseException:  # cancelled: the write is queued all the same (past
                    if room in self._space:  # the bound by one write), never dropped
                        self._space.remove(room)
                    elif room.done() and not room.cancelled():
                        self._wake_producer()  # pass the wake-up on
                    self._enqueue(ops, urgent, key, then)
                    raise
                if not self._full(size):
                    break
                room = self._loop.create_future()
                self._space.appendleft(room)  # still first in line
        await self._enqueue(ops, urgent, key, then)  # cancelled: it commits all the same

    def _enqueue(
        self, ops: Sequence[Op], urgent: bool, key: str | None, then: Callable[[], None] | None
    ) -> asyncio.Future[None]:
        future: asyncio.Future[None] = self._loop.create_future()
        job = _Job(ops, key, future, then)
        with self._cond:
            if self._closing:
                raise sqlite3.ProgrammingError("the writer is closed")  # a StoreError
            (self._urgent if urgent else self._normal).append(job)
            self._cond.notify()
        self._in_flight += max(1, len(ops))
        self._wake_producer()  # room may be left for the next one in line
        return future

    def _settle(self, jobs: list[_Job]) -> None:
        """On the loop: the batch holding `jobs` committed (or failed); release its awaiters."""
        freed = 0
        for job in jobs:
            freed += max(1, len(job.ops))
            if job.then is not None and job.error is None:
                try:
                    job.then()
                except Exception:  # a subscriber's fault must not strand the others
                    log.exception("after a commit")
            if job.future.done():  # its awaiter was cancelled
                continue
            if job.error is None:
                job.future.set_result(None)
            else:
                job.future.set_exception(job.error)
        self._free(freed)

    def _full(self, size: int) -> bool:
        return self._in_flight > 0 and self._in_flight + size > self.max_ops

    def _free(self, freed: int) -> None:
        self._in_flight -= freed
        self._wake_producer()

    def _wake_producer(self) -> None:
        """Wake the first producer waiting for room (it checks its own size, and wakes the
        next one once it is in)."""
        while self._space and self._in_flight < self.max_ops:
            room = self._space.popleft()
            if not room.done():
                room.set_result(None)
                return

    def statistics(self) -> WriterStatistics:
        return WriterStatistics(self._transactions, self._writes, self._in_flight,
                                len(self._space), self._cpu)  # fmt: skip

    def close(self) -> None:
        """Commit what is queued, then stop the thread (blocking: call it off the loop)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self.join()

    # -- the writer's thread --------------------------------------------------------------------

    def run(self) -> None:
        try:
            self._drain()
        finally:
            self._close_connection()

    def _close_connection(self) -> None:
        self._conn.close()

    def _drain(self) -> None:
        while True:
            with self._cond:
                while not self._urgent and not self._normal and not self._closing:
                    self._cond.wait()
                if not self._urgent and not self._normal:
                    return  # closing, and everything is committed
                batch, size = [*self._urgent], 0
                self._urgent.clear()
                while self._normal and (not batch or size < self.max_batch_ops):
                    job = self._normal.popleft()
                    size += len(job.ops)
                    batch.append(job)
            self._commit_retrying(batch)
            self._transactions += 1
            self._writes += len(batch)
            self._on_commit(len(batch))
            self._cpu = time.thread_time()
            self._maybe_kill("wake", batch)
            try:
                self._loop.call_soon_threadsafe(self._settle, batch)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

    # How a batch reaches the database (a subclass for another one changes only these:
    # engine/store/pg/writer.py).
    BEGIN = "BEGIN IMMEDIATE"

    def _in_transaction(self) -> bool:
        return bool(self._conn.in_transaction)

    def _retryable(self, exc: BaseException) -> bool:
        """Whether a batch that failed so may succeed when run again whole (several writers
        on one database: a deadlock between them, a serialization failure). Never here."""
        return False

    def _commit_retrying(self, batch: list[_Job]) -> None:
        """`_commit`, run again whole (after a short, growing pause) while it fails in a way
        `_retryable` says may pass: nothing of it was committed, so nothing is applied
        twice, and the writes keep their order."""
        for attempt in range(RETRIES):
            self._commit(batch)
            if not any(job.error is not None and self._retryable(job.error) for job in batch):
                return
            if attempt + 1 < RETRIES:
                log.info("a batch met another writer's (%s): run again", batch[0].error)
                for job in batch:
                    job.error = None
                time.sleep(0.005 * 2**attempt)

    def _commit(self, batch: list[_Job]) -> None:
        conn = self._conn
        with self._write_lock:  # (tests hold it to choose what one batch holds)
            if len(batch) > 1:
                self._multi += 1
            try:
                conn.execute(self.BEGIN)
                try:
                    self._grouped(batch)
                except Exception:
                    if len(batch) == 1:  # the transaction is the write: it fails
                        raise
                    # one write failed: run them again one by one, so that it fails alone
                    conn.execute("ROLLBACK")
                    conn.execute(self.BEGIN)
                    for i, job in enumerate(batch):
                        if i == 1:
                            self._maybe_kill("savepoint", batch)
                        self._savepoint(job)
                self._maybe_kill("commit", batch)
                conn.execute("COMMIT")
            except Exception as exc:  # the whole batch fails: nothing of it is on disk
                if self._in_transaction():
                    try:
                        conn.execute("ROLLBACK")
                    except Exception:  # the connection is gone: so is the transaction
                        pass
                for job in batch:
                    job.error = job.error or exc

    def _grouped(self, batch: list[_Job]) -> None:
        """Every write of `batch`, rows of one SQL in one `executemany` (plan.py): one
        statement (and one wait for the GIL) where there were a write's worth."""
        cur = self._cur
        for i, (sql, rows) in enumerate(plan((job.key, job.ops) for job in batch)):
            if i == 1:
                self._maybe_kill("savepoint", batch)
            if len(rows) == 1:
                cur.execute(sql, rows[0])
            else:
                cur.executemany(sql, rows)

    def _savepoint(self, job: _Job) -> None:
        conn = self._conn
        conn.execute("SAVEPOINT w")
        try:
            for sql, params in job.ops:
                conn.execute(sql, params)
        except Exception as exc:  # this write alone rolls back
            if self._retryable(exc):
                raise  # the whole batch is run again (`_commit_retrying`)
            job.error = exc
            conn.execute("ROLLBACK TO SAVEPOINT w")
        conn.execute("RELEASE SAVEPOINT w")

    def _maybe_kill(self, point: str, batch: list[_Job]) -> None:
        if self._kill is not None and len(batch) > 1 and self._kill == (point, self._multi):
            os.kill(os.getpid(), signal.SIGKILL)
