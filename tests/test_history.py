"""The history API on a room made by the real Runtime: filters, keyset paging, search, one
turn, where it suspended, export, counters; on SQLite and on PostgreSQL (`seeded` and
`backend` are parametrized over both)."""

from __future__ import annotations

import json
import sqlite3

import anyio
import pytest

from engine.api.history import Filters, History, HistoryError, UnknownTurn, parse_time
from engine.config import Config
from engine.domain.decisions import Decision
from engine.room import Room
from engine.runtime import Runtime
from tests.helpers import on
from tests.history_seed import (
    BACKENDS,
    BULK,
    QUOTED,
    STATUS_TRUTH,
    add,
    boom,
    database_for,
    fts_rows,
    fts_unsound,
    msg,
    on_store,
    script,
    seed,
    shell,
    store_url_of,
    truth,
    turn_ids,
)
from tests.scripted import ScriptedModel


@pytest.fixture(scope="module", params=BACKENDS)
def seeded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Room, dict[str, str]]:
    path = tmp_path_factory.mktemp("history") / "room"
    ids = anyio.run(seed, path, BULK, database_for(request))
    return Room.at(path), ids


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str | None:
    """The store of a test's own room: None (SQLite) or a new PostgreSQL database's URL."""
    return database_for(request)


def on_pg(room: Room) -> bool:
    return store_url_of(room.db) is not None


async def walk(h: History, filters: Filters | None = None, limit: int = 7) -> list[str]:
    """Every turn id of a filtered list, page by page."""
    seen, after = [], None
    while True:
        page = await h.turns(filters, after=after, limit=limit)
        seen += [t["turn_id"] for t in page.items]
        if page.next is None:
            return seen
        assert len(page.items) == limit
        after = page.next


@pytest.mark.anyio
@pytest.mark.parametrize("status", sorted(STATUS_TRUTH))
async def test_status_filters_match_the_database(seeded, status):
    room, ids = seeded
    async with History(room) as h:
        assert await walk(h, Filters(status=status)) == turn_ids(room.db, STATUS_TRUTH[status])
    named = {"failed": "failed", "denied": "denied", "cancelled": "cancelled", "waiting": "waiting"}
    if status in named:
        assert turn_ids(room.db, STATUS_TRUTH[status]) == [ids[named[status]]]


@pytest.mark.anyio
async def test_origin_group_thread_tool_and_time_filters(seeded):
    room, ids = seeded
    db = room.db
    async with History(room) as h:
        assert await walk(h, Filters(origin="invoke")) == turn_ids(db, "t.origin = 'invoke'")
        assert len(await walk(h, Filters(origin="invoke"))) == BULK
        assert await walk(h, Filters(group="chore")) == [ids["waiting"]]
        assert await walk(h, Filters(group="task")) == [ids["failed"]]
        assert await walk(h, Filters(thread="chat-a")) == [ids["denied"], ids["added"]]
        shell_turns = turn_ids(db, "EXISTS (SELECT 1 FROM tool_calls c WHERE c.turn_id = t.id"
                                   " AND c.tool = 'shell')")  # fmt: skip
        assert await walk(h, Filters(tool="shell")) == shell_turns
        assert len(shell_turns) == 4
        # combined filters: every one must hold
        assert await walk(h, Filters(tool="shell", group="chat", status="done")) == [
            ids["cancelled"], ids["approved"], ids["denied"]]  # fmt: skip
        assert await walk(h, Filters(tool="add", origin="chat")) == [ids["added"]]
        assert await walk(h, Filters(tool="nope")) == []
        # time range: since inclusive, until exclusive, on created_at
        [(since,)] = truth(db, "SELECT created_at FROM turns WHERE id = ?", ids["approved"])
        [(until,)] = truth(db, "SELECT created_at FROM turns WHERE id = ?", ids["quoted"])
        between = turn_ids(db, "t.created_at >= ? AND t.created_at < ?", since, until)
        assert await walk(h, Filters(since=since, until=until)) == between
        assert between[-1] == ids["approved"] and ids["quoted"] not in between
        assert await walk(h, Filters(since=since, until=until, tool="shell")) == [
            ids["cancelled"], ids["waiting"], ids["approved"]]  # fmt: skip


