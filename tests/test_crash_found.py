"""Engine bugs the crash test (tests/test_crash.py) and the crash soak found, each as a
deterministic reproduction."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.lifecycle.call import REVIEW_REASON
from engine.providers.base import (
    ModelEvent,
    ModelRequest,
    StopEvent,
    TextDelta,
    ToolCallDelta,
)
from engine.runtime import Runtime
from engine.tools import tool
from tests.crash_worker import APPROVAL_TOOL, PLAIN_TOOL, make_tools, random_calls
from tests.helpers import on
from tests.scripted import ScriptedModel
from tests.test_crash import ROOT, executions, snapshot
from tests.wait import PATIENCE, until

pytestmark = pytest.mark.usefixtures("store_backend")


@pytest.mark.anyio
async def test_a_call_killed_mid_replay_does_not_run_again(tmp_path: Path) -> None:
    room = tmp_path / "room"
    model = ScriptedModel(random_calls(random.Random(0), (APPROVAL_TOOL,), max_calls=1))
    async with Runtime.open(room, kind="invoke", provider=model, tools=make_tools()) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t", text="go"))
    assert out.status == "waiting"
    [call_id] = [p["call_id"] for p in out.pending]

    # A worker approves the call; its tool records the run and hangs; SIGKILL.
    with subprocess.Popen(
        [sys.executable, "-m", "tests.crash_worker", str(room), "approve-and-hang"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        await until(lambda: executions(room)[call_id], "the approved call runs in the worker")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    # the replay committed `running` before the tool ran, so its outcome is unknown now
    assert snapshot(room / "execution.db").calls[call_id][1] == "running"

    async with Runtime.open(room, kind="run", provider=model, tools=make_tools()) as rt:
        for handle in list(rt.live.values()):
            await handle.done.wait()
        [review] = await rt.pending()
        assert review.call_id == call_id and review.reason == REVIEW_REASON
        # a plain approval cannot run it a second time; marking it failed ends it
        assert await rt.decide(Decision.approve(call_id)) == "refused"
        assert await rt.decide(Decision.fail(call_id, "it hung")) == "queued"
        out = await rt.wait_turn(review.turn_id)
        row = await on(rt.store).fetchone("SELECT status, error FROM tool_calls WHERE id=?",
                                      (call_id,))  # fmt: skip
    assert executions(room)[call_id] == 1, "the approved call ran again after the crash"
    assert out.status in ("done", "waiting")
    assert row is not None and row["status"] == "failed"
    assert "it hung" in row["error"]


@tool(approval="always")
def ask(n: int) -> str:
    """Needs approval."""
    return f"ok {n}"


class GatedModel:
    """Two approval calls for a user message; after results, text — held at a gate."""

    name, model = "gated", "gated-1"

    def __init__(self) -> None:
        self.hold = False
        self.entered, self.release = anyio.Event(), anyio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.messages[-1].role == "user":
            for i in range(2):
                yield ToolCallDelta(index=i, id=f"m{i}", name="ask", arguments=f'{{"n": {i}}}')
            yield StopEvent(reason="tool_use")
            return
        if self.hold:
            self.entered.set()
            await self.release.wait()
        yield TextDelta(text="ok")
        yield StopEvent()


@pytest.mark.anyio
async def test_a_decision_arriving_during_inference_is_applied(tmp_path: Path) -> None:
    model = GatedModel()
    async with Runtime.open(tmp_path / "room", provider=model, tools=[ask]) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t", text="go"))
        first, second = (p["call_id"] for p in out.pending)
        model.hold = True
        await rt.decide(Decision.approve(first))
        with anyio.fail_after(PATIENCE):
            await model.entered.wait()  # the resumed turn is in inference now
        assert await rt.decide(Decision.approve(second)) == "queued"
        model.release.set()
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.pending) == ("done", []), out


@pytest.mark.anyio
async def test_queued_request_starts_after_restart(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    model = ScriptedModel(random_calls(random.Random(0), (PLAIN_TOOL,), max_calls=1))
    (room / "agentdeck.toml").write_text("[groups.chat]\nmax_running_turns = 0\n")
    async with Runtime.open(room, provider=model, tools=make_tools()) as rt:
        handle = await rt.submit(Message(origin="invoke", sender="t", thread_id="t", text="go"))
    (room / "agentdeck.toml").write_text("[groups.chat]\nmax_running_turns = 4\n")
    async with Runtime.open(room, provider=model, tools=make_tools()) as rt:
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(handle.turn_id)
    assert (out.status, out.reason) == ("done", "natural")


@pytest.mark.anyio
async def test_a_decision_recorded_while_another_is_applied_ends_duplicate(tmp_path: Path) -> None:
    # Found by the crash soak: a decision whose row was being written while another
    # decision on the same call was applied joined the inbox after the winner had taken
    # the call, so it stayed `queued` for ever (in execution.db too), never a duplicate.
    model = ScriptedModel(random_calls(random.Random(0), ("ask",), max_calls=1))
    async with Runtime.open(tmp_path / "room", provider=model, tools=[ask]) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t", text="go"))
        [call_id] = [p["call_id"] for p in out.pending]
        first, late = Decision.approve(call_id), Decision.cancel(call_id, "too late")
        held, release, answers = anyio.Event(), anyio.Event(), []
        write = rt.store.write

        async def held_write(ops: list, **kw: Any) -> None:
            # hold the late
            if any(params and params[0] == late.id for _, params in ops):  # decision's INSERT
                held.set()
                await release.wait()
            await write(ops, **kw)

        rt.store.write = held_write  # type: ignore[method-assign]

        async def decide_late() -> None:
            answers.append(await rt.decide(late))

        with anyio.fail_after(PATIENCE):
            async with anyio.create_task_group() as tg:
                tg.start_soon(decide_late)
                await held.wait()  # it found the call suspended and is being recorded
                assert await rt.decide(first) == "queued"
                out = await rt.wait_turn(out.turn_id)
                assert out.status == "done"
                release.set()
        statuses = dict(await on(rt.store).fetchall("SELECT id, status FROM decisions"))
    assert answers == ["duplicate"]
    assert statuses == {first.id: "applied", late.id: "duplicate"}


@pytest.mark.anyio
async def test_decide_on_a_free_room_finishes_a_turn_a_crash_left_running(tmp_path: Path) -> None:
    # Found by the crash soak: `agentdeck decide` on a room nobody owned, for a call already
    # decided in a turn that a kill left `running`, was a duplicate, so nothing resumed the
    # turn; the command then waited for it to stop running, for ever (a busy loop).
    room = tmp_path / "room"
    model = GatedModel()

    async with Runtime.open(room, kind="run", provider=model, tools=[ask]) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t", text="go"))
        first, second = (p["call_id"] for p in out.pending)
        model.hold = True  # the turn goes on, then stops mid-inference as the runtime closes
        await rt.decide(Decision.cancel(first, "no"))
        await rt.decide(Decision.cancel(second, "no"))
        with anyio.fail_after(PATIENCE):
            await model.entered.wait()
    assert snapshot(room / "execution.db").turns[out.turn_id][0] == "running"

    # the offline model answers the resumed turn; the room is free, so decide opens it
    argv = [sys.executable, "-m", "engine.cli", "--room", str(room), "decide", first, "approve",
            "--json"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k and "BASE_URL" not in k}
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=PATIENCE, env=env)
    said = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr  # the call was decided already (issue 25: exit 1)
    assert (said["status"], said["decision"]["status"]) == ("done", "duplicate")
    assert snapshot(room / "execution.db").turns[out.turn_id][0] == "done"


@pytest.mark.anyio
async def test_a_decision_on_a_call_running_its_replay_ends_duplicate(tmp_path: Path) -> None:
    # Found by the crash soak: a decision on a call approved and running its replay is
    # queued (the call may still suspend again), but when the call ended it stayed queued
    # for ever, in execution.db too, never a duplicate.
    entered, release = anyio.Event(), anyio.Event()

    @tool(approval="always")
    async def ask(n: int) -> str:
        """Needs approval; holds while it runs."""
        entered.set()
        await release.wait()
        return f"ok {n}"

    model = ScriptedModel(random_calls(random.Random(0), ("ask",), max_calls=1))
    async with Runtime.open(tmp_path / "room", provider=model, tools=[ask]) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t", text="go"))
        [call_id] = [p["call_id"] for p in out.pending]
        first, late = Decision.approve(call_id), Decision.cancel(call_id, "too late")
        assert await rt.decide(first) == "queued"
        with anyio.fail_after(PATIENCE):
            await entered.wait()
            assert await rt.decide(late) == "queued"  # for if the call suspends again
            release.set()
            out = await rt.wait_turn(out.turn_id)
        statuses = dict(await on(rt.store).fetchall("SELECT id, status FROM decisions"))
    assert out.status == "done"
    assert statuses == {first.id: "applied", late.id: "duplicate"}
