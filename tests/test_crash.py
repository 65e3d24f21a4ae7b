"""The crash test: SIGKILL a busy runtime at random points, many times, on one room.

After each kill: execution.db passes `PRAGMA integrity_check`; nothing committed is lost
(turns seen `done` before the kill are still `done` after a restart); calls left
`running` wait for an operator's review (their outcome is unknown) unless their tool is
idempotent, and end `failed` when the review says so; waiting turns can still be decided; and no call ran twice unless its tool is idempotent and it was left
`running` by a crash. Executions are counted in ROOM/executions.log (see crash_worker.py).

The writer's own kill points (engine/store/writer.py, AGENTDECK_WRITER_KILL) make the
worker SIGKILL itself inside a group-commit batch: between two savepoints, before the
COMMIT, after it before the event loop is woken; what the worker was acknowledged
(ROOM/acked.log) must survive each.

CRASH_ITERATIONS (default 25) sets the number of random kills; CRASH_SEED fixes the random
choices (kill delays, worker seeds), not the timing.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from engine.domain.decisions import Decision
from engine.lifecycle.call import REVIEW_REASON
from engine.runtime import Runtime
from engine.store.writer import KILL_POINTS
from tests.crash_worker import (
    ACKED,
    APPROVAL_TOOL,
    IDEMPOTENT,
    LOG,
    PLAIN_TOOL,
    config_for,
    make_tools,
    random_calls,
)
from tests.helpers import on, room_rows
from tests.history_seed import fts_unsound, marks_unsound
from tests.scripted import ScriptedModel
from tests.wait import PATIENCE, until

ROOT = Path(__file__).resolve().parent.parent
ITERATIONS = int(os.environ.get("CRASH_ITERATIONS", "25"))
WRITER_ITERATIONS = 3  # per kill point of the writer's batch
# Known engine bug (see test_a_call_killed_mid_replay_does_not_run_again): a call the
# kill left `resuming` had already started its replay, but `running` was never committed,
# so the restart replays it again. Until that is fixed the crash test tolerates exactly
# one extra run of such calls; set this to False when the xfail below starts passing.
KNOWN_BUG_RESUMING_RERUNS = False


@dataclass
class Snapshot:
    """What execution.db holds, read without owning the room."""

    integrity: str
    turns: dict[str, tuple[str, str | None]]  # id -> (status, reason)
    calls: dict[str, tuple[str, str, str | None]]  # id -> (tool, status, error)
    requests: dict[str, str]  # turn request id -> status

    def done(self) -> set[str]:
        return self.turns_in("done")

    def turns_in(self, status: str) -> set[str]:
        return {t for t, (s, _) in self.turns.items() if s == status}

    def requests_in(self, status: str) -> set[str]:
        return {r for r, s in self.requests.items() if s == status}

    def calls_in(self, status: str) -> dict[str, str]:
        return {c: tool for c, (tool, s, _) in self.calls.items() if s == status}


def read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def done_turns(db: Path) -> set[str]:
    if not db.exists():
        return set()
    with closing(read_only(db)) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM turns WHERE status='done'")}


def snapshot(db: Path) -> Snapshot:
    """What the room of `db` holds (on PostgreSQL when the test runs its rooms there, whose
    pages the server checks itself)."""
    from tests import pg

    if pg.ROOMS is None:
        with closing(read_only(db)) as conn:
            integrity = "\n".join(r[0] for r in conn.execute("PRAGMA integrity_check"))
    else:
        integrity = "ok"
    room = db.parent
    turns = {r[0]: (r[1], r[2]) for r in room_rows(room, "SELECT id, status, reason FROM turns")}
    calls = {r[0]: (r[1], r[2], r[3])
             for r in room_rows(room, "SELECT id, tool, status, error FROM tool_calls")}  # fmt: skip
    requests = {r[0]: r[1] for r in room_rows(room, "SELECT id, status FROM turn_requests")}
    return Snapshot(integrity, turns, calls, requests)


def executions(room: Path) -> Counter[str]:
    log = room / LOG
    return Counter(log.read_text().split()) if log.exists() else Counter()


def kill_worker_at_random(room: Path, seed: int | str, delay: float, stderr_path: Path) -> set[str]:
    """Start the worker, let it run `delay` s, SIGKILL it; return the done turns seen before."""
    with (
        stderr_path.open("w") as err,
        subprocess.Popen(
            [sys.executable, "-m", "tests.crash_worker", str(room), str(seed)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
        ) as proc,
    ):  # fmt: skip
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.kill()
            proc.wait()
            pytest.fail(f"worker did not start (seed {seed}): {stderr_path.read_text()}")
        time.sleep(delay)  # load: the kill's moment, random
        before = done_turns(room / "execution.db")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    return before


async def decide_one(rt: Runtime, where: str) -> dict[str, list[str]]:
    """The turns running and the calls waiting in a waiting turn, as they were; the first
    of those calls approved (marked failed if a crash left it for review), and its turn
    seen to go on."""
    running = sorted(rt.live)  # read first: if nothing runs now, `pending` is final
    waiting = [
        p for p in await rt.pending()
        if (await rt.outcome(p.turn_id)).status == "waiting"
    ]  # fmt: skip
    if waiting:
        call = waiting[0]
        if call.reason == REVIEW_REASON:
            decision = Decision.fail(call.call_id, "lost", decided_by="crash-test")
        else:
            assert call.tool == APPROVAL_TOOL
            decision = Decision.approve(call.call_id, decided_by="crash-test")
        await rt.decide(decision)
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(call.turn_id)  # the waiting turn is decidable:
        assert out.status in ("done", "waiting"), f"{call.turn_id} {where}: {out}"
        assert call.call_id not in {p["call_id"] for p in out.pending}, where
    return {"running turns": running, "waiting calls": [p.call_id for p in waiting]}


async def settle(rt: Runtime, where: str) -> None:
    """Until no turn runs or waits: approve each pending call (mark failed each a crash
    left for review), let every turn finish."""
    await until(lambda: decide_one(rt, where), f"no turn running or waiting {where}",
                ok=lambda left: not any(left.values()))  # fmt: skip
    stray = [(p, await rt.outcome(p.turn_id)) for p in await rt.pending()]
    assert not stray, f"suspended calls in no waiting turn {where}: {stray}"


@dataclass
class Kills:
    """What the kills of one room left so far, across its iterations."""

    left_running: Counter[str] = field(default_factory=Counter)  # call id -> kills
    left_resuming: Counter[str] = field(default_factory=Counter)
    tools_of: dict[str, str] = field(default_factory=dict)
    with_work: int = 0  # kills that landed while a tool call was open


def acknowledged(room: Path) -> tuple[set[str], set[str]]:
    """The turns the worker saw done and the decisions it was answered (crash_worker.py)."""
    lines = (room / ACKED).read_text().splitlines() if (room / ACKED).exists() else []
    pairs = [line.split(" ", 1) for line in lines]
    return {x for k, x in pairs if k == "done"}, {x for k, x in pairs if k == "decision"}


async def recover_and_check(
    room: Path, seed: int, done_before: set[str], where: str, kills: Kills
) -> None:
    """After a kill: check the database as it was left, restart, settle, check again."""
    db = room / "execution.db"
    crashed = snapshot(db)
    assert crashed.integrity == "ok", f"integrity {where}: {crashed.integrity}"
    lost = done_before - crashed.done()
    assert not lost, f"turns done before the kill are not done after it {where}: {lost}"
    acked_done, acked_decisions = acknowledged(room)
    lost = acked_done - crashed.done()
    assert not lost, f"turns acknowledged done are not done after the kill {where}: {lost}"
    with closing(read_only(db)) as conn:
        recorded = {r[0] for r in conn.execute("SELECT id FROM decisions")}
    assert not acked_decisions - recorded, f"acknowledged decisions lost {where}"
    running = crashed.calls_in("running")
    resuming = crashed.calls_in("resuming")
    kills.left_running.update(running.keys())
    kills.left_resuming.update(resuming.keys())
    kills.with_work += bool(running or resuming)
    kills.tools_of.update({c: tool for c, (tool, _, _) in crashed.calls.items()})

    # Restart: resume interrupted turns, then decide every waiting call.
    async with Runtime.open(
        room, kind="run", provider=ScriptedModel(random_calls(random.Random(seed))),
        tools=make_tools(), config=config_for(seed), resume="all",
    ) as rt:  # fmt: skip
        with anyio.fail_after(PATIENCE):
            for turn_id in crashed.turns_in("running"):
                if (handle := rt.live.get(turn_id)) is not None:
                    await handle.done.wait()
        for call_id, tool in running.items():
            row = await on(rt.store).fetchone(
                "SELECT status, suspend_reason FROM tool_calls WHERE id=?", (call_id,)
            )
            assert row is not None
            if tool in IDEMPOTENT:
                assert row["status"] == "succeeded", f"{call_id} re-run {where}: {dict(row)}"
            else:
                assert row["status"] == "suspended", f"{call_id} not reviewed {where}"
                assert row["suspend_reason"] == REVIEW_REASON, f"{call_id} {where}"
        for call_id in resuming:
            status = await on(rt.store).scalar(
                "SELECT status FROM tool_calls WHERE id=?", (call_id,)
            )
            assert status in ("succeeded", "failed", "cancelled"), f"{call_id} {where}"
        await settle(rt, where)

    # After the restart and its close: everything committed is still there.
    after = snapshot(db)
    assert after.integrity == "ok", where
    assert fts_unsound(db) == [], where
    assert marks_unsound(db) == [], where
    assert crashed.done() <= after.done(), f"done turns lost {where}"
    assert done_before <= after.done(), where
    errors = {t: r for t, (s, r) in after.turns.items() if s == "done" and r == "error"}
    assert not errors, f"turns ended with a runtime error {where}: {errors}"
    kills.tools_of.update({c: tool for c, (tool, _, _) in after.calls.items()})
    assert not after.turns_in("running"), f"turns still running after recovery {where}"
    assert not after.turns_in("waiting"), f"turns still waiting after deciding {where}"
    for request in crashed.requests_in("queued"):  # accepted before the kill: it ran
        assert after.requests.get(request) == "admitted", f"request {request} {where}"
        assert after.turns[request][0] == "done", f"request {request} {where}"

    # No call ran twice (idempotent ones only as often as crashes left them running),
    # and every call committed as succeeded did run.
    ran = executions(room)
    for call_id, count in ran.items():
        tool = kills.tools_of.get(call_id)
        assert tool is not None, f"{call_id} ran but was never committed {where}"
        limit = 1 + kills.left_running[call_id] if tool in IDEMPOTENT else 1
        if KNOWN_BUG_RESUMING_RERUNS:
            limit += kills.left_resuming[call_id]
        assert count <= limit, (
            f"{tool} call {call_id} ran {count} times {where}; left running "
            f"{kills.left_running[call_id]}, left resuming {kills.left_resuming[call_id]} times"
        )
    for call_id, (tool, status, _) in after.calls.items():
        if status == "succeeded":
            assert ran[call_id] >= 1, f"{tool} {call_id} succeeded but never ran {where}"


@pytest.mark.anyio
@pytest.mark.timeout(10 * PATIENCE)  # 25 kills and recoveries: a minute on a loaded machine
async def test_sigkill_at_random_points_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path,
) -> None:
    base_seed = int(os.environ.get("CRASH_SEED", random.randrange(2**31)))
    rng = random.Random(base_seed)
    room = tmp_path / "room"
    kills = Kills()
    for i in range(ITERATIONS):
        seed = base_seed + i
        where = f"(CRASH_SEED={base_seed}, iteration {i}, worker seed {seed})"
        stderr_path = tmp_path / f"worker-{i}.stderr"
        done_before = kill_worker_at_random(room, seed, rng.uniform(0.05, 0.6), stderr_path)
        assert "Traceback" not in stderr_path.read_text(), f"worker failed {where}"
        await recover_and_check(room, seed, done_before, where, kills)
    assert kills.with_work, "no kill ever landed while a tool call was open"
    assert PLAIN_TOOL in kills.tools_of.values()


def writer_kills_itself(room: Path, seed: int, plan: str, stderr_path: Path) -> None:
    """Run the worker with AGENTDECK_WRITER_KILL=`plan` until its writer SIGKILLs it."""
    env = {**os.environ, "AGENTDECK_WRITER_KILL": plan}
    with (
        stderr_path.open("w") as err,
        subprocess.Popen(
            [sys.executable, "-m", "tests.crash_worker", str(room), str(seed)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True, env=env,
        ) as proc,
    ):  # fmt: skip
        try:
            code = proc.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"the writer never reached {plan} (seed {seed})")
    assert code == -signal.SIGKILL, f"worker exited {code}: {stderr_path.read_text()}"


@pytest.mark.anyio
@pytest.mark.parametrize("point", KILL_POINTS)
async def test_sigkill_inside_the_writers_batch_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path, point: str
) -> None:
    """The writer kills its own process between two savepoints of a batch, before its
    COMMIT, or after the COMMIT before the event loop hears of it: nothing acknowledged is
    lost (acked.log), nothing runs twice."""
    base_seed = int(os.environ.get("CRASH_SEED", random.randrange(2**31)))
    rng = random.Random(base_seed)
    room = tmp_path / "room"
    kills = Kills()
    for i in range(WRITER_ITERATIONS):
        seed = base_seed + i
        plan = f"{point}:{rng.randint(1, 40)}"
        where = f"(CRASH_SEED={base_seed}, iteration {i}, worker seed {seed}, kill {plan})"
        stderr_path = tmp_path / f"worker-{i}.stderr"
        writer_kills_itself(room, seed, plan, stderr_path)
        assert "Traceback" not in stderr_path.read_text(), f"worker failed {where}"
        await recover_and_check(room, seed, set(), where, kills)
