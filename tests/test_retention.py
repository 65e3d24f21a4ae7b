"""Retention (issue 35, disk stays bounded): `[retention]` days and gb, `agentdeck gc`.

A pruned turn loses its steps, events and outputs and keeps its summary row, its calls'
rows and its decisions; running and waiting turns are never pruned; a dry run changes
nothing; a second pass prunes nothing more; a thread whose old turns were pruned goes on
with the same conversation; the space comes back to the disk; the owner prunes by itself,
and `gc` goes through it while it runs a turn."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.history import History
from engine.config import Config, ConfigError, load_config
from engine.config_retention import GB, RetentionConfig
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.base import ModelRequest
from engine.room import Room
from engine.services.retention import Retention
from engine.store.space import files_of
from engine.tools import tool
from tests.helpers import msg, rows, runtime
from tests.scripted import Reply, add, after_tools, shell
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

DAY = 86400.0
T0 = 1_700_000_000.0  # when the old turns ran


class Clock:
    """The runtime's clock, moved by the test."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@tool
def blob(n: int) -> str:
    """A large output."""
    return "output " * n


def calls_then_answers(request: ModelRequest) -> Reply:
    """Each user message: one call (`add`, or `shell` when it says so, or `blob`), then an
    answer quoting what came back."""
    last = request.messages[-1]
    if last.role == "user":
        if last.text.startswith("shell"):
            return Reply(calls=[("shell", {"command": "echo kept"})])
        if last.text.startswith("blob"):
            return Reply(calls=[("blob", {"n": int(last.text.split()[1])})])
        return Reply(calls=[("add", {"a": 1, "b": 2})])
    return Reply(text="got " + " ".join(m.text[:20] for m in after_tools(request.messages)))


def config(**retention: Any) -> Config:
    return Config(retention=RetentionConfig(**retention))


async def count(rt: Any, table: str, where: str = "true", *params: Any) -> int:
    return int((await rows(rt, f"SELECT count(*) FROM {table} WHERE {where}", *params))[0][0])


async def pruned_ids(rt: Any) -> set[str]:
    return {r[0] for r in await rows(rt, "SELECT id FROM turns WHERE pruned_at IS NOT NULL")}


async def old_and_new(rt: Any, clock: Clock) -> dict[str, Any]:
    """Turns 40 days old (three on thread old, one approved shell call on thread ops, one
    still waiting for a decision on thread wait) and two of today on thread new."""
    out: dict[str, Any] = {"old": []}
    for n in range(3):
        out["old"].append((await rt.run_turn(msg(f"old {n}", "old"))).turn_id)
    asked = await rt.run_turn(msg("shell please", "ops"))
    [call] = asked.pending
    await rt.decide(Decision.approve(call["call_id"], seen=call["args"], decided_by="ann"))
    assert (await rt.wait_turn(asked.turn_id)).status == "done"
    out["approved"], out["call"] = asked.turn_id, call["call_id"]
    waiting = await rt.run_turn(msg("shell and wait", "wait"))
    assert waiting.status == "waiting"
    out["waiting"] = waiting.turn_id
    clock.now = T0 + 40 * DAY
    out["new"] = [(await rt.run_turn(msg(f"new {n}", "new"))).turn_id for n in range(2)]
    return out


