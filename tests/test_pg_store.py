"""The store on PostgreSQL (engine/store/pg): migrations under an advisory lock, rows by
position and name, the writer's guarantees (also tests/test_writer.py, on both backends),
the store's URL and its password, and a runtime whose turns run on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psycopg
import pytest

from engine.config import StoreConfig
from engine.domain.decisions import Decision
from engine.providers.offline import OfflineModel
from engine.store import StoreError
from engine.store.pg.migrations import VERSION, migrate
from engine.store.pg.store import PgStore, display_url, scrub
from engine.store.select import ENV, open_store, store_url
from tests.helpers import msg, on, rows, runtime
from tests.scripted import first_then
from tests.wait import until

pytestmark = pytest.mark.anyio
RUN = "INSERT INTO runs (id, kind, pid, started_at, status) VALUES (%s, %s, 1, 1.0, 'active')"


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PgStore]:
    s = await PgStore.open(pg_url)
    try:
        yield s
    finally:
        await s.close()


async def test_runtimes_opening_a_fresh_database_at_once_migrate_it_once_and_one_owns_it(
    pg_url: str,
) -> None:
    """Three at once: the schema is applied once, one store owns the database and the
    others are refused, naming the holder (two runtimes on one database would both run
    its queued turns). The owner's session ending, by a close or a kill, frees it."""
    opened: list[PgStore] = []
    refused: list[str] = []

    async def open_one() -> None:
        try:
            opened.append(await PgStore.open(pg_url))
        except StoreError as exc:
            refused.append(str(exc))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(open_one)
    assert len(opened) == 1 and len(refused) == 2
    assert all("in use by another agentdeck runtime (agentdeck-writer " in r for r in refused)
    assert await opened[0].integrity_check() == "ok"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM agentdeck_schema").fetchall() == [(VERSION,)]
        assert migrate(conn) == 0  # current: nothing applied
        # the owner's backend killed (its host gone, kill -9): the lock goes with it
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                     " WHERE application_name LIKE 'agentdeck-writer %'")  # fmt: skip

    async def reopen() -> PgStore | str:
        try:
            return await PgStore.open(pg_url)
        except StoreError as exc:
            return str(exc)

    second = await until(reopen, "the killed owner's lock goes with its backend",
                         ok=lambda got: isinstance(got, PgStore))  # fmt: skip
    assert isinstance(second, PgStore)
    await second.close()
    with pytest.raises(StoreError):  # the first's writer lost its connection: it says so
        await opened[0].write([("SELECT 1", ())])
    with pytest.raises(StoreError):
        await opened[0].close()  # (its last batch fails; the store is shut all the same)


async def test_a_database_newer_than_this_agentdeck_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        migrate(conn)
        conn.execute("INSERT INTO agentdeck_schema(version) VALUES (%s)", (VERSION + 1,))
    with pytest.raises(StoreError, match="upgrade agentdeck"):
        await PgStore.open(pg_url)


async def test_rows_index_by_position_and_name(store: PgStore) -> None:
    await store.write([(RUN, ("r1", "run"))])
    row = await on(store).fetchone("SELECT * FROM runs WHERE id = ?", ("r1",))
    assert row is not None
    assert (row[0], row["id"], row["pid"], row["started_at"]) == ("r1", "r1", 1, 1.0)
    assert dict(row)["status"] == "active" and row.keys()[:2] == ["id", "kind"]
    status, n = (await on(store).fetchall("SELECT status, count(*) FROM runs GROUP BY status"))[0]
    assert (status, n) == ("active", 1)
    assert await on(store).scalar("SELECT count(*) FROM runs WHERE id = ?", ("none",)) == 0
    with pytest.raises(IndexError):
        row["nope"]


