"""`agentdeck history` flags and JSON; the query plans behind the history lists; browsing
history while a second process owns the room and writes to it; an old room's upgrade.
The seeded room and the second process's room are on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiosqlite
import anyio
import pytest

import engine.store.history as history_store
from engine.api.history import Filters, History, connect_readonly
from engine.cli import main
from engine.room import Room
from tests.history_seed import (
    BACKENDS,
    STATUS_TRUTH,
    database_for,
    on_store,
    seed,
    store_url_of,
    turn_ids,
)
from tests.wait import PATIENCE, until

ROOT = Path(__file__).resolve().parents[1]
OLD_KEYS = {"turn_id", "thread_id", "origin", "status", "reason", "text", "answer",
            "created_at", "ended_at", "calls"}  # fmt: skip


@pytest.fixture(scope="module", params=BACKENDS)
def seeded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Room, dict[str, str]]:
    path = tmp_path_factory.mktemp("history-cli") / "room"
    ids = anyio.run(seed, path, 23, database_for(request))
    return Room.at(path), ids


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str | None:
    """The store of a test's own room: None (SQLite) or a new PostgreSQL database's URL."""
    return database_for(request)


def run(capsys: pytest.CaptureFixture[str], room: Room, *args: str) -> tuple[int, str, str]:
    code = main(["--room", str(room.path), "history", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_keeps_the_old_keys_and_pages_by_cursor(seeded, capsys):
    room, _ = seeded
    code, out, _ = run(capsys, room, "--json", "--limit", "4")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 4 and OLD_KEYS <= set(rows[0])
    assert {"group", "run_id", "steps", "cursor"} <= set(rows[0])
    seen = [r["turn_id"] for r in rows]
    while True:
        code, out, _ = run(capsys, room, "--json", "--limit", "4", "--after", rows[-1]["cursor"])
        rows = json.loads(out)
        if not rows:
            break
        seen += [r["turn_id"] for r in rows]
    assert seen == turn_ids(room.db)


def test_filter_flags(seeded, capsys):
    room, ids = seeded
    for status, where in STATUS_TRUTH.items():
        code, out, _ = run(capsys, room, "--json", "--limit", "100", "--status", status)
        assert code == 0 and [r["turn_id"] for r in json.loads(out)] == turn_ids(room.db, where)
    cases = [
        (["--group", "chore"], [ids["waiting"]]),
        (["--origin", "task"], [ids["failed"]]),
        (["--tool", "shell", "--status", "denied"], [ids["denied"]]),
        (["--thread", "chat-a"], [ids["denied"], ids["added"]]),
        (["--tool", "shell", "--since", "2023-11-14", "--until", "1d"],
         [ids["cancelled"], ids["waiting"], ids["approved"], ids["denied"]]),
        (["--tool", "shell", "--since", "1h"], []),  # the seeded clock is in 2023
    ]  # fmt: skip
    for flags, expected in cases:
        code, out, _ = run(capsys, room, "--json", *flags)
        assert (code, [r["turn_id"] for r in json.loads(out)]) == (0, expected), flags


def test_search_and_turn_flags(seeded, capsys):
    room, ids = seeded
    code, out, _ = run(capsys, room, "--json", "--search", 'flux "capacitor')
    hits = json.loads(out)
    assert code == 0 and hits and {h["turn_id"] for h in hits} == {ids["failed"]}
    assert {"kind", "turn_id", "thread_id", "call_id", "snippet", "cursor"} <= set(hits[0])
    code, out, _ = run(capsys, room, "--search", "capacitor", "--group", "chat")
    assert (code, out) == (0, "")
    code, out, _ = run(capsys, room, "--json", "--turn", ids["denied"])
    detail = json.loads(out)
    assert set(detail) == {"turn", "steps", "messages", "calls", "decisions", "suspended",
                           "origin", "forks"}  # fmt: skip
    assert detail["decisions"][0]["decided_by"] == "bob"
    assert detail["suspended"]["call_id"] == detail["calls"][0]["call_id"]
    code, out, _ = run(capsys, room, "--turn", ids["denied"])
    assert code == 0 and "decision" in out and "by bob" in out and "cancelled" in out
    code, out, err = run(capsys, room, "--limit", "2")
    assert code == 0 and len(out.splitlines()) == 2 and "--after" in err
    assert out.splitlines()[0].startswith(turn_ids(room.db)[0])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--since", "yesterday"], "bad time"),
        (["--until", "2025-13-45"], "bad time"),
        (["--status", "exploded"], "unknown status"),
        (["--after", "nonsense"], "bad cursor"),
        (["--search", "  ()  "], "nothing to search"),
        (["--turn", "t-none"], "no turn t-none"),
        (["--turn", "t1", "--status", "done"], "--turn shows one turn"),
        (["--limit", "0"], "--limit"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(seeded, capsys, flags, message):
    room, _ = seeded
    code, out, err = run(capsys, room, *flags)
    assert code == 2 and out == "" and message in err


def test_history_of_a_room_without_a_database(tmp_path, capsys):
    code, out, _ = run(capsys, Room.at(tmp_path / "none"), "--json", "--status", "failed")
    assert (code, json.loads(out)) == (0, [])


def full_scan(line: str) -> bool:
    """A plan line that reads a whole table (an FTS5 match or an ordered index walk is not).
    open_calls (`SCAN o`) is read whole on purpose: it holds only the calls that were open
    at the last batch, so that the marks they may give are counted before the batch writes
    them (engine/store/history/pending.py)."""
    return (
        line.startswith("SCAN ")
        and not any(word in line for word in (" USING ", "VIRTUAL TABLE", "CONSTANT ROW"))
        and line not in ("SCAN o", "SCAN open_calls")
    )


@pytest.mark.anyio
async def test_history_queries_use_indexes(seeded, monkeypatch):
    """EXPLAIN QUERY PLAN of every statement History runs: no full scan of a table; a list
    page is never sorted (keyset paging walks an index); filtered lists walk turn_marks.
    (Only the rows of one turn, in `turn()`, may be sorted.)"""
    room, ids = seeded
    if store_url_of(room.db) is not None:
        pytest.skip("SQLite's query plans (PostgreSQL's: tests/test_history_pg.py)")
    opened: list[aiosqlite.Connection] = []

    async def connect(room: Room) -> aiosqlite.Connection:  # History's, kept to trace it
        opened.append(await connect_readonly(room))
        return opened[-1]

    monkeypatch.setattr(history_store, "connect_readonly", connect)
    async with History(room) as h:
        [db] = opened
        traced: list[str] = []
        await db.set_trace_callback(traced.append)
        first = await h.turns(limit=5)
        await h.turns(after=first.next, limit=5)
        filtered = [Filters(status="failed"), Filters(tool="shell", group="chat"),
                    Filters(origin="invoke", since=1.0, until=2e9), Filters(thread="bulk"),
                    Filters(status="done", tool="add", run="r1")]  # fmt: skip
        for f in filtered:
            page = await h.turns(f, limit=3)
            await h.turns(f, after=page.next or first.next, limit=3)
        await h.search("add", limit=3)
        await h.search("add", Filters(group="chat"), after="s10:10", limit=3)
        await h.counts()
        await h.runs(limit=2)
        await h.turn(ids["approved"])
        await db.set_trace_callback(None)
    conn = sqlite3.connect(f"file:{room.db}?mode=ro", uri=True)
    try:
        checked = 0
        for sql in traced:
            if not sql.lstrip().upper().startswith("SELECT") or "'main'." in sql:
                continue  # not a query, or FTS5 reading its own small tables
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql)]
            checked += 1
            for line in plan:
                assert not full_scan(line), (sql, plan)
                if " LIMIT " in sql:  # a list page: its order comes from an index
                    assert "TEMP B-TREE" not in line, (sql, plan)
            if "FROM turn_marks m" in sql:
                assert plan[0].startswith("SEARCH m USING PRIMARY KEY (mark=?"), (sql, plan)
        assert checked >= 25
        assert sum("FROM turn_marks m" in s for s in traced) == 2 * len(filtered)
    finally:
        conn.close()


WRITER = """
import sys, anyio
from pathlib import Path
from engine.runtime import Runtime
from tests.history_seed import add, boom, msg, on_store, script, shell
from tests.scripted import ScriptedModel

