"""The writer's plan (engine/store/plan.py): rows of one SQL in one statement, and what it
never reorders; a keyed batch still fails one write alone (issue 16)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from engine.store import Store, StoreError
from engine.store.plan import plan
from engine.store.sqlite import SqliteStore
from tests.helpers import on
from tests.wait import until

MSG = "INSERT INTO messages(turn_id, text) VALUES (?, ?)"
EV1 = "INSERT INTO events(kind) VALUES (?)"
EV2 = "INSERT INTO events(kind) VALUES (?), (?)"
UPD = "UPDATE turns SET status=? WHERE id=?"
CALL_NEW = "INSERT INTO tool_calls(id) VALUES (?)"
CALL_SET = "UPDATE tool_calls SET status=? WHERE id=?"


def step(turn: str, call: str) -> list:
    return [(MSG, (turn, "x")), (call, (turn,)), (UPD, ("running", turn)), (EV1, (turn,))]


def test_writes_with_different_keys_share_one_statement_per_sql() -> None:
    groups = plan([(t, step(t, CALL_NEW if t in "ac" else CALL_SET)) for t in "abcd"])
    # b's UPDATE of its call has no group yet: it starts one, and b's later statements
    # follow it (into new groups, which c and d then join)
    assert [(sql, len(rows)) for sql, rows in groups] == [
        (MSG, 4), (CALL_NEW, 2), (UPD, 1), (EV1, 1), (CALL_SET, 2), (UPD, 3), (EV1, 3),
    ]  # fmt: skip
    # rows of one SQL keep the queue's order
    assert [r[0] for r in groups[0][1]] == ["a", "b", "c", "d"]


def test_a_key_seen_twice_or_no_key_is_a_barrier() -> None:
    same = plan([("a", step("a", CALL_NEW)), ("a", step("a", CALL_SET))])
    assert [sql for sql, _ in same] == [MSG, CALL_NEW, UPD, EV1, MSG, CALL_SET, UPD, EV1]
    none = plan(
        [("a", step("a", CALL_NEW)), (None, [(UPD, ("x", "a"))]), ("b", step("b", CALL_NEW))]
    )
    assert [len(rows) for _, rows in none] == [1, 1, 1, 1, 1, 1, 1, 1, 1]


def test_inserts_into_one_table_keep_their_order_whatever_their_sql() -> None:
    groups = plan([("a", [(EV2, (1, 2))]), ("b", [(EV1, (3,))]), ("c", [(EV2, (4, 5))])])
    assert [(sql, rows) for sql, rows in groups] == [
        (EV2, [(1, 2)]),
        (EV1, [(3,)]),
        (EV2, [(4, 5)]),
    ]


def test_one_writes_statements_keep_their_order() -> None:
    groups = plan(
        [("a", [(UPD, (1, "a")), (MSG, ("a", "x"))]), ("b", [(MSG, ("b", "x")), (UPD, (2, "b"))])]
    )
    # b's UPDATE may not join a's (it would run before b's INSERT): a new statement
    assert [(sql, len(rows)) for sql, rows in groups] == [(UPD, 1), (MSG, 2), (UPD, 1)]


def test_statements_that_are_not_dml_are_never_grouped() -> None:
    groups = plan([("a", [("PRAGMA optimize", ())]), ("b", [("PRAGMA optimize", ())])])
    assert [len(rows) for _, rows in groups] == [1, 1]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = await SqliteStore.open(tmp_path / "execution.db")
    await s.write([("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)", ())])
    yield s
    await s.close()


@pytest.mark.anyio
async def test_a_keyed_batch_with_a_bad_write_commits_the_others(store: Store) -> None:
    errors: list[str] = []

    async def write(key: str, v: int | None) -> None:
        try:
            await store.write([("INSERT INTO t(k, v) VALUES (?, ?)", (key, v))], key=key)
        except StoreError as exc:
            errors.append(str(exc))

    before = store.statistics()
    store._write_lock.acquire()
    try:
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(write, f"k{i}", None if i == 3 else i)
            await until(lambda: store.statistics().queued_ops, "all 6 writes queued",
                        ok=lambda n: n >= 6)  # fmt: skip
            store._write_lock.release()
    finally:
        if store._write_lock.locked():
            store._write_lock.release()
    assert store.statistics().transactions - before.transactions <= 2
    assert errors == ["write to execution.db failed: NOT NULL constraint failed: t.v"]
    rows = await on(store).fetchall("SELECT k FROM t ORDER BY rowid")
    assert [r[0] for r in rows] == ["k0", "k1", "k2", "k4", "k5"]
