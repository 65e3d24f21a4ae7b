"""Issue 16: the marks tool calls give their turns (tool:<name>, is:failed, is:denied) and
their full-text indexing are the once-a-second batch's work, not the step's; history stays
exact for what is committed before the batch runs, and a room made before (with the
triggers on tool_calls) is taken over by the batch when it opens."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import engine.runtime.lifetime
from engine.api.history import Filters, History
from engine.config import Config
from engine.domain.decisions import Decision
from engine.room import Room
from engine.runtime import Runtime
from engine.store import migrations
from tests.helpers import as_version
from tests.history_seed import (
    STATUS_TRUTH,
    add,
    boom,
    fts_rows,
    fts_unsound,
    marks_unsound,
    msg,
    script,
    shell,
    truth,
    turn_ids,
)
from tests.scripted import ScriptedModel

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def no_timed_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch runs only when a test says (and when a room opens and closes)."""
    monkeypatch.setattr(engine.runtime.lifetime, "INDEX_EVERY", 3600.0)


def open_rt(room: Room) -> Runtime:
    return Runtime.open(room, kind="test", provider=ScriptedModel(script),
                        tools=[add, shell, boom], config=Config())  # fmt: skip


async def some_turns(rt: Runtime, n: int = 0) -> str:
    """An added call, a failed one, a denied one, an approved one and one left waiting
    (threads a<n> ... d<n>); returns the waiting call's id."""
    await rt.run_turn(msg(f"a{n}", "add two and three"))
    await rt.run_turn(msg(f"b{n}", "boom now", "task"))
    out = await rt.run_turn(msg(f"a{n}", "shell rm -rf /"))
    await rt.decide(Decision.cancel(out.pending[0]["call_id"], "no", decided_by="bob"))
    await rt.wait_turn(out.turn_id)
    out = await rt.run_turn(msg(f"c{n}", "shell ls"))
    await rt.decide(Decision.approve(out.pending[0]["call_id"], decided_by="alice"))
    await rt.wait_turn(out.turn_id)
    out = await rt.run_turn(msg(f"d{n}", "shell reboot", "chore"))
    return str(out.pending[0]["call_id"])


async def assert_exact(room: Room) -> None:
    """Every call-given filter, alone and combined, and every total, as the rows say."""
    db = room.db
    tools = {name for (name,) in truth(db, "SELECT DISTINCT tool FROM tool_calls")}
    async with History(room) as h:
        for status, where in STATUS_TRUTH.items():
            want = turn_ids(db, where)
            got = [t["turn_id"] for t in (await h.turns(Filters(status=status))).items]
            assert got == want, status
            assert await h.count(Filters(status=status)) == len(want), status
        for tool in tools:
            has = "EXISTS (SELECT 1 FROM tool_calls c WHERE c.turn_id = t.id AND c.tool = ?)"
            got = [t["turn_id"] for t in (await h.turns(Filters(tool=tool))).items]
            assert got == turn_ids(db, has, tool), tool
            both = Filters(tool=tool, status="failed")
            got = [t["turn_id"] for t in (await h.turns(both)).items]
            assert got == turn_ids(db, f"{has} AND ({STATUS_TRUTH['failed']})", tool), tool
            first = await h.turns(Filters(tool=tool), limit=1)  # paging across pending rows
            if first.next:
                rest = await h.turns(Filters(tool=tool), after=first.next)
                ids = [t["turn_id"] for t in first.items + rest.items]
                assert ids == turn_ids(db, has, tool), tool
        counts = await h.counts()
        per_tool = Counter(name for name, _ in
                           truth(db, "SELECT DISTINCT tool, turn_id FROM tool_calls"))  # fmt: skip
        assert counts["tools"] == dict(per_tool)
        assert counts["status"] == {s: len(turn_ids(db, w)) for s, w in STATUS_TRUTH.items()}


