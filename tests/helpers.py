"""Helpers for engine tests: a runtime on a scripted model with counted ids, a message to
submit, and rows of the room's execution.db (through the runtime, or read-only from
outside while another process owns the room).

Every engine test that opens a room the same way uses `runtime`, so a change to how a
test room is opened (a new `Runtime.open` argument, another id scheme) is made once.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from engine.domain.messages import Message
from engine.providers.base import ModelRequest, Provider
from engine.runtime import Runtime
from engine.tools import Tool
from tests.scripted import Reply, ScriptedModel, add, boom, shell


def counted_ids(first: int = 1) -> Callable[[str], str]:
    """Ids that are the prefix and a count: `t1`, `s2`, `c3`, … (one count for all)."""
    counter = itertools.count(first)
    return lambda prefix: f"{prefix}{next(counter)}"


@asynccontextmanager
async def runtime(
    tmp_path: Path,
    model: Callable[[ModelRequest], Reply] | Provider,
    tools: Iterable[Tool] = (add, shell, boom),
    *,
    kind: str = "test",
    first_id: int = 1,
    **kw: Any,
) -> AsyncIterator[Runtime]:
    """A runtime on the room `tmp_path/room` with counted ids from `first_id`.

    `model` is a script (a request in, a `Reply` out) that a `ScriptedModel` answers
    with, or a provider used as it is. Other keywords go to `Runtime.open` (`plugins`,
    `config`, `clock`, `resume`, …).
    """
    provider = model if hasattr(model, "stream") else ScriptedModel(model)
    async with Runtime.open(
        tmp_path / "room",
        kind=kind,
        provider=provider,
        tools=list(tools),
        ids=counted_ids(first_id),
        **kw,
    ) as rt:
        yield rt


def msg(text: str, thread: str = "t1") -> Message:
    """A message from the command line (origin `invoke`) on `thread`."""
    return Message(origin="invoke", sender="test", thread_id=thread, text=text)


async def rows(rt: Runtime, sql: str, *params: Any) -> list[tuple]:
    """The rows a query of the room's database returns, as tuples."""
    return [tuple(r) for r in await on(rt.store).fetchall(sql, params)]


def room_rows(room: Path, sql: str, *params: Any) -> list[tuple]:
    """The rows a query of `room`'s execution.db returns, read-only: safe while another
    process owns the room. (When the test runs its rooms on PostgreSQL, `store_backend` in
    tests/conftest.py: the rows of the room's database, read in a transaction of their own.)"""
    return _on_room(room, sql, params, write=False)


def room_write(room: Path, sql: str, *params: Any) -> None:
    """Run one statement on `room`'s store from outside its runtime and commit it (what a
    test does to put a room in a state no runtime writes); SQLite or PostgreSQL as `rows`."""
    _on_room(room, sql, params, write=True)


def room_bytes(room: Path) -> bytes:
    """Everything `room`'s store holds, as bytes: execution.db's files (every page, the
    WAL's too), or on PostgreSQL every row of every table as text."""
    from tests import pg

    if pg.ROOMS is None:
        return b"".join(p.read_bytes() for p in room.glob("execution.db*"))
    import psycopg

    with psycopg.connect(pg.ROOMS.url(room / "execution.db")) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return b"\n".join(str(row[0]).encode() for (table,) in tables.fetchall()
                           for row in conn.execute(f'SELECT t::text FROM "{table}" t'))  # fmt: skip


def _on_room(room: Path, sql: str, params: tuple[Any, ...], *, write: bool) -> list[tuple]:
    from tests import pg

    if pg.ROOMS is not None:
        import psycopg

        with psycopg.connect(pg.ROOMS.url(room / "execution.db")) as pconn:
            cur = pconn.execute(pg_spelling(sql), params)
            return [tuple(r) for r in cur.fetchall()] if cur.description else []
    mode = "rw" if write else "ro"
    conn = sqlite3.connect(f"file:{room / 'execution.db'}?mode={mode}", uri=True)
    try:
        with conn:
            return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def as_version(conn: Any, version: int) -> None:
    """Make the SQLite room on `conn` look as a room of `version` (engine/store/migrations.py)
    was: the columns added since are dropped, and its user_version says `version`."""
    if version < 11:
        conn.execute("ALTER TABLE steps DROP COLUMN conv_upto")
    if version < 10:
        conn.execute("DROP INDEX turns_prunable")
        conn.execute("DROP INDEX IF EXISTS events_turn")  # (retention's, when it ran)
        conn.execute("ALTER TABLE turns DROP COLUMN pruned_at")
        conn.execute("ALTER TABLE turns DROP COLUMN pruned_steps")
    if version < 9:
        conn.execute("ALTER TABLE decisions DROP COLUMN sandbox")
    if version < 8:
        for column in ("input_tokens", "output_tokens", "cached_tokens", "cost"):
            conn.execute(f"ALTER TABLE steps DROP COLUMN {column}")
        for column in ("cached_tokens", "cost", "unpriced"):
            conn.execute(f"ALTER TABLE turns DROP COLUMN {column}")
        conn.execute("DROP TABLE usage")
    if version < 6:
        conn.execute("ALTER TABLE tool_calls DROP COLUMN awaiting")
    if version < 7:
        conn.execute("ALTER TABLE turns DROP COLUMN instructions")
        conn.execute("ALTER TABLE turns DROP COLUMN model")
        conn.execute("ALTER TABLE threads DROP COLUMN instructions")
    conn.execute(f"PRAGMA user_version = {version}")


def pg_spelling(sql: str) -> str:
    """A test's plain SQL (`?` placeholders, whole-table reads) as psycopg takes it."""
    return sql.replace("%", "%%").replace("?", "%s")


class Spelled:
    """A store's reads for a test's own SQL, written as SQLite spells it (`?`): on
    PostgreSQL its placeholders are psycopg's. The engine's statements come by name from
    each database's catalogue (engine/store/sql/); only tests write SQL for either."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _sql(self, sql: str) -> str:
        return pg_spelling(sql) if self.store.dialect.name == "postgres" else sql

    async def fetchall(self, sql: str, params: Any = ()) -> list[Any]:
        return await self.store.fetchall(self._sql(sql), params)

    async def fetchone(self, sql: str, params: Any = ()) -> Any:
        return await self.store.fetchone(self._sql(sql), params)

    async def scalar(self, sql: str, params: Any = ()) -> Any:
        return await self.store.scalar(self._sql(sql), params)


def on(store: Any) -> Spelled:
    """`store`'s reads for a test's SQL (see `Spelled`)."""
    return Spelled(store)
