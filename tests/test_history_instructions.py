"""History says what each turn was told (issue 32): a turn's detail has the hash of its
instructions and their parts, and marks a turn told otherwise than the thread's turn before
it; the turn lists carry the hash; `agentdeck history --turn` prints it; a room made before
instructions is read as it is. On SQLite and on PostgreSQL."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.api.history import Filters, History
from engine.api.local import LocalClient
from engine.config import AgentConfig, Config, GroupSettings
from engine.domain.messages import Message
from engine.room import Room
from engine.store.sql import dialect
from tests.helpers import runtime
from tests.scripted import Reply

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

CONFIG = Config(agent=AgentConfig(instructions="Answer in English."),
                groups={"chat": GroupSettings(instructions="Keep answers short.")})  # fmt: skip
KEPT = Path(__file__).parent / "rooms" / "2026-11-27" / "room"  # made before instructions


def chat(text: str, thread: str = "chat:main") -> Message:
    return Message(origin="chat", channel="console", sender="ann", thread_id=thread, text=text)


def ok(request: Any) -> Reply:
    return Reply(text="ok")


async def told_turns(tmp_path: Path) -> dict[str, str]:
    """A room whose chat:main turns are told the same twice, then the thread's own, then
    nothing of its own again; and a first turn on another thread. Turn ids by name."""
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "AGENTS.md").write_text("You are Ada.\n")
    async with runtime(tmp_path, ok, config=CONFIG) as rt:
        client = LocalClient(rt)
        ids = {"first": (await rt.run_turn(chat("one"))).turn_id,
               "same": (await rt.run_turn(chat("two"))).turn_id}  # fmt: skip
        await client.set_instructions("chat:main", "This thread is the release.")
        ids["own"] = (await rt.run_turn(chat("three"))).turn_id
        ids["other"] = (await rt.run_turn(chat("four", thread="chat:other"))).turn_id
        await client.set_instructions("chat:main", None)
        ids["cleared"] = (await rt.run_turn(chat("five"))).turn_id
    return ids


async def test_a_turns_detail_says_what_it_was_told_and_when_that_changed(tmp_path):
    ids = await told_turns(tmp_path)
    async with History(Room.at(tmp_path / "room")) as h:
        assert h.told
        first, same, own, other, cleared = [
            (await h.turn(ids[name]))["turn"]["told"]
            for name in ("first", "same", "own", "other", "cleared")
        ]
    general = ["AGENTS.md", "[agent] instructions", "the group chat"]
    assert [p["source"] for p in first["parts"]] == general
    assert first["parts"][0]["text"] == "You are Ada."
    assert (first["changed"], first["previous"]) == (False, None)  # the thread's first turn
    assert same["hash"] == first["hash"] and not same["changed"]
    assert same["previous"] == {"turn_id": ids["first"], "hash": first["hash"]}
    assert [p["source"] for p in own["parts"]] == [*general, "the thread chat:main"]
    assert own["parts"][-1]["text"] == "This thread is the release."
    assert own["changed"] and own["hash"] != same["hash"]
    assert own["previous"] == {"turn_id": ids["same"], "hash": same["hash"]}
    # another thread's turn is compared with its own thread's, not the room's last
    assert other["hash"] == first["hash"] and (other["changed"], other["previous"]) == (False, None)
    assert cleared["hash"] == first["hash"] and cleared["changed"]
    assert cleared["previous"] == {"turn_id": ids["own"], "hash": own["hash"]}


async def test_the_turn_lists_carry_each_turns_hash(tmp_path):
    ids = await told_turns(tmp_path)
    async with History(Room.at(tmp_path / "room")) as h:
        listed = {t["turn_id"]: t["instructions"] for t in (await h.turns()).items}
        in_thread = (await h.turns(Filters(thread="chat:main"))).items
        detail = await h.turn(ids["own"])
    assert listed[ids["own"]] == detail["turn"]["instructions"] == detail["turn"]["told"]["hash"]
    assert listed[ids["first"]] == listed[ids["same"]] == listed[ids["other"]] != listed[ids["own"]]
    assert [t["instructions"] for t in in_thread] == [
        listed[ids[n]] for n in ("cleared", "own", "same", "first")
    ]


async def test_a_turn_told_nothing_has_no_hash_and_no_change(tmp_path):
    # (a clock that stands still: the turn before is the one opened before, all the same)
    async with runtime(tmp_path, ok, clock=lambda: 1_767_268_800.0) as rt:
        first = (await rt.run_turn(chat("one"))).turn_id
        second = (await rt.run_turn(chat("two"))).turn_id
    async with History(Room.at(tmp_path / "room")) as h:
        told = (await h.turn(second))["turn"]["told"]
        listed = (await h.turns()).items
    assert told == {"hash": None, "parts": [], "changed": False,
                    "previous": {"turn_id": first, "hash": None}}  # fmt: skip
    assert [t["instructions"] for t in listed] == [None, None]


def test_history_turn_prints_what_the_turn_was_told(tmp_path: Path, capsys: Any) -> None:
    import anyio

    from engine.cli import main

    ids = anyio.run(told_turns, tmp_path)
    room = str(tmp_path / "room")
    assert main(["--room", room, "history", "--turn", ids["own"]]) == 0
    out = capsys.readouterr().out
    told = [line.strip() for line in out.splitlines() if line.strip().startswith("told")]
    [line] = told
    assert line.startswith("told instructions ")
    assert line.endswith(": AGENTS.md, [agent] instructions, the group chat, the thread "
                         f"chat:main (changed since turn {ids['same']})")  # fmt: skip
    assert main(["--room", room, "history", "--turn", ids["same"]]) == 0
    assert "changed" not in capsys.readouterr().out


@pytest.mark.one_store("the kept room is an execution.db as an earlier release left it")
async def test_a_room_made_before_instructions_is_read_as_it_is(tmp_path):
    shutil.copytree(KEPT, tmp_path / "room")
    async with History(Room.at(tmp_path / "room")) as h:
        assert not h.told
        items = (await h.turns()).items
        detail = await h.turn(items[0]["turn_id"])
    assert items and {t["instructions"] for t in items} == {None}
    assert detail["turn"]["told"] is None and detail["turn"]["instructions"] is None
    with sqlite3.connect(tmp_path / "room" / "execution.db") as db:  # read, not upgraded
        assert "instructions" not in {r[1] for r in db.execute("PRAGMA table_info(turns)")}


@pytest.mark.one_store("SQLite's query plan")
async def test_the_turn_before_is_found_by_the_threads_index(tmp_path):
    async with runtime(tmp_path, ok) as rt:
        await rt.run_turn(chat("one"))
    with sqlite3.connect(tmp_path / "room" / "execution.db") as db:
        plan = [r[3] for r in db.execute(
            "EXPLAIN QUERY PLAN " + dialect("sqlite").text("history.turn_instructions"), ("t",))]  # fmt: skip
    assert any("INDEX turns_thread (thread_id=?" in step for step in plan), plan
    assert not any(step.startswith("SCAN") or "TEMP B-TREE" in step for step in plan), plan


@pytest.mark.one_store("a table dropped from execution.db")
async def test_a_room_without_the_table_of_texts_is_read_as_one_made_before(tmp_path):
    # (a PostgreSQL database upgraded to version 4 gets the column but not the table)
    async with runtime(tmp_path, ok) as rt:
        turn = (await rt.run_turn(chat("one"))).turn_id
    with sqlite3.connect(tmp_path / "room" / "execution.db") as db:
        db.execute("DROP TABLE instructions")
    async with History(Room.at(tmp_path / "room")) as h:
        assert not h.told
        assert (await h.turn(turn))["turn"]["told"] is None
