"""The room's decision audit (issue 36): after a scripted run with approvals (as shown,
edited, with a result), cancels, a refused and a duplicate decision, a remembered rule
deciding a later call, agentdeck.toml's rules denying and asking, and a deadline's
decision, the audit's decision entries are the decisions table row for row and its rule
entries the rule_calls table, read by the owner and read-only from a room nobody owns,
paged at every size; filters, positions and bad input. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.audit import export, export_path
from engine.api.client import Invalid, RoomClient
from engine.api.local import LocalClient
from engine.api.reading import RoomReader
from engine.domain.audit import AuditEntry
from engine.domain.decisions import Decision
from engine.providers.offline import OfflineModel
from engine.room import Room
from engine.runtime import Runtime
from engine.tools.builtin import builtin_tools
from tests.helpers import msg, rows, runtime
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

T0 = 1_800_000_000.0
TOML = """
[approvals.tools.shell]
deadline = "10m"

[[rules]]
tool = "shell"
effect = "deny"
pattern = "rm -rf /"

[[rules]]
tool = "read_file"
effect = "ask"
"""
DECISION_COLUMNS = ("id, call_id, action, decided_by, status, note, reason, remember, pattern,"
                    " args_hash, sandbox, created_at, applied_at, args, use_result")  # fmt: skip


class FakeTime:
    """A clock that moves only by `advance` (every decision before it is recorded at T0:
    entries that tie on time, ordered by key and kind); a sleep ends once the clock passes
    its end."""

    def __init__(self) -> None:
        self.now = T0
        self._sleepers: list[tuple[float, anyio.Event]] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        woken = anyio.Event()
        self._sleepers.append((self.now + seconds, woken))
        await woken.wait()

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        for entry in list(self._sleepers):
            if entry[0] <= self.now:
                self._sleepers.remove(entry)
                entry[1].set()
        await anyio.wait_all_tasks_blocked()


@asynccontextmanager
async def scripted_room(tmp_path: Path) -> AsyncIterator[Runtime]:
    """A room after the issue's scripted run (the runtime still open)."""
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(TOML)
    time = FakeTime()
    async with runtime(tmp_path, OfflineModel(), builtin_tools(), clock=time.clock,
                       sleep=time.sleep) as rt:  # fmt: skip
        await script(rt, time)
        yield rt


async def asked(rt: Runtime, text: str, thread: str) -> tuple[str, str, Any]:
    out = await rt.run_turn(msg(text, thread))
    [call] = out.pending
    return out.turn_id, call["call_id"], call["args"]


async def script(rt: Runtime, time: FakeTime) -> None:
    # approved as shown; with edited arguments; with a result instead of running
    turn, call, args = await asked(rt, "run `echo one`", "a")
    assert await rt.decide(Decision.approve(call, seen=args)) == "queued"
    await rt.wait_turn(turn)
    turn, call, args = await asked(rt, "run `echo two`", "a")
    edited = Decision.approve(call, seen=args, args={"command": "echo edited"})
    assert await rt.decide(edited) == "queued"
    await rt.wait_turn(turn)
    turn, call, args = await asked(rt, "run `echo three`", "a")
    assert await rt.decide(Decision.with_result(call, {"stdout": "pretend"})) == "queued"
    await rt.wait_turn(turn)
    # cancelled by a named operator, with a reason holding a line break and an escape
    turn, call, args = await asked(rt, "run `echo four`", "a")
    cancel = Decision.cancel(call, "=no\nnever \x1b[31mred", decided_by="alice")
    assert await rt.decide(cancel) == "queued"
    await rt.wait_turn(turn)
    # refused (bound to other arguments), then applied, then a duplicate
    turn, call, args = await asked(rt, "run `touch marker`", "a")
    assert await rt.decide(Decision.approve(call, seen={"command": "echo harmless"})) == "refused"
    assert await rt.decide(Decision.approve(call, seen=args)) == "queued"
    await rt.wait_turn(turn)
    assert await rt.decide(Decision.cancel(call, "too late")) == "duplicate"
    # remembered for the room: a later call on another thread is the rule's to decide
    turn, call, args = await asked(rt, "run `echo hi`", "a")
    assert await rt.decide(Decision.approve(call, seen=args, remember="room")) == "queued"
    await rt.wait_turn(turn)
    assert (await rt.run_turn(msg("run `echo hi`", "b"))).status == "done"
    # agentdeck.toml's rules: a denial, and an ask that an operator then answers
    assert (await rt.run_turn(msg("run `rm -rf /`", "c"))).calls[0]["status"] == "failed"
    turn, call, args = await asked(rt, "read notes.txt", "c")
    assert await rt.decide(Decision.cancel(call, "not now", decided_by="alice")) == "queued"
    await rt.wait_turn(turn)
    # the deadline's cancel, ten minutes later
    turn, call, args = await asked(rt, "run `echo late`", "d")
    await time.advance(600)
    await until(lambda: rows(rt, "SELECT status FROM decisions WHERE call_id = ?", call),
                "the deadline's decision applied", ok=lambda r: r == [("applied",)])  # fmt: skip
    await rt.wait_turn(turn)


