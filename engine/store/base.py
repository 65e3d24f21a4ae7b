"""The truth layer's one interface: `Store`, which execution.db on SQLite
(engine/store/sqlite.py, `SqliteStore`) and a PostgreSQL database (engine/store/pg/store.py,
`PgStore`) implement as siblings; `engine.store.select.open_store` makes the one a room's
config names. The runtime, the store's named operations (engine/store/*.py) and the tests
take a `Store`, never one of the two.

A store has one writer (group commit: every checkpoint waiting goes into one transaction, a
savepoint each) and its reads; its errors are these, whichever database is below.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from engine.store.space import Space
from engine.store.sql import Dialect
from engine.store.writer import Op, WriterStatistics

__all__ = ["DiskFull", "LeaseLost", "Op", "Reading", "Store", "StoreError", "json_or_text"]


class StoreError(RuntimeError):
    """The truth layer could not be read or written."""


class DiskFull(StoreError):
    """A write found the disk holding the truth layer full: nothing of it is on disk. The
    runtime goes on reading and refuses new work until a write fits again."""


class LeaseLost(StoreError):
    """A cluster worker's checkpoint was refused: the lease of its thread is no longer this
    worker's (it expired, and another worker took the thread over). Nothing of it was
    written; the turn must stop here, and its new holder recovers it."""


def json_or_text(text: str | None) -> Any:
    """A stored JSON column as data; text that is not JSON (a model's raw arguments) as is."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):  # also huge numbers, absurd nesting
        return text


class Reading(ABC):
    """Reads of a store: `_rows` is each one's; one row and one value follow from it.

    A statement is given by its name in the store's catalogue (engine/store/sql/), or as
    SQL composed in the store's own dialect (`dialect`)."""

    dialect: Dialect

    async def fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one statement, indexed by position and by name."""
        return await self._rows(self.dialect.text(sql), params)

    @abstractmethod
    async def _rows(self, sql: str, params: Sequence[Any]) -> list[Any]:
        """The rows of one statement in this store's dialect."""

    async def fetchone(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = await self.fetchall(sql, params)
        return rows[0] if rows else None

    async def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = await self.fetchone(sql, params)
        return None if row is None else row[0]


class Store(Reading):
    """A room's truth layer: one writer, and reads. Each implementation opens itself with a
    classmethod `open` taking what it needs (a path, a URL)."""

    def __init__(self, path: Path | str, dialect: Dialect) -> None:
        self.dialect = dialect
        self.path = path  # what errors name: the file, or the database's URL without secrets
        self.unindexed = True  # written since the last index batch

    # -- what each database does its own way --------------------------------------------

    @abstractmethod
    async def _apply(self, ops: Sequence[Op], *, urgent: bool, key: str | None = None,
                     then: Callable[[], None] | None = None) -> None:  # fmt: skip
        """Hand `ops` (in this store's dialect) to the writer; return once committed (StoreError, DiskFull,
        LeaseLost when not)."""

    @abstractmethod
    async def _shutdown(self) -> None:
        """Commit what is queued, stop the writer, let every connection go."""

    @abstractmethod
    async def index(self) -> None:
        """Bring what the history reads (full text, the marks calls give their turns) up
        to date, in one transaction."""

    @abstractmethod
    def statistics(self) -> WriterStatistics:
        """The writer's counts: transactions, writes, what is queued."""

    @abstractmethod
    async def integrity_check(self) -> str:
        """'ok' when the store is whole."""

    @abstractmethod
    async def space(self) -> Space:
        """How much disk the store takes, and how much of it its data uses."""

    @abstractmethod
    async def reclaim(self, *, full: bool = False) -> None:
        """Give back to the disk what deletes freed, as far as the store does so by itself;
        `full`: all of it, even where that rewrites the database (engine/store/space.py)."""

    # -- the same on both -------------------------------------------------------------------

    async def write(
        self,
        ops: Sequence[Op],
        *,
        urgent: bool = False,
        key: str | None = None,
        then: Callable[[], None] | None = None,
    ) -> None:
        """Run `ops` in one transaction (atomically); return once it is committed.

        The writer commits it with whatever else is waiting (a savepoint each); `urgent`
        writes (admission, decisions) go first in the next batch and never wait for room
        in the queue. Cancelled while it waits, the write still commits. `key` (a turn's
        id): the write touches only that key's rows (and counters), so the writer may run
        its statements together with other keys' (engine/store/plan.py). `then` runs on
        the loop right after the COMMIT, even if the awaiter was cancelled meanwhile.
        """
        self.unindexed = True
        await self._apply(self._texts(ops), urgent=urgent, key=key, then=then)

    def _texts(self, ops: Sequence[Op]) -> list[Op]:
        """`ops` with each statement's text in this store's dialect."""
        text = self.dialect.text
        return [(text(sql), params) for sql, params in ops]

    async def _index_at_open(self) -> None:
        """Index what a run that stopped left unindexed; if that fails, the store lets its
        writer and connections go before the error goes on."""
        try:
            await self.index()
        except BaseException:
            await self._shutdown()
            raise

    async def close(self) -> None:
        try:
            await self.index()
        except DiskFull as exc:  # what is left unindexed is indexed at the next open
            logging.getLogger("agentdeck").warning("indexing left for later: %s", exc)
        finally:
            await self._shutdown()

    async def index_forever(self, every: float) -> None:
        """`index` every `every` seconds until cancelled; a failed batch is tried again."""
        while True:
            await anyio.sleep(every)
            try:
                await self.index()
            except DiskFull as exc:  # said by the runtime's notice: one line here
                logging.getLogger("agentdeck").warning("full-text indexing waits: %s", exc)
            except StoreError:
                logging.getLogger("agentdeck").warning("full-text indexing failed", exc_info=True)