async def test_a_bad_read_is_a_store_error_and_the_readers_go_on(store: PgStore) -> None:
    with pytest.raises(StoreError, match="nowhere"):
        await on(store).fetchall("SELECT * FROM nowhere")
    for _ in range(10):  # more reads than readers: none was lost to the error
        assert await on(store).scalar("SELECT 1") == 1


async def test_the_named_statements_are_postgresqls_own(store: PgStore) -> None:
    """Issue 28: statements come by name, each database's own (an upsert, a JSON key set),
    where they were SQLite's rewritten by regular expressions; bools go as integers."""
    from engine.store import turns

    await store.write([(RUN, ("r1", "run"))])
    await store.write([("rules.used", ("c1", "db:1", "allow", 1.0))])
    await store.write([("rules.used", ("c1", "db:2", "ask", 2.0))])  # the same call: replaced
    row = await on(store).fetchone("SELECT rule, effect FROM rule_calls")
    assert tuple(row) == ("db:2", "ask")
    await store.write([
        ("INSERT INTO threads(id, group_name, created_at, updated_at) VALUES (%s,%s,%s,%s)",
         ("t1", "default", 1.0, 1.0)),
        ("INSERT INTO turns(id, thread_id, run_id, origin, sender, text, status, created_at,"
         " updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
         ("u1", "t1", "r1", "invoke", "s", "x", "running", 1.0, 1.0)),
        ("INSERT INTO tool_calls(id, model_call_id, turn_id, thread_id, step_id, idx, tool,"
         " args, status, has_message, created_at, updated_at)"
         " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
         ("c1", "m1", "u1", "t1", 1, 0, "shell", "{}", "new", True, 1.0, 1.0)),
        turns.call_meta_set("c1", "review", {"why": "crash"}),
    ])  # fmt: skip
    row = await on(store).fetchone("SELECT meta, has_message FROM tool_calls WHERE id = 'c1'")
    assert json.loads(row["meta"]) == {"review": {"why": "crash"}} and row["has_message"] == 1
    marks = {r[0] for r in await on(store).fetchall("SELECT mark FROM turn_marks")}
    assert marks >= {"status:running", "thread:t1", "group:default", "run:r1"}
    await store.index()  # the batch: the call's tool mark
    assert await on(store).scalar("SELECT value FROM counters WHERE name = 'tool:shell'") == 1


def test_a_password_in_agentdeck_toml_is_refused_and_the_environment_wins() -> None:
    with pytest.raises(StoreError, match="AGENTDECK_STORE_URL") as caught:
        store_url(StoreConfig(url="postgresql://me:s3cret@db/room"), env={})
    assert "s3cret" not in str(caught.value) and "\n" not in str(caught.value)
    url = "postgresql://me:s3cret@db/room"
    assert store_url(StoreConfig(), env={ENV: url}) == url
    assert store_url(StoreConfig(url="postgresql:///room?service=agents"), env={}) is not None
    assert store_url(StoreConfig(), env={}) is None
    with pytest.raises(StoreError, match="postgresql://"):
        store_url(StoreConfig(url="mysql://db/room"), env={})


async def test_the_password_never_reaches_error_text(pg_url: str) -> None:
    secret = "s3cret-pw"
    bad = pg_url.replace("postgresql:///", f"postgresql://nobody:{secret}@/") + "&port=1"
    assert secret not in display_url(bad)
    assert scrub(f"failed for {secret}", bad) == "failed for ***"
    with pytest.raises(StoreError) as caught:
        await open_store(Path("unused"), StoreConfig(), env={ENV: bad})
    assert secret not in str(caught.value)


async def test_a_turn_runs_on_postgresql(tmp_path: Path, pg_url: str, monkeypatch) -> None:
    monkeypatch.setenv(ENV, pg_url)
    async with runtime(tmp_path, OfflineModel(), tools=[]) as rt:
        assert isinstance(rt.store, PgStore)
        out = await rt.run_turn(msg("hello"))
        assert out.status == "done" and out.text
    assert not (tmp_path / "room" / "execution.db").exists()  # nothing went to SQLite
    async with runtime(tmp_path, OfflineModel(), tools=[], first_id=100) as rt:
        assert await rows(rt, "SELECT status FROM turns") == [("done",)]