async def test_a_dry_run_changes_nothing_and_gc_prunes_exactly_the_old_finished_turns(
    tmp_path: Path,
) -> None:
    clock = Clock()
    async with runtime(tmp_path, calls_then_answers, clock=clock) as rt:
        made = await old_and_new(rt, clock)
        old = {*made["old"], made["approved"]}
        gone = " OR ".join(f"turn_id = '{t}'" for t in old)
        before = {t: await count(rt, t) for t in ("steps", "events", "checkpoints", "tool_calls")}
        retention = Retention.of(rt.store, rt.room.path, rt.config, rt.clock)

        dry = await retention.gc(dry_run=True, days=30)
        assert (dry.turns, dry.dry_run, dry.after) == (4, True, None)
        assert dry.steps == await count(rt, "steps", gone) > 0
        assert dry.events == await count(rt, "events", gone) > 0
        assert dry.calls == 4 and dry.freed_estimate > 0
        assert await pruned_ids(rt) == set()
        assert {t: await count(rt, t) for t in before} == before

        report = await retention.gc(days=30)
        assert (report.turns, report.steps, report.events) == (4, dry.steps, dry.events)
        assert report.after is not None
        assert await pruned_ids(rt) == old
        assert await count(rt, "steps", gone) == 0
        assert await count(rt, "events", gone) == 0
        assert await count(rt, "checkpoints", gone) == 0
        # the summary rows: status, answer, tokens and the step count they had
        summary = await rows(rt, "SELECT status, final_text, input_tokens, pruned_steps, pruned_at"
                                 " FROM turns WHERE id = ?", made["old"][0])  # fmt: skip
        assert summary[0][:4] == ("done", "got 3", 20, 3) and summary[0][4] == clock.now
        # the calls stay, without their outputs; the approved one keeps its arguments
        calls = await rows(rt, "SELECT tool, status, result, args FROM tool_calls WHERE "
                               f"{gone} ORDER BY tool")  # fmt: skip
        assert [tuple(c) for c in calls] == [("add", "succeeded", None, "")] * 3 + [
            ("shell", "succeeded", None, json.dumps({"command": "echo kept"}))]  # fmt: skip
        decisions = await rows(rt, "SELECT call_id, action, decided_by FROM decisions")
        assert [tuple(d) for d in decisions] == [(made["call"], "resume", "ann")]
        # the waiting turn and today's turns are whole
        for turn in (made["waiting"], *made["new"]):
            assert await count(rt, "steps", "turn_id = ?", turn) > 0, turn
        assert (await rt.pending())[0].turn_id == made["waiting"]
        again = await retention.gc(days=30)
        assert (again.turns, again.steps, again.events) == (0, 0, 0)  # idempotent

    async with History(Room.at(tmp_path / "room")) as history:
        listed = {t["turn_id"]: t for t in (await history.turns(limit=20)).items}
        detail = await history.turn(made["approved"])
    assert {t for t, item in listed.items() if item["pruned_at"] is not None} == old
    assert listed[made["old"][0]]["steps"] == 3 and listed[made["old"][0]]["calls"] == 1
    assert listed[made["new"][0]]["pruned_at"] is None and listed[made["new"][0]]["steps"] == 3
    assert detail["steps"] == [] and detail["turn"]["pruned_at"] == T0 + 40 * DAY
    assert [(d["action"], d["decided_by"], d["then"]["status"]) for d in detail["decisions"]] \
        == [("resume", "ann", "succeeded")]  # fmt: skip


async def test_history_says_what_was_pruned(tmp_path: Path) -> None:
    from engine.cli.history_text import turn_line, turn_lines

    clock = Clock()
    async with runtime(tmp_path, calls_then_answers, clock=clock) as rt:
        made = await old_and_new(rt, clock)
        await Retention.of(rt.store, rt.room.path, rt.config, rt.clock).gc(days=30)
    async with History(Room.at(tmp_path / "room")) as history:
        listed = {t["turn_id"]: t for t in (await history.turns(limit=20)).items}
        detail = await history.turn(made["approved"])
        kept = await history.turn(made["new"][0])
    day = anyio_day(T0 + 40 * DAY)
    assert turn_line(listed[made["old"][0]]).endswith(f"· steps pruned {day}")
    assert "pruned" not in turn_line(listed[made["new"][0]])
    text = "\n".join(turn_lines(detail))
    assert f"steps pruned {day} (4 steps, 1 call:" in text
    assert "decision" in text and "resume by ann" in text and "tool_round" not in text
    assert "tool_round" in "\n".join(turn_lines(kept))


def anyio_day(at: float) -> str:
    import time

    return time.strftime("%Y-%m-%d", time.localtime(at))


# -- a thread goes on ------------------------------------------------------------------------


def summarises(request: ModelRequest) -> Reply:
    """`calls_then_answers`, and a summary when asked to compact."""
    if request.purpose == "summary":
        return Reply(text="Summary: outputs were read.")
    return calls_then_answers(request)


