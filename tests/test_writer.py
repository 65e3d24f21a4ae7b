"""The writer thread (engine/store/writer.py): group commit, a savepoint per write, urgent
writes first, a bounded queue, cancelled awaiters' writes still committed.

Each test holds the store's write lock (which the writer takes for every batch) while it
queues writes, so what goes into one batch does not depend on timing: the writer takes at
most one batch, then waits for the lock, and everything queued meanwhile is the next batch.
"""

from __future__ import annotations

import operator
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path

import anyio
import pytest

from engine.store import Store, StoreError
from engine.store.sqlite import SqliteStore
from tests.helpers import on
from tests.wait import until

RUN = "turns.run_started"  # (id, kind, pid, started_at): a statement either store has


def run(name: str) -> tuple[str, tuple[str, str]]:
    return (RUN, (name, "run", 1, 1.0))


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The room's store on each backend (PostgreSQL: engine/store/pg, a fresh database)."""
    if request.param == "sqlite":
        s = await SqliteStore.open(tmp_path / "execution.db")
    else:
        from engine.store.pg.store import PgStore

        s = await PgStore.open(request.getfixturevalue("pg_url"))
    try:
        yield s
    finally:
        if s._writer.is_alive():  # not closed by the test
            await s.close()


async def order(store: Store) -> list[str]:
    """Runs in the order they were inserted (PostgreSQL: a new table's heap order)."""
    key = "rowid" if type(store) is SqliteStore else "ctid"
    return [r[0] for r in await on(store).fetchall(f"SELECT id FROM runs ORDER BY {key}")]


@pytest.mark.anyio
async def test_waiting_writes_commit_in_one_transaction_and_a_bad_one_fails_alone(
    store: Store,
) -> None:
    before = store.statistics()
    errors: list[BaseException] = []

    async def write(ops: list) -> None:
        try:
            await store.write(ops)
        except StoreError as exc:
            errors.append(exc)

    store._write_lock.acquire()
    try:
        async with anyio.create_task_group() as tg:
            for i in range(10):
                tg.start_soon(write, [run(f"r{i}")])
            tg.start_soon(write, [run("bad"), ("INSERT INTO nowhere VALUES (1)", ())])
            await until(lambda: store.statistics().queued_ops, "all 12 writes queued",
                        ok=lambda n: n == 12)  # fmt: skip
            store._write_lock.release()
    finally:
        if store._write_lock.locked():
            store._write_lock.release()
    after = store.statistics()
    assert after.writes - before.writes == 11
    assert after.transactions - before.transactions <= 2  # one taken first, the rest at once
    if type(store) is SqliteStore:
        assert [str(e) for e in errors] == ["write to execution.db failed: no such table: nowhere"]
    else:
        assert len(errors) == 1 and 'relation "nowhere" does not exist' in str(errors[0])
    assert sorted(await order(store)) == sorted(f"r{i}" for i in range(10))  # not `bad`


@pytest.mark.anyio
async def test_urgent_writes_go_first_in_the_next_batch(store: Store) -> None:
    store._write_lock.acquire()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.write, [run("blocker")])
            await until(lambda: (store.statistics().queued_ops, len(store._writer._normal)),
                        "the blocker taken into a batch", ok=lambda s: s == (1, 0))  # fmt: skip
            for queued, name in enumerate(("step-a", "step-b"), start=1):
                tg.start_soon(store.write, [run(name)])
                await until(lambda: len(store._writer._normal), f"{name} queued",
                            ok=partial(operator.eq, queued))  # fmt: skip
            tg.start_soon(partial(store.write, [run("decision")], urgent=True))
            await until(lambda: store._writer._urgent, "the urgent write queued")
            store._write_lock.release()
    finally:
        if store._write_lock.locked():
            store._write_lock.release()
    assert await order(store) == ["blocker", "decision", "step-a", "step-b"]