@pytest.mark.anyio
async def test_keyset_paging_has_no_duplicates_or_gaps(seeded):
    room, _ = seeded
    everything = turn_ids(room.db)
    async with History(room) as h:
        for limit in (1, 3, 7, 50):
            assert await walk(h, limit=limit) == everything
        assert await walk(h, Filters(origin="invoke"), limit=4) == turn_ids(
            room.db, "t.origin = 'invoke'")  # fmt: skip
        last = await h.turns(after=(await h.turns(limit=len(everything) - 1)).next)
        assert [t["turn_id"] for t in last.items] == everything[-1:] and last.next is None


@pytest.mark.anyio
async def test_paging_is_stable_while_turns_are_added(tmp_path, backend):
    room = Room.at(tmp_path / "room")
    async with Runtime.open(room, kind="test", provider=ScriptedModel(script),
                            tools=[add, shell, boom],
                            config=on_store(room.path, backend)) as rt:  # fmt: skip
        for i in range(12):
            await rt.run_turn(msg("old", f"add old {i}", "invoke"))
        before = turn_ids(room.db)
        async with History(room) as h:
            seen, after, n = [], None, 0
            while True:
                page = await h.turns(after=after, limit=5)
                seen += [t["turn_id"] for t in page.items]
                await rt.run_turn(msg(f"new-{n}", "add new", "invoke"))  # newer than any page
                n += 1
                if page.next is None:
                    break
                after = page.next
            assert seen == before
            assert (await h.turns(limit=1)).items[0]["thread_id"] == f"new-{n - 1}"


@pytest.mark.anyio
async def test_search_words_quotes_operators_and_paging(seeded):
    room, ids = seeded
    async with History(room) as h:
        hits = (await h.search("kaboom")).items
        assert {(x["kind"], x["turn_id"]) for x in hits} >= {("call", ids["failed"])}
        assert any("[kaboom]" in x["snippet"] for x in hits)
        # arguments as the call ran them (edited by the decision)
        hits = (await h.search("ls -la")).items
        assert any(x["kind"] == "call" and x["call_id"] and x["turn_id"] == ids["approved"]
                   for x in hits)  # fmt: skip
        # quotes, AND, parentheses, a leading minus, NEAR, a column-like word: plain text
        for q in (QUOTED, '"quoted" AND (weird', 'col:val "', "-stuff NEAR", "zebra*", "(("):
            if q == "((":
                with pytest.raises(HistoryError, match="nothing to search"):
                    await h.search(q)
                continue
            found = (await h.search(q)).items
            assert found and all(x["turn_id"] == ids["quoted"] for x in found), q
        assert (await h.search("AND OR NOT")).items == []
        if on_pg(room):  # raw: PostgreSQL's web search syntax, which nothing makes malformed
            assert (await h.search('"unbalanced', raw=True)).items == []
            assert (await h.search('zebrafish -nothing "does quoted"', raw=True)).items
            assert not (await h.search("zebrafish -quoted", raw=True)).items
        else:  # raw: FTS5's syntax
            with pytest.raises(HistoryError, match="bad search query"):
                await h.search('"unbalanced', raw=True)
            assert (await h.search("zebra*", raw=True)).items
        # filters apply to hits
        assert {x["turn_id"] for x in (await h.search("shell", Filters(group="chore"))).items} == {
            ids["waiting"]}  # fmt: skip
        # paging through every hit one at a time: the same hits, once each
        everything = (await h.search("add", limit=200)).items
        assert len(everything) > BULK
        seen, after = [], None
        while True:
            page = await h.search("add", after=after, limit=4)
            seen += page.items
            if page.next is None:
                break
            after = page.next
        key = lambda x: (x["kind"], x["message_id"], x["call_id"])
        assert [key(x) for x in seen] == [key(x) for x in everything]
        times = [x["created_at"] for x in seen]
        assert times == sorted(times, reverse=True)


