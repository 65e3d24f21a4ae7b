"""A decision recorded by a process that died before applying it (issue 13, item 6).

A full runtime started afterwards applies it at once; an operator who decides the call
again first wins, and the stale decision is recorded as superseded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.helpers import room_rows
from tests.wait import PATIENCE, until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]
ROOT = Path(__file__).resolve().parents[1]

# Records a decision durably, then dies (SIGKILL) before the runtime applies it.
DIE_AFTER_RECORDING = """
import os, signal, sys
import anyio
from engine.domain.decisions import Decision
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.helpers import room_rows
from engine.services.supervisor import TurnSupervisor

def die(self, turn_id, thread_id=""):
    os.kill(os.getpid(), signal.SIGKILL)

TurnSupervisor.wake = die  # the decision is committed; the turn never hears of it

async def main(room, call_id, action):
    async with Runtime.open(room, kind="decide", resume="none",
                            provider=OfflineModel(delay=0)) as rt:
        decision = (Decision.approve(call_id, id="d_stale") if action == "approve"
                    else Decision.cancel(call_id, "stale no", id="d_stale"))
        await rt.decide(decision)

anyio.run(main, *sys.argv[1:])
"""


async def waiting_call(room: Path) -> tuple[str, str]:
    async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
        message = Message(origin="invoke", sender="t", thread_id="t:1", text="run `echo ran`")
        outcome = await rt.run_turn(message)
        assert outcome.status == "waiting"
        return outcome.turn_id, outcome.pending[0]["call_id"]


def decide_and_die(room: Path, call_id: str, action: str) -> None:
    proc = subprocess.run([sys.executable, "-c", DIE_AFTER_RECORDING, str(room), call_id, action],
                          cwd=ROOT, capture_output=True, text=True, timeout=PATIENCE)  # fmt: skip
    assert proc.returncode == -9, proc.stderr


def decisions(room: Path) -> dict[str, tuple[str, str | None]]:
    return {r[0]: (r[1], r[2]) for r in room_rows(room, "SELECT id, status, note FROM decisions")}


@pytest.mark.parametrize(("stale", "later"), [("approve", "cancel"), ("cancel", "approve")])
async def test_a_later_decision_overrides_one_a_dead_process_left(tmp_path, stale, later):
    room = tmp_path / "room"
    turn_id, call_id = await waiting_call(room)
    decide_and_die(room, call_id, stale)
    assert decisions(room) == {"d_stale": ("queued", None)}
    # the operator decides the other way, as `agentdeck decide` on a free room does
    async with Runtime.open(room, kind="decide", resume="none",
                            provider=OfflineModel(delay=0)) as rt:  # fmt: skip
        decision = (Decision.approve(call_id, id="d_later") if later == "approve"
                    else Decision.cancel(call_id, "no after all", id="d_later"))  # fmt: skip
        assert await rt.decide(decision) == "queued"
        outcome = await rt.wait_turn(turn_id)
    call = {c["call_id"]: c["status"] for c in outcome.calls}[call_id]
    assert call == ("succeeded" if later == "approve" else "cancelled")
    assert decisions(room) == {"d_stale": ("superseded", "superseded by d_later"),
                               "d_later": ("applied", None)}  # fmt: skip


async def test_a_full_runtime_applies_a_stale_decision_at_start(tmp_path):
    room = tmp_path / "room"
    turn_id, call_id = await waiting_call(room)
    decide_and_die(room, call_id, "approve")
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt:
        outcome = await until(lambda: rt.wait_turn(turn_id),
                              "the turn done, woken at start without anyone deciding again",
                              ok=lambda o: o.status == "done")  # fmt: skip
    assert {c["call_id"]: c["status"] for c in outcome.calls}[call_id] == "succeeded"
    assert decisions(room) == {"d_stale": ("applied", None)}


async def test_a_decision_leaves_queued_once_and_an_applied_one_stays_applied(
    tmp_path: Path,
) -> None:
    """Found by the cluster's process test: a worker that held a decision as queued (loaded
    before another applied it) recorded it as a duplicate when its call ended, so the audit
    said an approval that ran was never applied. Each status but `queued` is final."""
    from engine.store import decisions as recorded

    room = tmp_path / "room"
    turn_id, call_id = await waiting_call(room)
    async with Runtime.open(room, kind="test", resume="none", provider=OfflineModel(delay=0)) as rt:
        for n in range(4):
            await rt.store.write([recorded.recorded(Decision.approve(call_id, id=f"d_{n}"),
                                                    "queued", 1.0)])  # fmt: skip
        await rt.store.write([recorded.applied("d_0", 2.0), recorded.refused("d_1", "no", 2.0),
                              recorded.superseded("d_2", "old", 2.0)])  # fmt: skip
        late = [recorded.duplicate(f"d_{n}", "too late") for n in range(4)]
        await rt.store.write([*late, recorded.applied("d_1", 3.0), recorded.refused("d_0", "x", 3.0),
                              recorded.superseded("d_1", "x", 3.0)])  # fmt: skip
    rows = dict(room_rows(room, "SELECT id, status FROM decisions WHERE call_id = ? ORDER BY id",
                          call_id))  # fmt: skip
    assert rows == {"d_0": "applied", "d_1": "refused", "d_2": "superseded", "d_3": "duplicate"}
