"""Breakpoints survive a SIGKILL (issue 36): a worker process (tests/break_worker.py) runs a
turn to a pause of each kind and is killed; the next runtime finds the pause pending,
unchanged, and continuing it completes the turn with each held call run exactly once. A kill
after a `step` is applied but before the pause it leads to (the released call, or the one
inference, blocks) leaves the next runtime pausing again exactly one tool round (or one
inference) after. Executions are counted in ROOM/executions.log (tests/crash_worker.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from engine.api.break_models import NewBreakpoint
from engine.api.local import LocalClient
from engine.domain.decisions import Decision, PendingCall
from engine.domain.messages import Message
from engine.domain.outcome import TurnOutcome
from engine.lifecycle.call import REVIEW_REASON
from engine.runtime import Runtime
from tests.break_worker import ASKED, open_room
from tests.helpers import room_rows
from tests.test_crash import executions
from tests.wait import PATIENCE, until, until_sync

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run_and_kill(room: Path, mode: str, said: str, ready: Callable[[], bool] = lambda: True) -> str:
    """Run the worker in `mode` until it prints `said ...` and `ready()` holds; SIGKILL it.
    The rest of the line it printed."""
    with subprocess.Popen([sys.executable, "-m", "tests.break_worker", str(room), mode],
                          cwd=ROOT, stdout=subprocess.PIPE, text=True) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().split()
            assert line[:1] == [said], f"the worker said {line} ({mode})"
            until_sync(ready, f"the worker ({mode}) got where it is killed")
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    return " ".join(line[1:])


def asked(room: Path) -> int:
    log = room / ASKED
    return len(log.read_text().splitlines()) if log.exists() else 0


def statuses(room: Path) -> Counter[str]:
    return Counter(f"{tool}:{status}" for tool, status in
                   room_rows(room, "SELECT tool, status FROM tool_calls"))  # fmt: skip


async def the_pause(rt: Runtime) -> PendingCall:
    [pause] = [p for p in await rt.pending() if p.awaiting == "breakpoint"]
    return pause


async def go(rt: Runtime, decision: Decision, turn_id: str) -> TurnOutcome:
    assert await rt.decide(decision) == "queued"
    with anyio.fail_after(PATIENCE):
        return await rt.wait_turn(turn_id)


async def restarted(rt: Runtime) -> None:
    """Wait until the turns this runtime resumed at its start have run as far as they can."""
    for handle in list(rt.live.values()):
        with anyio.fail_after(PATIENCE):
            await handle.done.wait()


# Each kind: the calls its pause holds, and the executions of `op` before the kill
KINDS = {"inference": (0, 0), "call": (2, 0), "result": (2, 2)}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_a_pause_of_each_kind_survives_a_sigkill_and_resumes(
    tmp_path: Path, kind: str
) -> None:
    room = tmp_path / "room"
    held, ran = KINDS[kind]
    call_id = run_and_kill(room, f"pause-{kind}", "paused")
    before = room_rows(room, "SELECT id, status, args, suspend_reason, awaiting FROM tool_calls "
                       "ORDER BY idx")  # fmt: skip
    assert sum(executions(room).values()) == ran
    async with open_room(room) as rt:
        await restarted(rt)
        pause = await the_pause(rt)
        assert (pause.call_id, pause.args["at"]) == (call_id, kind)
        assert len(pause.args.get("calls", ())) == held
        after = room_rows(room, "SELECT id, status, args, suspend_reason, awaiting "
                          "FROM tool_calls ORDER BY idx")  # fmt: skip
        assert after == before  # nothing moved at the restart
        [point] = await LocalClient(rt).breakpoints()
        assert (point.kind, point.hits) == (kind, 1)
        out = await go(rt, Decision.approve(pause.call_id, seen=pause.args), pause.turn_id)
        assert (out.status, out.reason) == ("done", "natural"), out
        assert out.text == "done: op 1 done | op 2 done"
        assert [p for p in await rt.pending()] == []
    ops = [c for (c,) in room_rows(room, "SELECT id FROM tool_calls WHERE tool = 'op'")]
    assert len(ops) == 2 and executions(room) == Counter(dict.fromkeys(ops, 1))  # once each
    assert statuses(room)["breakpoint:succeeded"] == 1


async def paused_at(room: Path, kind: str, text: str) -> PendingCall:
    """A turn of `text` waiting at a once `kind` breakpoint (run here, with no kill)."""
    tool_name = None if kind == "inference" else text.split()[1]
    async with open_room(room) as rt:
        await LocalClient(rt).add_breakpoint(NewBreakpoint(kind=kind, tool=tool_name,
                                                           scope="once"))  # fmt: skip
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="w", text=text))
        assert out.status == "waiting"
        return await the_pause(rt)


@pytest.mark.parametrize("tool_name", ["op", "idem"])
async def test_a_kill_after_a_step_pauses_again_after_exactly_one_tool_round(
    tmp_path: Path, tool_name: str
) -> None:
    room = tmp_path / "room"
    first = await paused_at(room, "call", f"go {tool_name} 1")
    [held] = first.args["calls"]
    assert asked(room) == 1
    run_and_kill(
        room, f"step-{tool_name}", "stepped", lambda: executions(room)[held["call_id"]] == 1
    )
    assert room_rows(room, "SELECT status FROM tool_calls WHERE id = ?", held["call_id"]) == [
        ("running",)]  # fmt: skip
    async with open_room(room) as rt:
        await restarted(rt)
        if tool_name == "op":  # its outcome is unknown: the operator says it ran
            [review] = await rt.pending()
            assert (review.call_id, review.reason) == (held["call_id"], REVIEW_REASON)
            decision = Decision.with_result(review.call_id, "op 1 done (seen in its log)")
            assert await rt.decide(decision) == "queued"
            await until(lambda: the_pause_or_none(rt), "the pause after the step's round")
        else:  # idempotent: run again at the restart
            assert executions(room)[held["call_id"]] == 2
        pause = await the_pause(rt)
        # one tool round after the pause it stepped from: at that round's results, the model
        # not asked meanwhile, no other call made
        assert (pause.args["at"], pause.args["round"]) == ("result", first.args["round"])
        assert [c["call_id"] for c in pause.args["calls"]] == [held["call_id"]]
        assert asked(room) == 1
        assert pause.reason.endswith(": a step")
        out = await go(rt, Decision.approve(pause.call_id, seen=pause.args), pause.turn_id)
    assert (out.status, out.reason) == ("done", "natural"), out
    assert asked(room) == 2
    assert statuses(room) == Counter({f"{tool_name}:succeeded": 1, "breakpoint:succeeded": 2})


async def the_pause_or_none(rt: Runtime) -> PendingCall | None:
    paused = [p for p in await rt.pending() if p.awaiting == "breakpoint"]
    return paused[0] if paused else None


async def test_a_kill_during_a_steps_inference_pauses_again_after_exactly_one_inference(
    tmp_path: Path,
) -> None:
    room = tmp_path / "room"
    first = await paused_at(room, "inference", "go op 1")
    assert first.args["round"] == 0 and asked(room) == 0
    run_and_kill(room, "step-model", "stepped", lambda: asked(room) == 1)
    async with open_room(room) as rt:
        await restarted(rt)  # the turn, left running, is resumed: its inference again
        pause = await the_pause(rt)
        assert (pause.args["at"], pause.args["round"]) == ("call", 1)
        assert [c["args"] for c in pause.args["calls"]] == [{"n": 1}]
        assert asked(room) == 2 and sum(executions(room).values()) == 0
        out = await go(rt, Decision.approve(pause.call_id, seen=pause.args), pause.turn_id)
    assert (out.status, out.text) == ("done", "done: op 1 done")
    assert asked(room) == 3 and sum(executions(room).values()) == 1