@pytest.mark.anyio
async def test_turn_detail_shows_steps_calls_and_who_decided(seeded):
    room, ids = seeded
    async with History(room) as h:
        d = await h.turn(ids["approved"])
        assert d["turn"]["turn_id"] == ids["approved"] and d["turn"]["group"] == "chat"
        assert [s["kind"] for s in d["steps"]] == ["inference", "tool_round", "replay",
                                                    "inference"]  # fmt: skip
        assert [m["role"] for m in d["messages"]] == ["user", "assistant", "tool", "assistant"]
        [call] = d["calls"]
        assert (call["tool"], call["status"], call["result"]) == (
            "shell",
            "succeeded",
            "ran ls -la",
        )
        [dec] = d["decisions"]
        assert (dec["action"], dec["decided_by"], dec["args"], dec["status"]) == (
            "resume", "alice", {"command": "ls -la"}, "applied")  # fmt: skip
        assert dec["created_at"] <= dec["applied_at"] <= call["ended_at"]
        assert dec["then"] == {"status": "succeeded", "args": {"command": "ls -la"},
                               "result": "ran ls -la", "error": None,
                               "ended_at": call["ended_at"]}  # fmt: skip
        denied = await h.turn(ids["denied"])
        [dec] = denied["decisions"]
        assert (dec["action"], dec["decided_by"], dec["reason"]) == ("cancel", "bob", "not on prod")
        assert dec["then"]["status"] == "cancelled" and "not on prod" in dec["then"]["error"]
        with pytest.raises(UnknownTurn):
            await h.turn("t-nope")
        async with anyio.create_task_group() as tg:  # several at once share one connection
            for name in ids:
                tg.start_soon(h.turn, ids[name])


@pytest.mark.anyio
async def test_where_suspended(seeded):
    room, ids = seeded
    async with History(room) as h:
        w = await h.where_suspended(ids["waiting"])
        [call] = truth(
            room.db, "SELECT id, step_id FROM tool_calls WHERE turn_id = ?", ids["waiting"]
        )
        assert w["waiting"] is True and (w["call_id"], w["step_id"]) == call
        assert w["calls"][0]["reason"] == "shell needs approval" and w["calls"][0]["since"]
        step_kind = truth(room.db, "SELECT kind FROM steps WHERE id = ?", w["step_id"])
        assert step_kind == [("inference",)]
        was = await h.where_suspended(ids["approved"])
        assert was["waiting"] is False and was["calls"][0]["decision_id"]
        assert was["calls"][0]["status"] == "succeeded"
        assert await h.where_suspended(ids["added"]) is None


@pytest.mark.anyio
async def test_export_turn_writes_json(seeded, tmp_path):
    room, ids = seeded
    async with History(room) as h:
        path = await h.export_turn(ids["denied"], tmp_path / "out" / "t.json")
        doc = json.loads(path.read_text())
        assert doc["format"] == "agentdeck.turn/1"
        assert (
            doc["turn"]["turn_id"] == ids["denied"] and doc["decisions"][0]["decided_by"] == "bob"
        )
        detail = await h.turn(ids["denied"])
        assert {k: doc[k] for k in detail} == json.loads(json.dumps(detail))
        default = await h.export_turn(ids["added"])
        assert default == room.path / "exports" / f"turn-{ids['added']}.json" and default.exists()


