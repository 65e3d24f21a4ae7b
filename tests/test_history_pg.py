"""Reading a room whose store is on PostgreSQL without owning it: the console's first view
(`read_recent`, `read_conversation`) answers as on SQLite; history's search is current
without a batch; a cancelled read leaves no transaction; the reader cannot write; a
database that cannot be reached is a one-line error without the password, never an empty
view; `agentdeck info` names the database, not execution.db. (The history API's own
tests run on both backends: tests/test_history.py, tests/test_history_cli.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine.api.history import History
from engine.cli import main
from engine.domain.decisions import Decision
from engine.room import Room
from engine.store import StoreError
from engine.store.pg.reader import PgReader
from engine.store.recent import read_conversation, read_recent
from engine.store.select import ENV
from tests.history_seed import add, boom, msg, on_store, script, shell
from tests.scripted import ScriptedModel

pytestmark = pytest.mark.anyio
SECRET = "s3cret-pw"


async def fill(room: Room, url: str | None) -> dict[str, str]:
    """A few turns through the real runtime: an add, a failure, one left waiting."""
    import itertools

    from engine.runtime import Runtime

    counter = itertools.count(1)
    ticks = itertools.count()
    async with Runtime.open(room, kind="test", provider=ScriptedModel(script),
                            tools=[add, shell, boom], config=on_store(room.path, url),
                            clock=lambda: 1_700_000_000.0 + next(ticks) * 0.01,
                            ids=lambda p: f"{p}{next(counter)}") as rt:  # fmt: skip
        added = (await rt.run_turn(msg("chat-a", "add two and three"))).turn_id
        failed = (await rt.run_turn(msg("task-1", "boom now", "task"))).turn_id
        waiting = (await rt.run_turn(msg("chat-b", "shell ls"))).turn_id
    return {"added": added, "failed": failed, "waiting": waiting}


def plain(value: Any) -> Any:
    """A record as data, with the ids of steps (a per-database sequence) left out."""
    data = dataclasses.asdict(value)
    for step in data.get("steps", []):
        step.pop("step_id")
    return data


async def test_the_first_view_on_postgresql_is_what_sqlite_shows(tmp_path: Path, pg_url: str):
    lite, pg = Room.at(tmp_path / "lite"), Room.at(tmp_path / "pg")
    ids = await fill(lite, None)
    assert await fill(pg, pg_url) == ids
    assert not pg.db.exists()  # nothing went to SQLite
    recent = await read_recent(pg)
    assert recent.threads == ["chat-b", "task-1", "chat-a"]
    assert [t.turn_id for t in recent.turns] == [ids["added"], ids["failed"], ids["waiting"]]
    assert [c.status.value for c in recent.calls] == ["succeeded", "failed", "suspended"]
    assert recent.steps and recent.steps[-1].turn_id == ids["waiting"]
    assert plain(recent) == plain(await read_recent(lite))
    for thread in ("chat-a", "task-1", "chat-b", "nobody"):
        conv = await read_conversation(pg, thread, 50)
        assert conv == await read_conversation(lite, thread, 50), thread
    conv = await read_conversation(pg, "chat-a", 50)
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool", "assistant"]
    assert conv.messages[0].text == "add two and three" and conv.messages[0].sender == "op"
    assert (await read_conversation(pg, "chat-a", 2)).messages == conv.messages[-2:]


async def test_a_database_no_runtime_has_opened_reads_empty(tmp_path: Path, pg_url: str):
    room = Room.at(tmp_path / "room")
    on_store(room.path, pg_url)
    recent = await read_recent(room)
    assert (recent.threads, recent.turns, recent.calls, recent.steps) == ([], [], [], [])
    assert (await read_conversation(room, "t1", 10)).messages == []


def unreachable(url: str) -> str:
    """`url` with a password, on a port nothing listens on."""
    return url.replace("postgresql:///", f"postgresql://nobody:{SECRET}@/") + "&port=1"


async def test_an_unreachable_database_is_a_one_line_error(tmp_path: Path, pg_url: str,
                                                           monkeypatch):  # fmt: skip
    secret = SECRET
    monkeypatch.setenv(ENV, unreachable(pg_url))
    room = Room.at(tmp_path / "room")
    for read in (lambda: read_recent(room), lambda: read_conversation(room, "t1", 10),
                 lambda: History(room).__aenter__()):  # fmt: skip
        with pytest.raises(StoreError) as caught:
            await read()
        text = str(caught.value)
        assert "\n" not in text and secret not in text and text.startswith("cannot open")


def test_history_of_an_unreachable_database_says_so_in_one_line(tmp_path: Path, pg_url: str,
                                                                 monkeypatch, capsys):  # fmt: skip
    monkeypatch.setenv(ENV, unreachable(pg_url))
    code = main(["--room", str(tmp_path / "room"), "history", "--json"])
    out, err = capsys.readouterr()
    assert code != 0 and out == "" and len(err.splitlines()) == 1 and SECRET not in err
    assert "cannot open postgresql" in err


async def test_search_needs_no_batch_on_postgresql(tmp_path: Path, pg_url: str):
    """The full text is a generated column: a call is found as soon as it is committed,
    and a call whose arguments a decision changed is found by its new ones only."""
    from engine.runtime import Runtime

    room = Room.at(tmp_path / "room")
    async with Runtime.open(room, kind="test", provider=ScriptedModel(script),
                            tools=[add, shell, boom],
                            config=on_store(room.path, pg_url)) as rt:  # fmt: skip
        out = await rt.run_turn(msg("a", "shell echo marmalade"))
        async with History(room) as h:
            hits = (await h.search("marmalade")).items
            assert {x["kind"] for x in hits} == {"message", "call"}
            assert all("[marmalade]" in x["snippet"] for x in hits)
            [call] = out.pending
            await rt.decide(Decision(call_id=call["call_id"], action="resume",
                                     args={"command": "echo quince"}, decided_by="op"))  # fmt: skip
            await rt.wait_turn(out.turn_id)
            assert [x["kind"] for x in (await h.search("marmalade")).items] == ["message"]
            assert "call" in {x["kind"] for x in (await h.search("quin*")).items}
            assert (await h.search("it's a back\\slash 'quince'")).items == []  # no error
            assert (
                await h.search("nul\x00 byte")
            ).items == []  # sent as U+FFFD, as the writer does
            assert (await h.search("nul\x00 byte", raw=True)).items == []


async def test_a_cancelled_read_leaves_no_transaction_and_the_reader_cannot_write(
    tmp_path: Path, pg_url: str
) -> None:
    room = Room.at(tmp_path / "room")
    ids = await fill(room, pg_url)
    async with History(room) as h:
        for k in range(8):
            task = asyncio.create_task(h.turn(ids["waiting"]))
            for _ in range(k):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with psycopg.connect(pg_url, autocommit=True) as writer:
                writer.execute("UPDATE turns SET final_text = %s WHERE id = %s",
                               (f"answer {k}", ids["waiting"]))  # fmt: skip
                [now] = (await h.turns(limit=1)).items
                assert now["answer"] == f"answer {k}", k  # no old snapshot held
                states = writer.execute(
                    "SELECT state FROM pg_stat_activity WHERE application_name = 'agentdeck-reader'"
                ).fetchall()
                assert states == [("idle",)], k  # fmt: skip
    reader = await PgReader.connect(pg_url)
    try:
        with pytest.raises(StoreError, match="read-only"):
            await reader.execute_fetchall("UPDATE turns SET text = 'x'")
        assert await reader.execute_fetchall("SELECT count(*) FROM turns") == [(3,)]
    finally:
        await reader.close()


def test_info_names_the_database_without_its_password(tmp_path: Path, pg_url: str,
                                                      monkeypatch, capsys):  # fmt: skip
    room = Room.at(tmp_path / "room")
    on_store(room.path, pg_url)
    assert main(["--room", str(room.path), "info"]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.startswith("database:")]
    assert "postgresql" in line and "execution.db" not in line
    monkeypatch.setenv(ENV, pg_url.replace("postgresql:///", "postgresql://me:hunter2@/"))
    assert main(["--room", str(room.path), "info"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out and "database:  postgresql" in out
