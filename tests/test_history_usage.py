"""What turns spent, in history (issue 33): turn rows carry their cached tokens, cost and
unpriced tokens; a turn's steps their tokens and cost; a thread its total over all days;
`agentdeck history` prints them per turn and per step and lists them in JSON; a room whose
turns predate costs reads with none. On SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.history import Filters, History
from engine.config import Config, GroupSettings, ModelConfig, PriceSettings
from engine.domain.messages import Message
from engine.domain.usage import Usage
from engine.room import Room
from engine.store.usage import of_thread
from tests.helpers import room_write, runtime
from tests.scripted import Reply, after_tools

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

# Dollars per million tokens. The scripted model reports 10 in and 5 out per inference:
# 10 * 100 + 5 * 200 = 2000 millionths, $0.002 an inference, which cost_text shows as it
# is (a price of 1 and 2 gives $0.00002, below what it shows with four decimals).
PRICE = PriceSettings(input=100.0, output=200.0)
INFERENCE = 0.002
# The task group's offline model is free (its price given as none: a group's model takes
# the room's settings it does not give, the price too).
PRICED = Config(model=ModelConfig(price=PRICE), groups={
    "task": GroupSettings(model=ModelConfig(provider="offline", price=None))})  # fmt: skip
KEPT = Path(__file__).parent / "rooms" / "2026-11-27" / "room"  # made before costs


def script(request: Any) -> Reply:
    """`add ...` calls `add` and then answers (two inferences); anything else is answered."""
    if after_tools(request.messages):
        return Reply(text="added")
    if request.messages[-1].text.startswith("add"):
        return Reply(calls=[("add", {"a": 2, "b": 3})])
    return Reply(text="ok")


def chat(thread: str, text: str) -> Message:
    return Message(origin="invoke", sender="test", thread_id=thread, text=text)


async def spending_room(tmp_path: Path) -> dict[str, Any]:
    """A turn with no price (the room's model had none then), then priced ones and one the
    task group's offline model (free) answered; turn ids by name, and what the usage table
    says thread c1 spent (`c1`)."""
    ids: dict[str, Any] = {}
    async with runtime(tmp_path, script) as rt:
        ids["unpriced"] = (await rt.run_turn(chat("c1", "hello"))).turn_id
    async with runtime(tmp_path, script, config=PRICED, first_id=100) as rt:
        ids["added"] = (await rt.run_turn(chat("c1", "add two and three"))).turn_id
        ids["said"] = (await rt.run_turn(chat("c2", "hello"))).turn_id
        task = Message(origin="task", sender="self", thread_id="task:x", text="hello")
        ids["free"] = (await rt.run_turn(task)).turn_id
        ids["c1"] = await of_thread(rt.store, "c1")
    return ids


async def test_turn_rows_carry_what_each_turn_spent(tmp_path):
    ids = await spending_room(tmp_path)
    async with History(Room.at(tmp_path / "room")) as h:
        assert h.priced
        rows = {t["turn_id"]: t for t in (await h.turns()).items}
        by_thread = (await h.turns(Filters(thread="c1"))).items
        by_tool = (await h.turns(Filters(tool="add"))).items  # a call mark: the batch's
    added, said, free, unpriced = (rows[ids[k]] for k in ("added", "said", "free", "unpriced"))
    assert (added["input_tokens"], added["output_tokens"], added["cached_tokens"],
            added["unpriced"]) == (20, 10, 0, 0)  # fmt: skip
    assert added["cost"] == pytest.approx(2 * INFERENCE)
    assert said["cost"] == pytest.approx(INFERENCE) and said["unpriced"] == 0
    assert (unpriced["cost"], unpriced["unpriced"]) == (0, 15)
    assert (free["cost"], free["unpriced"]) == (0, 0) and free["input_tokens"] > 0
    assert [t["cost"] for t in by_thread] == [added["cost"], 0]
    assert [(t["turn_id"], t["cost"]) for t in by_tool] == [(ids["added"], added["cost"])]
    assert History.spent(added) == Usage(20, 10, 0, pytest.approx(2 * INFERENCE), 0, 2)
    assert History.spent(unpriced).unpriced == 15


async def test_a_turns_steps_carry_their_tokens_and_cost(tmp_path):
    ids = await spending_room(tmp_path)
    async with History(Room.at(tmp_path / "room")) as h:
        added = await h.turn(ids["added"])
        unpriced = await h.turn(ids["unpriced"])
    turn = added["turn"]
    assert (turn["cached_tokens"], turn["unpriced"]) == (0, 0)
    assert turn["cost"] == pytest.approx(2 * INFERENCE)
    steps = [(s["kind"], s["input_tokens"], s["output_tokens"], s["cached_tokens"],
              None if s["cost"] is None else round(s["cost"], 9)) for s in added["steps"]]  # fmt: skip
    assert steps == [("inference", 10, 5, 0, INFERENCE), ("tool_round", 0, 0, 0, None),
                     ("inference", 10, 5, 0, INFERENCE)]  # fmt: skip
    [step] = unpriced["steps"]  # tokens, and no price: no cost
    assert (step["input_tokens"], step["output_tokens"], step["cost"]) == (10, 5, None)
    assert History.spent(step) == Usage(10, 5, 0, 0.0, 15, 0)
    assert unpriced["turn"]["unpriced"] == 15


async def test_a_threads_total_is_the_sum_of_its_turns_on_all_days(tmp_path):
    ids = await spending_room(tmp_path)
    async with History(Room.at(tmp_path / "room")) as h:
        c1 = await h.thread_usage("c1")
        c2 = await h.thread_usage("c2")
        nothing = await h.thread_usage("no-such-thread")
    assert c1 is not None and c2 is not None
    assert (c1.input_tokens, c1.output_tokens, c1.unpriced, c1.steps) == (30, 15, 15, 3)
    assert c1.cost == pytest.approx(2 * INFERENCE)
    table = ids["c1"]  # what the usage table says the thread spent, all days together
    assert c1 == Usage(table.input_tokens, table.output_tokens, table.cached_tokens,
                       pytest.approx(table.cost), table.unpriced, table.steps)  # fmt: skip
    assert (c2.tokens, c2.cost) == (15, pytest.approx(INFERENCE))
    assert nothing == Usage()


def test_history_prints_what_turns_and_steps_spent(tmp_path: Path, capsys: Any) -> None:
    from engine.cli import main

    ids = anyio.run(spending_room, tmp_path)
    room = str(tmp_path / "room")
    assert main(["--room", room, "history"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "  $0.0040 · 30 tokens    add two and three" in lines[ids["added"]]
    assert "  $0.0020 · 15 tokens    hello" in lines[ids["said"]]
    assert "  15 tokens · no price   hello" in lines[ids["unpriced"]]
    assert " $0.00 · " in lines[ids["free"]]
    assert main(["--room", room, "history", "--turn", ids["added"]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  spent $0.0040 · 30 tokens: 20 in, 10 out" in out
    steps = [line for line in out if line.startswith("  step ")]
    assert steps[0].endswith("calls add ($0.0020 · 15 tokens)")
    assert steps[1].endswith("add succeeded")  # a tool round spent nothing
    assert steps[2].endswith("added ($0.0020 · 15 tokens)")
    assert main(["--room", room, "history", "--turn", ids["unpriced"]]) == 0
    out = capsys.readouterr().out
    assert "  spent 15 tokens · no price: 10 in, 5 out" in out and "(15 tokens · no price)" in out
    assert main(["--room", room, "history", "--json", "--thread", "c1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["cost"], r["cached_tokens"], r["unpriced"]) for r in rows] == [
        (pytest.approx(2 * INFERENCE), 0, 0), (0, 0, 15)]  # fmt: skip
    assert main(["--room", room, "history", "--json", "--turn", ids["added"]]) == 0
    detail = json.loads(capsys.readouterr().out)
    assert detail["turn"]["cost"] == pytest.approx(2 * INFERENCE)
    assert [s["cost"] is None for s in detail["steps"]] == [False, True, False]
    assert {"input_tokens", "output_tokens", "cached_tokens", "cost"} <= set(detail["steps"][0])


async def test_a_room_whose_turns_have_no_cost_column_reads_with_none(tmp_path):
    # (as a database an earlier release made, read before a runtime upgrades it: here the
    # column alone is gone; on both stores)
    ids = await spending_room(tmp_path)
    room_write(tmp_path / "room", "ALTER TABLE turns DROP COLUMN cost")
    try:
        async with History(Room.at(tmp_path / "room")) as h:
            assert h.modelled and not h.priced
            listed = (await h.turns()).items
            by_tool = (await h.turns(Filters(tool="add"))).items
            detail = (await h.turn(ids["added"]))["turn"]
            total = await h.thread_usage("c1")
    finally:  # (on PostgreSQL the database goes back to the pool for the next tests: whole)
        room_write(
            tmp_path / "room",
            "ALTER TABLE turns ADD COLUMN cost DOUBLE PRECISION NOT NULL DEFAULT 0",
        )
    assert len(listed) == 4 and total is None
    assert {(t["cost"], t["cached_tokens"], t["unpriced"]) for t in [*listed, *by_tool]} == {
        (None, None, None)}  # fmt: skip
    assert detail["cost"] is None and detail["input_tokens"] == 20
    assert History.spent(detail).unpriced == 30  # tokens without a known price


async def read_kept(room: Path) -> tuple[bool, list[dict[str, Any]], dict[str, Any]]:
    async with History(Room.at(room)) as h:
        items = (await h.turns()).items
        return h.priced, items, await h.turn(items[0]["turn_id"])


@pytest.mark.one_store("the kept room is an execution.db as an earlier release left it")
def test_a_room_made_before_costs_is_read_with_none(tmp_path: Path, capsys: Any) -> None:
    from engine.cli import main

    shutil.copytree(KEPT, tmp_path / "room")
    priced, items, detail = anyio.run(read_kept, tmp_path / "room")
    assert not priced
    assert items and {t["cost"] for t in items} == {None}
    assert {s["cost"] for s in detail["steps"]} == {None}
    room = str(tmp_path / "room")
    assert main(["--room", room, "history", "--turn", items[0]["turn_id"]]) == 0
    first = items[0]
    tokens = first["input_tokens"] + first["output_tokens"]
    assert f"  spent {tokens} tokens · no price: " in capsys.readouterr().out


@pytest.mark.one_store("SQLite's query plans (PostgreSQL's are tests/test_history_pg.py's)")
def test_what_a_thread_and_a_turn_spent_are_read_by_index(tmp_path: Path) -> None:
    ids = anyio.run(spending_room, tmp_path)
    from engine.store.sql import dialect

    d = dialect("sqlite")
    conn = sqlite3.connect(f"file:{tmp_path / 'room' / 'execution.db'}?mode=ro", uri=True)
    try:
        for name, key in (("history.thread_usage", "c1"), ("history.turn_usage", ids["added"])):
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + d.text(name), (key,))]
            assert all(line.startswith("SEARCH t USING ") for line in plan), (name, plan)
    finally:
        conn.close()