@pytest.mark.anyio
async def test_counters_match_reality(seeded):
    room, _ = seeded
    db = room.db
    async with History(room) as h:
        c = await h.counts()
        for table, key in (("turns", "turns"), ("threads", "threads"), ("runs", "runs"),
                           ("steps", "steps"), ("tool_calls", "calls"),
                           ("messages", "messages"), ("decisions", "decisions")):  # fmt: skip
            assert c[key] == truth(db, f"SELECT count(*) FROM {table}")[0][0], key
        for status, where in STATUS_TRUTH.items():
            assert c["status"][status] == len(turn_ids(db, where)), status
            assert await h.count(Filters(status=status)) == c["status"][status]
        assert c["groups"] == dict(truth(db, "SELECT h.group_name, count(*) FROM turns t JOIN"
                                             " threads h ON h.id = t.thread_id GROUP BY 1"))  # fmt: skip
        assert c["origins"] == dict(truth(db, "SELECT origin, count(*) FROM turns GROUP BY 1"))
        assert c["tools"] == dict(truth(db, "SELECT tool, count(DISTINCT turn_id) FROM tool_calls"
                                            " GROUP BY 1"))  # fmt: skip
        waiting = truth(db, "SELECT count(*) FROM tool_calls WHERE status = 'suspended'")
        assert c["suspended_calls"] == waiting[0][0] == 1
        assert await h.count() == c["turns"]
        assert await h.count(Filters(tool="shell", group="chat")) is None


@pytest.mark.anyio
async def test_empty_and_missing_rooms(tmp_path, backend):
    nothing = Room.at(tmp_path / "nothing")
    on_store(nothing.path, backend)  # PostgreSQL: a database no runtime has opened yet
    async with History(nothing) as h:
        assert (await h.turns()).items == [] and (await h.search("x")).items == []
        assert (await h.counts())["turns"] == 0 and (await h.runs()).items == []
    room = Room.at(tmp_path / "empty")
    config = on_store(room.path, backend)
    async with Runtime.open(room, kind="test", provider=ScriptedModel(script), config=config):
        pass
    async with History(room) as h:
        assert (await h.turns(Filters(status="failed"))).items == []
        assert (await h.counts())["status"]["failed"] == 0
        assert [r["kind"] for r in (await h.runs()).items] == ["test"]