async def everything(client: RoomClient, size: int = 1000, **query: Any) -> list[AuditEntry]:
    """Every entry, page by page of `size`."""
    out: list[AuditEntry] = []
    after = None
    while True:
        page = await client.audit(limit=size, after=after, **query)
        out += page.entries
        assert len(page.entries) <= size
        if page.next is None:
            return out
        assert page.entries and page.next == page.entries[-1].cursor
        after = page.next


def as_row(e: AuditEntry) -> tuple[Any, ...]:
    """A decision entry as the table's row (its arguments: whether edited)."""
    return (e.decision_id, e.call_id, e.action, e.decided_by, e.status, e.note, e.reason,
            e.remember, e.pattern, e.args_hash, None if e.sandbox == "default" else e.sandbox,
            e.recorded_at, e.applied_at, e.edited, e.use_result)  # fmt: skip


async def test_the_audit_equals_the_decisions_table_and_the_rules_verdicts(tmp_path: Path):
    async with scripted_room(tmp_path) as rt:
        table = await rows(rt, f"SELECT {DECISION_COLUMNS} FROM decisions")
        verdicts = await rows(rt, "SELECT call_id, rule, effect, at FROM rule_calls")
        calls = {r[0]: r[1:] for r in await rows(rt, "SELECT id, turn_id, thread_id, tool"
                                                     " FROM tool_calls")}  # fmt: skip
        owned = await everything(LocalClient(rt))
    # the decisions table, row for row, in the order recorded (then by id)
    expected = sorted(((*r[:13], r[13] is not None, bool(r[14])) for r in table),
                      key=lambda r: (r[11], r[0]))  # fmt: skip
    decisions = [e for e in owned if e.kind == "decision"]
    assert [as_row(e) for e in decisions] == expected
    assert all((e.turn_id, e.thread_id, e.tool) == calls[e.call_id] for e in owned)
    assert {e.status for e in decisions} == {"applied", "refused", "duplicate"}
    assert {e.decided_by for e in decisions} == {"operator", "alice", "deadline"}
    assert [e.status for e in decisions if e.call_id == decisions[-1].call_id] == ["applied"]
    assert sorted((e.action, e.edited, e.use_result) for e in decisions
                  if e.edited or e.use_result) == [("resume", False, True), ("resume", True, False)]  # fmt: skip
    assert any(e.reason == "=no\nnever \x1b[31mred" for e in decisions)  # stored as given
    [remembered] = [e for e in decisions if e.remember]
    assert (remembered.remember, remembered.action) == ("room", "resume")
    # every rule's verdict at the gate, named as an operator reads it
    rules = [e for e in owned if e.kind == "rule"]
    assert sorted((e.call_id, e.rule, e.action, e.recorded_at) for e in rules) == sorted(verdicts)
    by = {e.action: e for e in rules}
    assert sorted(by) == ["allow", "ask", "deny"]
    assert (by["allow"].decided_by, by["allow"].pattern, by["allow"].thread_id) == (
        "rule 1", "echo hi", "b")  # fmt: skip
    assert by["allow"].note == f"made by operator from decision {remembered.decision_id}"
    for effect in ("deny", "ask"):  # agentdeck.toml's, by the fingerprint they are counted by
        fingerprint = (by[effect].rule or "").removeprefix("toml:")
        assert len(fingerprint) == 12 and by[effect].rule == f"toml:{fingerprint}"
        assert by[effect].decided_by == f"agentdeck.toml rule {fingerprint}"
        # (the file is not the store: what its rule said is in agentdeck.toml, not here)
        assert (by[effect].pattern, by[effect].note, by[effect].sandbox) == (None, None, None)
    # the file's rule asked for the read, then alice cancelled it: two entries of one call
    assert sorted((e.kind, e.decided_by) for e in owned if e.call_id == by["ask"].call_id) == [
        ("decision", "alice"), ("rule", by["ask"].decided_by)]  # fmt: skip
    # oldest first: every entry but the deadline's ties at T0, ordered by key, then kind
    keys = [(e.recorded_at, e.decision_id or e.call_id, e.kind) for e in owned]
    assert keys == sorted(keys) and owned[-1].decided_by == "deadline"
    assert [e.recorded_at for e in owned].count(T0) == len(owned) - 1
    # a room nobody owns is read from its store, without a run, alike
    reader = await RoomReader.open(Room.at(tmp_path / "room"))
    assert reader is not None
    try:
        assert await everything(reader) == owned
    finally:
        await reader.aclose()


