"""The review after a real crash (engine/decisions/review.py): a worker process approves a
call, its tool starts, the worker is SIGKILLed; the next runtime puts the call up for review, and
each of the review's answers does what it says, exactly once. Executions are counted in
ROOM/executions.log (tests/crash_worker.py); a `shell` call's process group outlives the
worker and is ended from the review.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from engine.api.local import LocalClient
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.lifecycle.call import REVIEW_REASON
from engine.providers.base import ModelRequest
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.tools import orphans
from engine.tools.builtin import builtin_tools
from tests.crash_worker import APPROVAL_TOOL, make_tools
from tests.helpers import on, room_rows
from tests.scripted import Reply, ScriptedModel, after_tools
from tests.test_crash import executions
from tests.wait import PATIENCE, until_sync

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def one_call(request: ModelRequest) -> Reply:
    """A user message gets one call of the approval tool; tool results are quoted back."""
    msgs = request.messages
    if msgs[-1].role == "user":
        return Reply(calls=[(APPROVAL_TOOL, {"n": 7})])
    return Reply(text=" | ".join(f"{m.tool_name}: {m.text}" for m in after_tools(msgs)))


def kill_worker(room: Path, mode: str, started: Callable[[], bool]) -> None:
    """Run the crash worker in `mode` on `room` until `started()` is true, then SIGKILL it."""
    with subprocess.Popen(
        [sys.executable, "-m", "tests.crash_worker", str(room), mode],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        try:
            until_sync(started, "the worker's call started")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


async def crashed_mid_call(tmp_path: Path) -> tuple[Path, str, str]:
    """A room whose approval call was running when its runtime was killed: (room, call,
    turn). The call ran once (its tool recorded it, then hung)."""
    room = tmp_path / "room"
    async with Runtime.open(room, kind="invoke", provider=ScriptedModel(one_call),
                            tools=make_tools()) as rt:  # fmt: skip
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t", text="go"))
    assert out.status == "waiting"
    [call_id] = [p["call_id"] for p in out.pending]
    kill_worker(room, "approve-and-hang", lambda: executions(room)[call_id] >= 1)
    assert room_rows(room, "SELECT status FROM tool_calls WHERE id=?", call_id) == [("running",)]
    return room, call_id, out.turn_id


async def reviewed(rt: Runtime, call_id: str) -> None:
    """Wait until the restart has put `call_id` up for review."""
    for handle in list(rt.live.values()):
        with anyio.fail_after(PATIENCE):
            await handle.done.wait()
    [review] = await rt.pending()
    assert (review.call_id, review.reason) == (call_id, REVIEW_REASON)


async def test_a_typed_result_marks_the_call_succeeded_and_the_turn_finishes(tmp_path):
    room, call_id, turn_id = await crashed_mid_call(tmp_path)
    model = ScriptedModel(one_call)
    async with Runtime.open(room, kind="run", provider=model, tools=make_tools()) as rt:
        await reviewed(rt, call_id)
        [review] = await LocalClient(rt).reviews()
        assert (review.call_id, review.tool, review.args) == (call_id, APPROVAL_TOOL, {"n": 7})
        assert review.started_at <= review.since and review.process is None
        decision = Decision.with_result(call_id, "it did run: op 7 done")
        assert await rt.decide(decision) == "queued"
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(turn_id)
        [row] = await on(rt.store).fetchall("SELECT status, result, error FROM tool_calls")
        assert await LocalClient(rt).reviews() == []
    assert (out.status, out.reason) == ("done", "natural")
    assert tuple(row) == ("succeeded", "it did run: op 7 done", None)
    assert after_tools(model.requests[-1].messages)[0].text == "it did run: op 7 done"
    assert executions(room)[call_id] == 1  # marking it succeeded ran nothing


async def test_fail_marks_the_call_failed_with_the_reason_the_model_reads(tmp_path):
    room, call_id, turn_id = await crashed_mid_call(tmp_path)
    model = ScriptedModel(one_call)
    async with Runtime.open(room, kind="run", provider=model, tools=make_tools()) as rt:
        await reviewed(rt, call_id)
        assert await rt.decide(Decision.cancel(call_id, "no")) == "refused"  # not for a review
        assert await rt.decide(Decision.fail(call_id, "the disk was full")) == "queued"
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(turn_id)
        [row] = await on(rt.store).fetchall("SELECT status, error FROM tool_calls")
    assert (out.status, out.reason) == ("done", "natural")
    assert row["status"] == "failed"
    read = after_tools(model.requests[-1].messages)[0].text
    assert "outcome unknown" in read and "operator marked it failed: the disk was full" in read
    assert executions(room)[call_id] == 1


async def test_rerun_runs_the_call_exactly_once_more(tmp_path):
    room, call_id, turn_id = await crashed_mid_call(tmp_path)
    model = ScriptedModel(one_call)
    async with Runtime.open(room, kind="run", provider=model, tools=make_tools()) as rt:
        await reviewed(rt, call_id)
        # bound to the arguments shown: other arguments fail closed, and nothing runs
        assert await rt.decide(Decision.rerun(call_id, seen={"n": 8})) == "refused"
        assert await rt.decide(Decision.rerun(call_id, seen={"n": 7})) == "queued"
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(turn_id)
        assert await rt.decide(Decision.rerun(call_id, seen={"n": 7})) == "duplicate"
        [row] = await on(rt.store).fetchall("SELECT status, result FROM tool_calls")
    assert (out.status, out.reason) == ("done", "natural")
    assert tuple(row) == ("succeeded", "approved op 7 done")
    assert executions(room)[call_id] == 2  # once before the crash, once on the rerun
    # and once only, even across another restart
    async with Runtime.open(room, kind="run", provider=model, tools=make_tools()) as rt:
        assert await rt.pending() == []
    assert executions(room)[call_id] == 2


async def crashed_shell(tmp_path: Path, command: str) -> tuple[Path, str, str, dict]:
    """A room whose `shell` call (`echo x >> ran.log; ` and `command`) was running when its
    runtime was killed: (room, call, turn, its process group's record). The group is
    alive: whoever calls this ends it (the `leftover` fixture)."""
    room = tmp_path / "room"
    async with Runtime.open(room, kind="invoke", provider=OfflineModel(delay=0),
                            tools=builtin_tools()) as rt:  # fmt: skip
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t",
                                        text=f"run `echo x >> ran.log; {command}`"))  # fmt: skip
    [call_id] = [p["call_id"] for p in out.pending]
    kill_worker(room, "approve-builtin", lambda: (room / "workspace" / "ran.log").exists())
    record = process_of(room)
    assert record is not None and orphans.alive(record)
    return room, call_id, out.turn_id, record


def process_of(room: Path) -> dict | None:
    rows = room_rows(room, "SELECT meta FROM tool_calls WHERE tool='shell'")
    return json.loads(rows[0][0] or "{}").get("process") if rows else None


async def test_a_shell_calls_surviving_process_group_is_reported_and_killed(
    tmp_path: Path, leftover: list[int]
) -> None:
    room, call_id, turn_id, record = await crashed_shell(tmp_path, "sleep 120; echo late")
    leftover.append(record["pgid"])

    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0),
                            tools=builtin_tools()) as rt:  # fmt: skip
        client = LocalClient(rt)
        await reviewed(rt, call_id)
        [review] = await client.reviews()
        assert review.process is not None
        assert (review.process.pgid, review.process.alive) == (record["pgid"], True)
        assert review.process.command == "echo x >> ran.log; sleep 120; echo late"
        killed = await client.kill_orphan(call_id)
        assert (killed.pgid, killed.result) == (record["pgid"], "terminated")
        assert not orphans.alive(record)
        [review] = await client.reviews()
        assert review.process is not None
        assert (review.process.alive, review.process.killed) == (False, "terminated")
        # killing it again finds nothing alive
        assert (await client.kill_orphan(call_id)).result == "gone"
        # the call still waits for its review: it is failed, and the turn finishes
        assert await rt.decide(Decision.fail(call_id, "killed")) == "queued"
        with anyio.fail_after(PATIENCE):
            done = await rt.wait_turn(turn_id)
    assert done.status == "done"


@pytest.mark.one_store  # SQLite's user_version (the kept rooms migrate PostgreSQL's)
async def test_an_older_room_s_call_under_review_is_typed_so_when_it_opens(tmp_path: Path):
    """Issue 27: what a suspended call waits for is a column (`awaiting`), not its reason's
    text compared. A room of version 5 had only the text: opening it types its calls."""
    import sqlite3

    from engine.store import migrations
    from tests.helpers import as_version

    room = tmp_path / "room"
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt:
        await rt.run_turn(Message(origin="invoke", sender="t", thread_id="a", text="run `echo a`"))
        await rt.run_turn(Message(origin="invoke", sender="t", thread_id="b", text="run `echo b`"))
        reviewed, approved = (p.call_id for p in await rt.pending())
    conn = sqlite3.connect(room / "execution.db", isolation_level=None)
    try:  # as the review after a crash left it in a room of version 5
        conn.execute("UPDATE tool_calls SET suspend_reason=? WHERE id=?", (REVIEW_REASON, reviewed))
        as_version(conn, 5)
    finally:
        conn.close()
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt:
        assert room_rows(room, "SELECT user_version FROM pragma_user_version") == [
            (migrations.VERSION,)
        ]
        assert {p.call_id: p.awaiting for p in await rt.pending()} == {
            reviewed: "review", approved: "decision"}  # fmt: skip
        assert [r.call_id for r in await LocalClient(rt).reviews()] == [reviewed]
        assert await rt.decide(Decision.approve(reviewed, seen={"command": "echo a"})) == "refused"
        assert await rt.decide(Decision.approve(approved, seen={"command": "echo b"})) == "queued"