async def test_a_step_writes_no_marks_and_history_counts_what_is_committed(tmp_path: Path):
    room = Room.at(tmp_path / "room")
    async with open_rt(room) as rt:
        await some_turns(rt)
        # the steps wrote their calls and nothing else: no marks, no queue (issue 16)
        assert truth(room.db, "SELECT count(*) FROM turn_marks WHERE mark LIKE 'tool:%'"
                              " OR mark = 'is:denied'") == [(0,)]  # fmt: skip
        assert truth(room.db, "SELECT count(*) FROM fts_queue") == [(0,)]
        await assert_exact(room)  # before the batch
        await rt.store.index()
        assert truth(room.db, "SELECT count(*) FROM turn_marks WHERE mark LIKE 'tool:%'") != [(0,)]
        await assert_exact(room)  # after it
        await some_turns(rt, 1)  # a second round: some marks already there, some pending
        await assert_exact(room)
    await assert_exact(room)
    assert fts_unsound(room.db) == []
    assert marks_unsound(room.db) == []


async def test_the_batch_indexes_a_suspended_call_and_its_change(tmp_path: Path):
    """A suspended call is indexed with its arguments; approved with other ones, the batch
    takes the old text out and puts the new in (its copy in open_calls)."""
    room = Room.at(tmp_path / "room")
    async with open_rt(room) as rt:
        call = await some_turns(rt)
        await rt.store.index()
        async with History(room) as h:
            hits = (await h.search("reboot")).items
            assert [x["call_id"] for x in hits if x["kind"] == "call"] == [call]
            await rt.decide(Decision.approve(call, args={"command": "echo kumquat"},
                                             decided_by="op"))  # fmt: skip
            await rt.wait_turn(truth(room.db, "SELECT turn_id FROM tool_calls WHERE id=?",
                                     call)[0][0])  # fmt: skip
            await rt.store.index()
            assert [x["kind"] for x in (await h.search("reboot")).items] == ["message"]
            assert call in [x["call_id"] for x in (await h.search("kumquat")).items]
        assert truth(room.db, "SELECT count(*) FROM open_calls") == [(0,)]
    assert fts_unsound(room.db) == []


async def test_a_room_made_with_the_step_triggers_is_taken_over_by_the_batch(tmp_path: Path):
    """A version-3 room (marks written by triggers on tool_calls, no open_calls): opened,
    the triggers are gone, the batch starts at its last call with its open calls, and a
    waiting call that is then approved is marked and indexed as if nothing happened."""
    room = Room.at(tmp_path / "room")
    async with open_rt(room) as rt:
        call = await some_turns(rt)
    conn = sqlite3.connect(room.db, isolation_level=None)
    try:  # as issue 15's agentdeck left it (the triggers' bodies do not matter here)
        as_version(conn, 3)
        conn.execute("DROP TABLE open_calls")
        conn.execute("DELETE FROM counters WHERE name = 'marks:calls'")
        for name in ("hist_calls_tool", "hist_calls_fts_queue"):
            conn.execute(f"CREATE TRIGGER {name} AFTER INSERT ON tool_calls BEGIN SELECT 1; END")
    finally:
        conn.close()
    async with open_rt(room) as rt:
        triggers = {n for (n,) in truth(room.db, "SELECT name FROM sqlite_master"
                                                 " WHERE type = 'trigger' AND tbl_name = 'tool_calls'")}  # fmt: skip
        assert triggers == {"hist_calls_edited", "hist_calls_deleted"}
        assert truth(room.db, "SELECT user_version FROM pragma_user_version") == [
            (migrations.VERSION,)
        ]
        rowid = truth(room.db, "SELECT rowid FROM tool_calls WHERE id = ?", call)[0][0]
        assert truth(room.db, "SELECT rowid, indexed FROM open_calls") == [(rowid, 1)]
        assert truth(room.db, "SELECT value FROM counters WHERE name = 'marks:calls'") == [
            (truth(room.db, "SELECT max(rowid) FROM tool_calls")[0][0],)
        ]
        await rt.decide(Decision.cancel(call, "not today", decided_by="op"))
        await rt.wait_turn(truth(room.db, "SELECT turn_id FROM tool_calls WHERE id=?", call)[0][0])
        await assert_exact(room)  # the denial is pending
        await rt.run_turn(msg("e", "shell uptime"))
        await assert_exact(room)
    await assert_exact(room)
    assert fts_unsound(room.db) == []
    assert marks_unsound(room.db) == []
    assert rowid in fts_rows(room.db, "calls_fts")
