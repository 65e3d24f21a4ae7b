"""History says which model answered each turn (issue 32): a turn's detail and the turn
lists carry `model` (`provider:model`, as the turn recorded it), `agentdeck history --turn`
prints it, and a room whose turns predate the column reads with none. On SQLite and on
PostgreSQL."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.history import Filters, History
from engine.config import Config, GroupSettings, ModelConfig
from engine.domain.messages import Message
from engine.room import Room
from tests.helpers import room_write, runtime
from tests.scripted import Reply

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

# The room's model is the scripted one tests.helpers.runtime passes; two groups have
# offline models of their own, told apart by their names.
CONFIG = Config(groups={
    "task": GroupSettings(model=ModelConfig(provider="offline", model="offline-small")),
    "chore": GroupSettings(model=ModelConfig(provider="offline", model="offline-large")),
})  # fmt: skip
ROOMS = "scripted:scripted-1"
MODELS = {"chat": ROOMS, "task": "offline:offline-small", "chore": "offline:offline-large"}
KEPT = Path(__file__).parent / "rooms" / "2026-11-27" / "room"  # made before turns.model


def ok(request: Any) -> Reply:
    return Reply(text="ok")


def message(origin: str, thread: str, text: str) -> Message:
    if origin == "chat":
        return Message(origin="chat", channel="console", sender="ann", thread_id=thread,
                       text=text)  # fmt: skip
    return Message(origin=origin, sender="self", thread_id=thread,  # type: ignore[arg-type]
                   text=text)  # fmt: skip


async def answered_turns(tmp_path: Path) -> dict[str, str]:
    """A chat turn, a task turn, a chore turn and a second chat turn; turn ids by group
    (the second chat turn as `chat2`)."""
    ids: dict[str, str] = {}
    async with runtime(tmp_path, ok, config=CONFIG) as rt:
        for name, origin, thread, text in (("chat", "chat", "chat:main", "hello"),
                                           ("task", "task", "task:report", "hello"),
                                           ("chore", "chore", "chore:tidy", "hello"),
                                           ("chat2", "chat", "chat:main", "again")):  # fmt: skip
            ids[name] = (await rt.run_turn(message(origin, thread, text))).turn_id
    return ids


async def test_a_turns_detail_says_which_model_answered_it(tmp_path):
    ids = await answered_turns(tmp_path)
    async with History(Room.at(tmp_path / "room")) as h:
        assert h.modelled
        said = {name: (await h.turn(turn_id))["turn"] for name, turn_id in ids.items()}
    assert {name: t["model"] for name, t in said.items()} == {**MODELS, "chat2": ROOMS}
    assert said["task"]["group"] == "task" and said["chore"]["group"] == "chore"
    assert said["task"]["answer"]  # the group's offline model answered, not the script
    assert said["chat"]["answer"] == "ok"


async def test_the_turn_lists_carry_each_turns_model(tmp_path):
    ids = await answered_turns(tmp_path)
    async with History(Room.at(tmp_path / "room")) as h:
        listed = {t["turn_id"]: t["model"] for t in (await h.turns()).items}
        tasks = (await h.turns(Filters(group="task"))).items
        chats = (await h.turns(Filters(thread="chat:main"))).items
    assert listed == {turn_id: MODELS.get(name, ROOMS) for name, turn_id in ids.items()}
    assert [t["model"] for t in tasks] == ["offline:offline-small"]
    assert [t["model"] for t in chats] == [ROOMS, ROOMS]


def test_history_prints_the_model_of_a_turn_and_lists_it_in_json(tmp_path: Path,
                                                                  capsys: Any) -> None:  # fmt: skip
    from engine.cli import main

    ids = anyio.run(answered_turns, tmp_path)
    room = str(tmp_path / "room")
    assert main(["--room", room, "history", "--turn", ids["task"]]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.startswith(f"turn {ids['task']} on task:report (task, task): done")
    assert header.endswith(", answered by offline:offline-small")
    assert main(["--room", room, "history", "--json", "--group", "chore"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["turn_id"] == ids["chore"] and row["model"] == "offline:offline-large"
    assert main(["--room", room, "history", "--turn", ids["chat"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["turn"]["model"] == ROOMS


async def test_a_room_whose_turns_have_no_model_column_reads_with_none(tmp_path):
    # (as a database an earlier release made, read before a runtime upgrades it: here the
    # column alone is gone, the instructions stay; on both stores)
    ids = await answered_turns(tmp_path)
    room_write(tmp_path / "room", "ALTER TABLE turns DROP COLUMN model")
    try:
        async with History(Room.at(tmp_path / "room")) as h:
            assert h.told and not h.modelled
            listed = (await h.turns()).items
            tasks = (await h.turns(Filters(group="task"))).items
            detail = (await h.turn(ids["task"]))["turn"]
    finally:  # (on PostgreSQL the database goes back to the pool for the next tests: whole)
        room_write(tmp_path / "room", "ALTER TABLE turns ADD COLUMN model TEXT")
    assert len(listed) == 4 and {t["model"] for t in [*listed, *tasks]} == {None}
    assert detail["model"] is None and detail["told"] is not None


async def read_kept(room: Path) -> tuple[bool, list[dict[str, Any]], dict[str, Any]]:
    async with History(Room.at(room)) as h:
        items = (await h.turns()).items
        return h.modelled, items, await h.turn(items[0]["turn_id"])


@pytest.mark.one_store("the kept room is an execution.db as an earlier release left it")
def test_a_room_made_before_models_is_read_with_none(tmp_path: Path, capsys: Any) -> None:
    from engine.cli import main

    shutil.copytree(KEPT, tmp_path / "room")
    modelled, items, detail = anyio.run(read_kept, tmp_path / "room")
    assert not modelled
    assert items and {t["model"] for t in items} == {None}
    assert detail["turn"]["model"] is None
    room = str(tmp_path / "room")
    assert main(["--room", room, "history", "--turn", items[0]["turn_id"]]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"turn {items[0]['turn_id']} on ") and "answered by" not in out
