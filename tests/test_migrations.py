"""execution.db versions: a room made by an older agentdeck is brought up to date when it
is opened (its rows kept and readable), a new room starts at the newest version, and a room
from a newer agentdeck is refused with a clear error."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.store import StoreError, migrations
from engine.store import decisions as recorded
from engine.store.sqlite import SqliteStore
from tests.helpers import as_version, on

pytestmark = pytest.mark.anyio

# The columns every version since 1 added, as (table, column): a version-1 room lacks them.
ADDED = [(s.split()[2], s.split()[5]) for v in sorted(migrations.STEPS) for s in migrations.STEPS[v]
         if s.startswith("ALTER TABLE") and " ADD COLUMN " in s]  # fmt: skip


def columns(path: Path, table: str) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


async def version_1_room(path: Path) -> None:
    """A room as agentdeck wrote it before issue 15: its rules and decisions as they were,
    with a remembered decision and the whole-tool rule it made."""
    store = await SqliteStore.open(path)
    await store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("DROP INDEX turns_prunable")  # (it names a column added since)
        for table, name in ADDED:
            conn.execute(f"ALTER TABLE {table} DROP COLUMN {name}")
        conn.execute(
            "INSERT INTO decisions(id, call_id, action, use_result, reason, remember, decided_by,"
            " status, created_at) VALUES ('d1', 'c1', 'resume', 0, '', 'thread', 'operator',"
            " 'queued', 1.0)"
        )
        conn.execute(
            "INSERT INTO rules(tool, effect, scope, thread_id, decision_id, created_at)"
            " VALUES ('shell', 'allow', 'thread', 't1', 'd0', 1.0)"
        )
        conn.execute("PRAGMA user_version = 1")
    finally:
        conn.close()


async def test_a_new_room_is_at_the_newest_version(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "execution.db")
    try:
        assert await on(store).scalar("PRAGMA user_version") == migrations.VERSION
    finally:
        await store.close()
    for table, name in ADDED:
        assert name in columns(tmp_path / "execution.db", table)


async def test_a_version_1_room_gains_the_new_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "execution.db"
    await version_1_room(path)
    assert "pattern" not in columns(path, "rules")
    assert "pattern" not in columns(path, "decisions")
    store = await SqliteStore.open(path)
    try:
        assert await on(store).scalar("PRAGMA user_version") == migrations.VERSION
        [old] = await recorded.queued(store)  # an old remembered decision reads as before
        assert (old.id, old.remember, old.pattern) == ("d1", "thread", None)
        row = await on(store).fetchone("SELECT * FROM rules")
        assert (row["tool"], row["pattern"], row["made_by"], row["revoked_at"]) == (
            "shell", None, "operator", None)  # fmt: skip
        assert await store.integrity_check() == "ok"
    finally:
        await store.close()
    store = await SqliteStore.open(path)  # opening again migrates nothing twice
    await store.close()


async def test_a_room_from_a_newer_agentdeck_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "execution.db"
    store = await SqliteStore.open(path)
    await store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA user_version = {migrations.VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="upgrade agentdeck"):
        await SqliteStore.open(path)


async def test_a_version_7_room_gains_usage_filled_from_its_turns(tmp_path: Path) -> None:
    """Issue 33: what the room's turns spent before usage was kept is in the usage table,
    per day, group, thread and model: unpriced (no price was known), but for the offline
    model's tokens, which are free."""
    path = tmp_path / "execution.db"
    store = await SqliteStore.open(path)
    await store.close()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        as_version(conn, 7)
        conn.execute("INSERT INTO runs(id, kind, pid, started_at, status) VALUES ('r', 'run', 1,"
                     " 0, 'ended')")  # fmt: skip
        conn.execute("INSERT INTO threads(id, group_name, created_at, updated_at) VALUES"
                     " ('a', 'task', 0, 0)")  # fmt: skip
        for turn, model, at in (("t1", "openai:gpt-4o", 86400.5), ("t2", None, 90000.0),
                                ("t3", "offline:x", 3 * 86400.0)):  # fmt: skip
            conn.execute("INSERT INTO turns(id, thread_id, run_id, origin, sender, text, status,"
                         " rounds, input_tokens, output_tokens, created_at, updated_at, model)"
                         " VALUES (?, 'a', 'r', 'task', 'self', 'x', 'done', 1, 100, 10, ?, ?, ?)",
                         (turn, at, at, model))  # fmt: skip
    finally:
        conn.close()
    store = await SqliteStore.open(path)
    try:
        usage = await on(store).fetchall("SELECT day, model, steps, input_tokens, unpriced FROM"
                                         " usage ORDER BY day, model")  # fmt: skip
        turns = await on(store).fetchall("SELECT id, cost, unpriced FROM turns ORDER BY id")
    finally:
        await store.close()
    assert [tuple(r) for r in usage] == [("1970-01-02", "", 1, 100, 110),
                                         ("1970-01-02", "openai:gpt-4o", 1, 100, 110),
                                         ("1970-01-04", "offline:x", 1, 100, 0)]  # fmt: skip
    assert [tuple(r) for r in turns] == [("t1", 0.0, 110), ("t2", 0.0, 110), ("t3", 0.0, 0)]