async def main(room, stop, url):
    config = on_store(Path(room), url or None)
    async with Runtime.open(room, kind="run", provider=ScriptedModel(script),
                            tools=[add, shell, boom], config=config) as rt:
        await rt.run_turn(msg("w0", "add first needle", "invoke"))
        await rt.store.index()  # search lags the writer by up to a second otherwise
        print("ready", flush=True)
        n = 0
        while not Path(stop).exists():  # until the browser has seen enough
            n += 1
            await rt.run_turn(msg(f"w{n % 5}", f"add turn {n} needle", "invoke"))
            if n % 7 == 0:
                await rt.run_turn(msg(f"b{n}", "boom again", "task"))
    print(n, flush=True)

anyio.run(main, *sys.argv[1:4])
"""


@pytest.mark.anyio
async def test_browse_while_a_second_process_writes(tmp_path, backend):
    room = Room.at(tmp_path / "room")
    on_store(room.path, backend)  # History reads the room's agentdeck.toml before it opens
    stop = tmp_path / "stop-writing"
    with subprocess.Popen([sys.executable, "-c", WRITER, str(room.path), str(stop), backend or ""],
                          cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        totals, rounds = set(), 0

        async def browse(h: History) -> tuple[int, int]:
            """One round of browsing (every list page by page, a search, a turn, counts)."""
            nonlocal rounds
            assert proc.poll() is None, "the writer ended while the browser read"
            rounds += 1
            newest = None
            for f in (None, Filters(origin="invoke"), Filters(status="failed")):
                seen, after = [], None
                while True:
                    page = await h.turns(f, after=after, limit=25)
                    seen += [(t["created_at"], t["turn_id"]) for t in page.items]
                    if page.next is None:
                        break
                    after = page.next
                assert seen == sorted(set(seen), reverse=True)  # descending, no duplicates
                newest = newest or seen[0][1]
            hits = await h.search("needle", limit=10)
            assert hits.items and all(x["kind"] == "message" for x in hits.items)
            assert (await h.turn(newest))["steps"] is not None
            totals.add((await h.counts())["turns"])
            return rounds, len(totals)

        try:
            async with History(room) as h:
                await until(lambda: browse(h), "rounds of browsing, and the writer's turns in them",
                            ok=lambda seen: seen[0] >= 3 and seen[1] >= 2)  # fmt: skip
        finally:
            stop.touch()
        _, err = proc.communicate(timeout=PATIENCE)
        assert proc.returncode == 0, err
        assert "locked" not in err
    assert rounds >= 3 and len(totals) >= 2  # the writer's turns showed up while browsing
    async with History(room) as h:
        assert (await h.counts())["turns"] == len(turn_ids(room.db))
        assert [t["turn_id"] for t in (await h.turns(limit=1000)).items] == turn_ids(room.db)