def sent(messages: list[Any]) -> list[tuple[Any, ...]]:
    return [(m.role, m.text, [(c.name, c.arguments) for c in m.tool_calls], m.tool_call_id)
            for m in messages]  # fmt: skip


async def request_of(rt: Any, thread: str) -> list[tuple[Any, ...]]:
    """What a turn on `thread` would send of its conversation, read from the store."""
    from engine.turn.view import request_messages

    rt.supervisor.forget(thread)
    return sent(request_messages((await rt.supervisor.conversation(thread)).messages))


async def test_a_pruned_thread_goes_on_with_the_same_conversation(tmp_path: Path) -> None:
    """Thread long was compacted: the outputs its summary covers are slimmed, and what its
    next turn sends is what it sent before retention; thread plain was not: its entries
    stay whole. Both go on."""
    clock = Clock()
    tools = (add, shell, blob)
    async with runtime(tmp_path, summarises, tools, clock=clock) as rt:
        for n in range(3):
            await rt.run_turn(msg(f"blob 500 {n}", "long"))
        compact = Message(origin="invoke", sender="op", thread_id="long", text="compact")
        done = await rt.wait_turn((await rt.submit(compact, strategy="compact")).turn_id)
        assert done.text == "compacted"
        await rt.run_turn(msg("blob 400 after", "long"))
        await rt.run_turn(msg("blob 300 plain", "plain"))
        before = {t: await request_of(rt, t) for t in ("long", "plain")}
        clock.now = T0 + 40 * DAY
        report = await Retention.of(rt.store, rt.room.path, rt.config, rt.clock).gc(days=30)
        # the two exchanges the summary covers: their results and the entries that asked
        assert report.turns == 6 and report.messages == 4
        outputs = await rows(rt, "SELECT thread_id, seq, text FROM messages WHERE role = 'tool'"
                                 " ORDER BY thread_id, seq")  # fmt: skip
    slimmed = [r for r in outputs if r[2].startswith("[output pruned")]
    assert [(r[0], r[1]) for r in slimmed] == [("long", 2), ("long", 6)]
    assert all(r[2].startswith("output output") for r in outputs if r not in slimmed)
    async with runtime(tmp_path, summarises, tools, clock=clock, first_id=1000) as rt:
        for thread in ("long", "plain"):
            assert await request_of(rt, thread) == before[thread]
            outcome = await rt.run_turn(msg("blob 10 again", thread))
            assert (outcome.status, outcome.reason) == ("done", "natural")
        asked = rt.provider.requests  # type: ignore[attr-defined]
    assert not any("[output pruned" in m.text for r in asked for m in r.messages)


# -- through the owner, while it runs a turn -------------------------------------------------

release = anyio.Event()


@tool
async def hold() -> str:
    """Waits until the test lets it go."""
    await release.wait()
    return "let go"