def test_bad_filters_say_what_is_wrong():
    with pytest.raises(HistoryError, match="unknown status 'nope'"):
        Filters(status="nope")
    with pytest.raises(HistoryError, match="bad time"):
        parse_time("last tuesday")
    with pytest.raises(HistoryError, match="empty"):
        Filters(since=10, until=5)
    assert parse_time("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_time("3d", now=1e6) == 1e6 - 3 * 86400
    assert parse_time("2025-01-31T00:00:00+00:00") == 1738281600.0


def test_fts_indexes_hold_exactly_the_rows_they_should(seeded):
    """After real writes (suspend, decide, replay, cancel): every settled or suspended call
    and every user or assistant text is indexed, nothing else, and the index is sound."""
    room, _ = seeded
    if on_pg(room):
        pytest.skip("FTS5's tables: PostgreSQL's full text is generated columns")
    assert fts_unsound(room.db) == []


@pytest.mark.anyio
async def test_a_cancelled_turn_read_leaves_the_connection_usable(seeded):
    import asyncio

    room, _ = seeded
    async with History(room) as h:
        [first] = (await h.turns(limit=1)).items
        for k in range(6):
            task = asyncio.create_task(h.turn(first["turn_id"]))
            for _ in range(k % 3):
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            assert (await h.turn(first["turn_id"]))["turn"]["turn_id"] == first["turn_id"]


@pytest.mark.anyio
async def test_a_cancelled_turn_read_leaves_no_read_transaction_behind(seeded, tmp_path):
    """A read of one turn cancelled at any point (the console cancels the read of a turn its
    cursor has left) leaves the read-only connection in no transaction: the next read of any
    kind sees what the room's writer committed since, not the snapshot the cancelled read
    began, and the writer can still checkpoint the whole WAL (an open reader pins it)."""
    import asyncio
    import contextlib
    import shutil

    if on_pg(seeded[0]):
        pytest.skip("SQLite's WAL; on PostgreSQL: tests/test_history_pg.py")
    shutil.copytree(seeded[0].path, tmp_path / "room")
    room = Room.at(tmp_path / "room")
    writer = sqlite3.connect(room.db)
    try:
        async with History(room) as h:
            [first] = (await h.turns(limit=1)).items
            for k in range(8):
                task = asyncio.create_task(h.turn(first["turn_id"]))
                for _ in range(k):
                    await asyncio.sleep(0)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                with writer:
                    writer.execute("UPDATE turns SET final_text = ? WHERE id = ?",
                                   (f"answer {k}", first["turn_id"]))  # fmt: skip
                # (a read the cancel could not stop is done once this one is: one thread)
                [now] = (await h.turns(limit=1)).items
                assert now["answer"] == f"answer {k}", k
                busy, _, _ = writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                assert busy == 0, k
    finally:
        writer.close()


@pytest.mark.anyio
async def test_search_is_indexed_in_batches_not_in_the_steps_transaction(tmp_path):
    """A turn's text reaches the full-text index with the next batch (about a second, or
    store.index()), not inside its checkpoints; a call that changes after it was indexed
    (suspended, then approved) leaves the index with its old text and enters with its new."""
    room = Room.at(tmp_path / "room")
    async with Runtime.open(room, kind="test", provider=ScriptedModel(script),
                            tools=[add, shell, boom], config=Config()) as rt:  # fmt: skip
        await rt.store.index()
        out = await rt.run_turn(msg("a", "shell echo marmalade"))
        async with History(room) as h:
            assert (await h.search("marmalade")).items == []  # not in this batch yet
            await rt.store.index()
            hits = (await h.search("marmalade")).items
            assert {x["kind"] for x in hits} == {"message", "call"}  # the user text, the call
            [call] = out.pending
            await rt.decide(Decision(call_id=call["call_id"], action="resume",
                                     args={"command": "echo quince"}, decided_by="op"))  # fmt: skip
            await rt.wait_turn(out.turn_id)
            await rt.store.index()
            assert [x["kind"] for x in (await h.search("marmalade")).items] == ["message"]
            assert "call" in {x["kind"] for x in (await h.search("quince")).items}
        rowid = await on(rt.store).scalar(
            "SELECT rowid FROM tool_calls WHERE id=?", (call["call_id"],)
        )
        assert rowid in fts_rows(room.db, "calls_fts")
        assert await on(rt.store).scalar("SELECT count(*) FROM fts_queue") == 0
        assert await on(rt.store).scalar("SELECT count(*) FROM fts_unindex") == 0


@pytest.mark.anyio
async def test_a_run_that_stops_unindexed_is_indexed_when_the_room_opens(tmp_path):
    room = Room.at(tmp_path / "room")
    async with Runtime.open(room, kind="test", provider=ScriptedModel(script),
                            tools=[add, shell, boom], config=Config()) as rt:  # fmt: skip
        await rt.run_turn(msg("a", "add apricot", "invoke"))
    conn = sqlite3.connect(room.db)  # as a killed run leaves it: the batch never ran
    with conn:
        conn.execute("INSERT INTO calls_fts(calls_fts) VALUES ('delete-all')")
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')")
        conn.execute("UPDATE counters SET value = 0 WHERE name = 'fts:messages'")
        conn.execute("INSERT OR IGNORE INTO fts_queue(rowid) SELECT rowid FROM tool_calls")
    conn.close()
    async with Runtime.open(room, kind="test", provider=ScriptedModel(script),
                            tools=[add, shell, boom], config=Config()):  # fmt: skip
        async with History(room) as h:
            assert {x["kind"] for x in (await h.search("apricot")).items} == {"message"}
            assert "call" in {x["kind"] for x in (await h.search("5")).items}  # add: 5