@pytest.mark.anyio
async def test_a_full_queue_makes_producers_wait_in_order(store: Store) -> None:
    store._writer.max_ops = 4
    store._write_lock.acquire()
    peak = 0
    try:
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(store.write, [run(f"r{i:02d}")])
                await anyio.sleep(0)  # started in this order
            await until(lambda: store.statistics().producers_waiting, "16 producers waiting",
                        ok=lambda n: n == 16)  # fmt: skip
            peak = store.statistics().queued_ops
            tg.start_soon(partial(store.write, [run("urgent")], urgent=True))  # no wait
            await until(lambda: store.statistics().queued_ops, "the urgent write queued",
                        ok=lambda n: n == peak + 1)  # fmt: skip
            store._write_lock.release()
    finally:
        if store._write_lock.locked():
            store._write_lock.release()
    assert peak == 4
    names = await order(store)
    assert [n for n in names if n != "urgent"] == [f"r{i:02d}" for i in range(20)]
    assert store.statistics().queued_ops == 0


@pytest.mark.anyio
async def test_a_write_whose_awaiter_is_cancelled_still_commits(store: Store) -> None:
    store._write_lock.acquire()
    try:
        with anyio.move_on_after(0.05) as scope:
            await store.write([run("cancelled")])
        assert scope.cancelled_caught
    finally:
        store._write_lock.release()
    await store.write([run("after")])
    assert await order(store) == ["cancelled", "after"]


@pytest.mark.anyio
async def test_a_write_cancelled_while_it_waits_for_room_is_queued_all_the_same(
    store: Store,
) -> None:
    """Once `write` is called, a cancel never drops the write (the loop's checkpoints need
    no shielded scope): one waiting for room in a full queue goes in past the bound."""
    store._writer.max_ops = 1
    done: list[str] = []
    store._write_lock.acquire()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.write, [run("first")])
            await until(lambda: store.statistics().queued_ops, "the first write queued",
                        ok=lambda n: n == 1)  # fmt: skip
            tg.start_soon(partial(store.write, [run("waited")], then=lambda: done.append("w")))
            await until(lambda: store.statistics().producers_waiting, "one producer waiting",
                        ok=lambda n: n == 1)  # fmt: skip
            scope = anyio.CancelScope()

            async def cancelled() -> None:
                with scope:
                    await store.write([run("cancelled")], then=lambda: done.append("c"))

            tg.start_soon(cancelled)
            await until(lambda: store.statistics().producers_waiting, "two producers waiting",
                        ok=lambda n: n == 2)  # fmt: skip
            scope.cancel()
            await until(lambda: store.statistics().producers_waiting,
                        "the cancelled producer's write queued", ok=lambda n: n == 1)  # fmt: skip
            store._write_lock.release()
    finally:
        if store._write_lock.locked():
            store._write_lock.release()
    assert sorted(await order(store)) == ["cancelled", "first", "waited"]
    assert sorted(done) == ["c", "w"]  # `then` ran for the cancelled one too


@pytest.mark.anyio
async def test_then_runs_after_the_commit_even_if_the_awaiter_is_gone_and_not_on_failure(
    store: Store,
) -> None:
    seen: list[tuple[str, list[str]]] = []

    def then(name: str) -> Callable[[], None]:
        return lambda: seen.append((name, []))

    store._write_lock.acquire()
    try:
        with anyio.move_on_after(0.05):
            await store.write([run("a")], then=then("a"))
        assert seen == []  # not before the COMMIT
    finally:
        store._write_lock.release()
    with pytest.raises(StoreError):
        await store.write([run("a")], then=then("dup"))  # the same id: it fails
    await until(lambda: seen, "`then` of the committed write ran")
    assert [name for name, _ in seen] == ["a"]
    assert await order(store) == ["a"]


@pytest.mark.anyio
async def test_a_batch_holds_at_most_max_batch_ops_statements_of_step_checkpoints(
    store: Store,
) -> None:
    store._writer.max_batch_ops = 2
    before = store.statistics()
    store._write_lock.acquire()
    try:
        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(store.write, [run(f"r{i}")])
            await until(lambda: store.statistics().queued_ops, "all 6 writes queued",
                        ok=lambda n: n == 6)  # fmt: skip
            store._write_lock.release()
    finally:
        if store._write_lock.locked():
            store._write_lock.release()
    after = store.statistics()
    assert after.writes - before.writes == 6
    assert after.transactions - before.transactions >= 3  # an urgent write waits for less


@pytest.mark.anyio
async def test_a_write_after_close_is_a_store_error(store: Store) -> None:
    s = store
    await s.close()
    with pytest.raises(StoreError, match="the writer is closed"):
        await s.write([run("late")])