async def test_a_shell_call_waits_for_its_decision_on_postgresql(
    tmp_path: Path, pg_url: str, monkeypatch
) -> None:
    monkeypatch.setenv(ENV, pg_url)
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})])) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        [pending] = out.pending
        await rt.decide(Decision.approve(pending["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert "shell: ran ls" in out.text
        kinds = [r[0] for r in await rows(rt, "SELECT kind FROM checkpoints ORDER BY id")]
        assert kinds[0] == "user_message" and kinds[-1] == "run_finished"
        statuses = await rows(rt, "SELECT status, decision_id IS NOT NULL FROM tool_calls")
        assert statuses == [("succeeded", True)]


async def test_a_waiting_turn_survives_a_restart_on_postgresql(
    tmp_path: Path, pg_url: str, monkeypatch
) -> None:
    monkeypatch.setenv(ENV, pg_url)
    script = first_then([("shell", {"command": "ls"})])
    async with runtime(tmp_path, script) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
    async with runtime(tmp_path, script, first_id=100) as rt:
        [(call_id,)] = await rows(rt, "SELECT id FROM tool_calls WHERE status = 'suspended'")
        await rt.decide(Decision.approve(call_id))
        out = await rt.wait_turn(out.turn_id)
        assert out.status == "done"


async def test_a_store_gives_its_database_back_before_its_connection_closes(pg_url: str) -> None:
    """The owner lock is freed before the writer's connection closes: a runtime opened right
    after another closed (the next CLI command on a free room) is never refused as 'in use'.
    A close alone frees it only once the server's backend has exited (found under load:
    `agentdeck rules add` right after another `rules` command on a free room exited 1)."""
    store = await PgStore.open(pg_url)
    conn = store._writer._pg
    real, held = conn.close, []

    def close() -> None:  # what another session sees at the moment the connection closes
        with psycopg.connect(pg_url, autocommit=True) as other:
            held.append(other.execute("SELECT count(*) FROM pg_locks WHERE locktype ="
                                      " 'advisory' AND granted").fetchone())  # fmt: skip
        real()

    conn.close = close  # type: ignore[method-assign]
    await store.close()
    assert held == [(0,)]


async def test_two_writers_that_deadlock_both_commit(pg_url: str) -> None:
    """Several workers' writers on one database update shared rows (the counters history's
    triggers keep) in the order their batches hold them: two can deadlock, and PostgreSQL
    rolls one back. That batch is run again whole, and commits: both writes land, once
    (found by the cluster soak: the victim's turn failed, and its worker stopped)."""
    one, two = await PgStore.open(pg_url, shared=True), await PgStore.open(pg_url, shared=True)
    try:
        await one.write([("INSERT INTO counters(name, value) VALUES ('x:a', 0), ('x:b', 0)", ())])

        def crossed(first: str, second: str) -> list:
            bump = "UPDATE counters SET value = value + 1 WHERE name = %s"
            return [(bump, (first,)), ("SELECT pg_sleep(0.3)", ()), (bump, (second,))]

        async with anyio.create_task_group() as tg:
            tg.start_soon(one.write, crossed("x:a", "x:b"))
            tg.start_soon(two.write, crossed("x:b", "x:a"))
        rows = await one.fetchall(
            "SELECT name, value FROM counters WHERE name LIKE 'x:%%' ORDER BY name"
        )
        assert [tuple(r) for r in rows] == [("x:a", 2), ("x:b", 2)]
    finally:
        await one.close()
        await two.close()


async def test_a_runtime_waits_a_moment_for_one_that_just_ended(pg_url: str) -> None:
    """The owner lock of a runtime that just ended (killed: its backend exits a moment
    after) is awaited a little before the database is said to be in use (under load the
    stale-decision test's restart after a kill was refused, 'a session that just ended')."""
    from engine.store.pg.locks import advisory_key

    holder = psycopg.connect(pg_url, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", (advisory_key("runtime"),))
    async with anyio.create_task_group() as tg:

        async def ends_soon() -> None:
            await anyio.sleep(0.5)  # the owner ends a moment after the open began (< OWNER_WAIT)
            holder.close()

        tg.start_soon(ends_soon)
        store = await PgStore.open(pg_url)
    await store.close()


async def test_a_version_3_database_gains_what_instructions_need(pg_url: str) -> None:
    """Issue 32 (a review's find): an upgraded database never runs schema.sql, so its step
    makes the instructions table too, and a turn told instructions can be recorded."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        migrate(conn)
        conn.execute("DROP TABLE instructions")
        conn.execute("ALTER TABLE turns DROP COLUMN instructions, DROP COLUMN model")
        conn.execute("ALTER TABLE threads DROP COLUMN instructions")
        conn.execute("DELETE FROM agentdeck_schema")
        conn.execute("INSERT INTO agentdeck_schema(version) VALUES (3)")
        assert migrate(conn) == VERSION - 3
        conn.execute("INSERT INTO instructions(hash, text, parts, created_at)"
                     " VALUES ('h', 'Be kind.', '[]', 1.0)")  # fmt: skip
        columns = {r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'turns'")}  # fmt: skip
    assert {"instructions", "model"} <= columns


async def test_a_version_4_database_gains_usage_filled_from_its_turns(pg_url: str) -> None:
    """Issue 33: the steps and turns gain their tokens' columns, and the usage table (made
    by the step, as schema.sql never runs on an upgraded database) holds what the turns
    spent, unpriced but for the offline model's."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        migrate(conn)
        conn.execute("DROP TABLE usage")
        conn.execute("DROP TABLE budgets")
        conn.execute("ALTER TABLE steps DROP COLUMN input_tokens, DROP COLUMN output_tokens,"
                     " DROP COLUMN cached_tokens, DROP COLUMN cost")  # fmt: skip
        conn.execute("ALTER TABLE turns DROP COLUMN cached_tokens, DROP COLUMN cost,"
                     " DROP COLUMN unpriced")  # fmt: skip
        conn.execute("INSERT INTO runs(id, kind, pid, started_at, status)"
                     " VALUES ('r', 'run', 1, 0, 'ended')")  # fmt: skip
        conn.execute("INSERT INTO threads(id, group_name, created_at, updated_at)"
                     " VALUES ('a', 'chat', 0, 0)")  # fmt: skip
        for turn, model, at in (("t1", "openai:gpt-4o", 86400.0), ("t2", "offline:x", 86401.0)):
            conn.execute("INSERT INTO turns(id, thread_id, run_id, origin, sender, text, status,"
                         " rounds, input_tokens, output_tokens, created_at, updated_at, model)"
                         " VALUES (%s, 'a', 'r', 'invoke', 's', 'x', 'done', 2, 100, 10, %s, %s,"
                         " %s)", (turn, at, at, model))  # fmt: skip
        conn.execute("DELETE FROM agentdeck_schema")
        conn.execute("INSERT INTO agentdeck_schema(version) VALUES (4)")
        assert migrate(conn) == VERSION - 4
        usage = conn.execute("SELECT day, group_name, thread_id, model, steps, input_tokens,"
                             " output_tokens, unpriced FROM usage ORDER BY model").fetchall()  # fmt: skip
        conn.execute("SELECT scope FROM budgets").fetchall()  # the table is there
    assert usage == [("1970-01-02", "chat", "a", "offline:x", 2, 100, 10, 0),
                     ("1970-01-02", "chat", "a", "openai:gpt-4o", 2, 100, 10, 110)]  # fmt: skip