def holds(request: ModelRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "user" and last.text == "hold":
        return Reply(calls=[("hold", {})])
    return calls_then_answers(request)


async def test_gc_goes_through_the_owner_while_a_turn_runs(tmp_path: Path) -> None:
    from engine.api.remote import RemoteClient
    from engine.loops.server import serve_api

    global release
    release = anyio.Event()
    clock = Clock()
    async with runtime(tmp_path, holds, (add, shell, hold), clock=clock, kind="run") as rt:
        old = [(await rt.run_turn(msg(f"old {n}", "old"))).turn_id for n in range(3)]
        clock.now = T0 + 40 * DAY
        running = await rt.submit(msg("hold", "busy"))
        await until(lambda: count(rt, "tool_calls", "turn_id = ? AND status = 'running'",
                                  running.turn_id), "the held call running")  # fmt: skip
        async with serve_api(rt), RemoteClient(Room.at(tmp_path / "room")) as client:
            dry = await client.gc(dry_run=True, days=30)
            report = await client.gc(days=30)
        assert (dry.turns, report.turns, report.dry_run) == (3, 3, False)
        assert await pruned_ids(rt) == set(old)
        release.set()
        outcome = await rt.wait_turn(running.turn_id)
        assert (outcome.status, outcome.text) == ("done", "got let go")
        assert await count(rt, "steps", "turn_id = ?", running.turn_id) == 3
        assert await count(rt, "events", "turn_id = ?", running.turn_id) > 0


# -- limits ----------------------------------------------------------------------------------


async def test_past_gb_the_oldest_finished_turns_go_first(tmp_path: Path, store_backend: str):
    clock = Clock()
    async with runtime(tmp_path, calls_then_answers, (add, shell, blob), clock=clock) as rt:
        turns = []
        for n in range(6):
            clock.now = T0 + n * DAY
            turns.append((await rt.run_turn(msg(f"blob 8000 {n}", f"t{n}"))).turn_id)
        waiting = (await rt.run_turn(msg("shell then", "w"))).turn_id
        retention = Retention.of(rt.store, rt.room.path, rt.config, rt.clock)
        every = await retention.gc(dry_run=True, gb=1e-9)  # a byte: every finished turn
        assert every.turns == 6
        each = every.freed_estimate / 6
        used = every.before.used_bytes
        some = await retention.gc(gb=(used - 2.5 * each) / GB)
        pruned = await pruned_ids(rt)
        assert pruned == set(turns[: len(pruned)]) and waiting not in pruned  # oldest first
        if store_backend == "sqlite":  # (PostgreSQL's size is a sample's estimate)
            assert some.turns == 3
        assert 1 <= some.turns < 6
        rest = await retention.gc(gb=1e-9)
        assert rest.turns == 6 - some.turns and await pruned_ids(rt) == set(turns)
        assert (await retention.gc(gb=1e-9)).turns == 0


@pytest.mark.one_store
async def test_the_file_gives_the_space_back(tmp_path: Path) -> None:
    clock = Clock()
    db = tmp_path / "room" / "execution.db"
    async with runtime(tmp_path, calls_then_answers, (add, shell, blob), clock=clock) as rt:
        for n in range(20):
            await rt.run_turn(msg(f"blob 8000 {n}", "big"))
        clock.now = T0 + 40 * DAY
        await rt.run_turn(msg("blob 10 new", "big"))
        await rt.store.reclaim()  # (the WAL copied back: the file as its rows make it)
        before = files_of(db)
        report = await Retention.of(rt.store, rt.room.path, rt.config, rt.clock).gc(days=30)
        after = files_of(db)
        assert report.turns == 20 and report.note is None
        assert report.after is not None and report.after.file_bytes == after
        assert before - after > 20 * 8000 * 7  # the results and their events, at least
        assert before - after > report.freed_estimate // 2  # (the full-text index's old text too)
        assert report.after.used_bytes < report.before.used_bytes


@pytest.mark.one_store
async def test_a_room_made_before_incremental_vacuum_is_vacuumed_when_asked(tmp_path: Path):
    clock = Clock()
    db = tmp_path / "room" / "execution.db"
    async with runtime(tmp_path, calls_then_answers, (add, shell, blob), clock=clock):
        pass
    conn = sqlite3.connect(db, isolation_level=None)  # as a room of release 9 was made
    conn.execute("PRAGMA auto_vacuum=NONE")
    conn.execute("VACUUM")
    conn.close()
    async with runtime(tmp_path, calls_then_answers, (add, shell, blob), clock=clock,
                       first_id=1000) as rt:  # fmt: skip
        for n in range(10):
            await rt.run_turn(msg(f"blob 8000 {n}", "big"))
        clock.now = T0 + 40 * DAY
        retention = Retention.of(rt.store, rt.room.path, rt.config, rt.clock)
        await rt.store.reclaim()
        before = files_of(db)
        report = await retention.gc(days=30)
        assert report.turns == 10 and report.note and "--vacuum" in report.note
        assert files_of(db) >= before  # the pages are free, the file as large
        full = await retention.gc(vacuum=True)
        assert full.turns == 0 and full.vacuumed
        assert full.after is not None and full.after.file_bytes < before - 10 * 8000 * 7
        assert await rt.store.scalar("PRAGMA auto_vacuum") == 2  # incremental from now on
        outcome = await rt.run_turn(msg("blob 10 still", "big"))  # the room goes on
        assert outcome.status == "done"


async def test_the_owner_prunes_by_itself_as_the_settings_say(tmp_path: Path) -> None:
    clock = Clock()
    async with runtime(tmp_path, calls_then_answers, clock=clock) as rt:
        old = [(await rt.run_turn(msg(f"old {n}", "old"))).turn_id for n in range(2)]
        clock.now = T0 + 10 * DAY
        recent = (await rt.run_turn(msg("recent", "old"))).turn_id
    clock.now = T0 + 40 * DAY
    async with runtime(tmp_path, calls_then_answers, clock=clock, config=config(days=30),
                       first_id=1000) as rt:  # fmt: skip
        await until(lambda: pruned_ids(rt), "the old turns pruned at start",
                    ok=lambda found: found == set(old))  # fmt: skip
        assert await count(rt, "steps", "turn_id = ?", recent) == 3


async def test_the_bus_loses_the_pruned_turns_events(tmp_path: Path) -> None:
    from engine.services.projector import Projector, bus_path
    from engine.store.bus import Bus

    clock = Clock()
    async with runtime(tmp_path, calls_then_answers, clock=clock) as rt:
        made = await old_and_new(rt, clock)
        bus = await Bus.open(bus_path(rt.room.path, rt.config.bus))
        try:
            await Projector(rt.store, bus, rt.room.path, clock=clock).catch_up()
            shown = await bus.events(str(rt.room.path), 0, 1000)
            old = {*made["old"], made["approved"]}
            gone = [e for e in shown if e[4] in old]
            report = await Retention.of(rt.store, rt.room.path, rt.config, rt.clock).gc(days=30)
            left = await bus.events(str(rt.room.path), 0, 1000)
        finally:
            await bus.close()
    assert gone and report.bus_events == len(gone)
    assert left == [e for e in shown if e[4] not in old]


@pytest.mark.one_store
def test_bad_retention_settings_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "agentdeck.toml"
    for text, said in (("days = -1", "[retention.days] Input should be greater than 0"),
                       ("gb = true", "[retention.gb] give a number, not true or false"),
                       ("weeks = 2", "[retention.weeks] Extra inputs are not permitted"),
                       ("days = 'a'", "[retention.days] Input should be a valid number")):  # fmt: skip
        path.write_text(f"[retention]\n{text}\n")
        with pytest.raises(ConfigError, match=f"agentdeck.toml: {re_escape(said)}"):
            load_config(path)
    path.write_text("[retention]\ndays = 30\ngb = 2\n")
    settings = load_config(path).retention
    assert (settings.days, settings.max_bytes, settings.active) == (30, 2 * GB, True)
    assert not Config().retention.active


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.one_store
def test_the_command_line_prunes_and_history_says_so(tmp_path: Path, capsys: Any) -> None:
    """`agentdeck gc` on a room nobody owns (its turns ran in 2023: older than 30 days)."""
    from engine.cli import main

    async def made() -> None:
        async with runtime(tmp_path, calls_then_answers, clock=Clock()) as rt:
            for n in range(2):
                await rt.run_turn(msg(f"old {n}", "old"))

    anyio.run(made)
    room = str(tmp_path / "room")
    assert main(["--room", room, "gc", "--dry-run", "--days", "30"]) == 0
    said = capsys.readouterr().out
    assert said.startswith("would prune 2 turns (finished more than 30 days ago)"), said
    assert main(["--room", room, "gc"]) == 0
    assert capsys.readouterr().out.startswith("nothing to prune: [retention]")
    assert main(["--room", room, "gc", "--days", "30", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["turns"], report["steps"], report["dry_run"]) == (2, 6, False)
    assert report["after"]["used_bytes"] <= report["before"]["used_bytes"]
    assert main(["--room", room, "history"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and all("· steps pruned " in line for line in listed)
    for bad in (["--days", "0"], ["--gb", "-1"], ["--dry-run", "--vacuum"]):
        assert main(["--room", room, "gc", *bad]) == 2
        assert capsys.readouterr().err.startswith("agentdeck: ")