async def test_every_page_size_gives_the_same_entries_and_the_filters_keep_theirs(tmp_path):
    async with scripted_room(tmp_path) as rt:
        client = LocalClient(rt)
        whole = await everything(client)
        assert len(whole) == 13
        for size in range(1, len(whole) + 2):
            assert await everything(client, size) == whole, size
        # from a position: what follows it; from the last entry: nothing
        for i, entry in enumerate(whole):
            assert (await client.audit(after=entry.cursor)).entries == whole[i + 1 :]
        # the filters
        assert [e.kind for e in await everything(client, 2, thread="b")] == ["rule"]
        assert {e.thread_id for e in await everything(client, 2, thread="a")} == {"a"}
        alice = await everything(client, 1, decided_by="alice")
        assert sorted((e.action, e.tool) for e in alice) == [("cancel", "read_file"),
                                                             ("cancel", "shell")]  # fmt: skip
        assert [e.decided_by for e in await everything(client, decided_by="rule 1")] == ["rule 1"]
        assert len(await everything(client, 1, kind="rule")) == 3
        assert len(await everything(client, 1, kind="decision")) == 10
        [late] = await everything(client, since=T0 + 1)
        assert (late.decided_by, late.action, late.thread_id) == ("deadline", "cancel", "d")
        assert await everything(client, since=T0 + 601) == []
        assert await everything(client, thread="nobody's") == []
        # what cannot be read is refused, saying what
        for bad in ("x", "1.0:maybe:k", "nan:decision:d", "1.0"):
            with pytest.raises(Invalid, match="bad cursor"):
                await client.audit(after=bad)
        with pytest.raises(Invalid, match="limit"):
            await client.audit(limit=0)
        with pytest.raises(Invalid, match="kind"):
            await client.audit(kind="rules")


async def test_the_export_is_every_entry_as_json_lines_in_a_private_file(tmp_path: Path):
    async with scripted_room(tmp_path) as rt:
        client = LocalClient(rt)
        whole = await everything(client)
        target = export_path(rt.room.path, T0)
        assert target.parent == rt.room.path / "exports"
        assert target.name.startswith("audit-") and target.suffix == ".jsonl"
        assert await export(client, target) == len(whole)
        lines = target.read_text().splitlines()
        assert [AuditEntry.model_validate(json.loads(line)) for line in lines] == whole
        assert target.stat().st_mode & 0o777 == 0o600
        assert list(target.parent.iterdir()) == [target]  # nothing partial left beside it
        again = export_path(rt.room.path, T0)  # the same second: a name of its own
        assert again != target and again.name.endswith("-2.jsonl")
        assert await export(client, again, kind="rule") == 3
