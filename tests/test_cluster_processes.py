"""Process tests of a cluster: two and three worker processes (tests/cluster_worker.py) on
one PostgreSQL database, driven through their APIs as an operator's programs would, and
killed with SIGKILL mid-turn, mid-tool-call and mid-decision.

What must hold: turns spread over the workers; a dead worker's threads finish on the others
once its leases expire (waited for on the database's state, never timed); what
a worker acknowledged (a turn seen done, a decision answered) is never lost; a call whose
result was committed never runs again; a call that was not idempotent and was running when
its worker died is surfaced for review (outcome unknown), not run again.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from engine.api.client import ApiError
from engine.api.models import SubmitBody
from engine.api.remote import RemoteClient
from engine.domain.decisions import Decision, PendingCall
from engine.lifecycle.call import REVIEW_REASON
from engine.room import Room
from tests.cluster_worker import HANG, LOG, ONCE
from tests.crash_worker import APPROVAL_TOOL, IDEMPOTENT, IDEMPOTENT_TOOL, PLAIN_TOOL
from tests.wait import PATIENCE, until

# Three worker processes a test, killed and restarted: half a minute each on a loaded machine.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(6 * PATIENCE)]
ROOT = Path(__file__).resolve().parent.parent
LEASE = 1.5  # seconds: a dead worker's threads move after this


@dataclass
class Worker:
    """One worker process, its room and a client of its API."""

    name: str
    room: Path
    proc: subprocess.Popen[str]
    run_id: str
    client: RemoteClient


@dataclass
class Cluster:
    """The worker processes of one test, what they were told is durable, and the rows."""

    base: Path
    url: str
    workers: dict[str, Worker] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)  # run id -> worker name
    done: set[str] = field(default_factory=set)  # turns a worker answered `done`
    decided: set[str] = field(default_factory=set)  # decision ids a worker answered
    submitted: set[str] = field(default_factory=set)  # turn ids a worker answered

    def start(self, *names: str) -> list[Worker]:
        """Start workers (a name used before: the same worker again, on its room)."""
        procs = {}
        for name in names:
            room = self.base / name
            err = (self.base / f"{name}.stderr").open("a")
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.cluster_worker", str(room), self.url, name,
                 str(LEASE)],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
            )  # fmt: skip
            err.close()
        for name, proc in procs.items():
            assert proc.stdout is not None
            line = proc.stdout.readline().split()
            if line[:1] != ["ready"]:
                proc.kill()
                proc.wait()
                proc.stdout.close()
                pytest.fail(f"worker {name} did not start: {self.stderr(name)[-2000:]}")
            room = self.base / name
            self.workers[name] = Worker(name, room, proc, line[1], RemoteClient(Room.at(room)))
            self.runs[line[1]] = name
        return [self.workers[n] for n in names]

    async def kill(self, name: str) -> None:
        worker = self.workers.pop(name)
        os.kill(worker.proc.pid, signal.SIGKILL)
        assert worker.proc.wait() == -signal.SIGKILL
        await self._closed(worker)

    async def _closed(self, worker: Worker) -> None:
        assert worker.proc.stdout is not None
        worker.proc.stdout.close()
        await worker.client.aclose()

    async def close(self) -> None:
        for name in list(self.workers):
            worker = self.workers.pop(name)
            worker.proc.kill()
            worker.proc.wait()
            await self._closed(worker)
        for err in self.base.glob("*.stderr"):
            assert "Traceback" not in err.read_text(), err.read_text()[-3000:]

    def stderr(self, name: str) -> str:
        return (self.base / f"{name}.stderr").read_text()

    def any(self, rng: random.Random, but: str | None = None) -> Worker:
        names = sorted(n for n in self.workers if n != but) or sorted(self.workers)
        return self.workers[rng.choice(names)]

    # -- what the cluster did ---------------------------------------------------------------

    def executions(self) -> list[tuple[str, str]]:
        """(call id, worker) per execution, in order."""
        log = self.base / LOG
        return [tuple(line.split()) for line in log.read_text().splitlines()] if (
            log.exists()) else []  # type: ignore[misc]  # fmt: skip

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url) as conn:
            return conn.execute(sql, params).fetchall()

    def check(self, where: str) -> None:
        """What must hold at any moment: nothing acknowledged lost, nothing run twice that
        must not be."""
        turns = dict(self.rows("SELECT id, status FROM turns"))
        lost = {t for t in self.done if turns.get(t) != "done"}
        assert not lost, f"turns acknowledged done, then not done {where}: {lost}"
        requests = {r[0] for r in self.rows("SELECT id FROM turn_requests")}
        assert not self.submitted - requests, f"acknowledged requests lost {where}"
        decisions = {r[0] for r in self.rows("SELECT id FROM decisions")}
        assert not self.decided - decisions, f"acknowledged decisions lost {where}"
        calls = {r[0]: (r[1], r[2]) for r in self.rows("SELECT id, tool, status FROM tool_calls")}
        for call_id, n in Counter(c for c, _ in self.executions()).items():
            tool = calls.get(call_id, ("?", "?"))[0]
            assert n == 1 or (tool in IDEMPOTENT and n == 2), (
                f"{tool} call {call_id} ran {n} times {where}, on "
                f"{[w for c, w in self.executions() if c == call_id]}"
            )

    # -- driving ----------------------------------------------------------------------------

    async def submit(self, worker: Worker, thread: str, text: str) -> str:
        body = SubmitBody(origin="invoke", sender="driver", thread_id=thread, text=text)
        turn_id = (await worker.client.submit(body)).turn_id
        self.submitted.add(turn_id)
        return turn_id

    async def decide(self, worker: Worker, decision: Decision) -> str:
        status = (await worker.client.decide(decision)).status
        self.decided.add(decision.id)
        return status

    async def pending(self, rng: random.Random) -> list[PendingCall]:
        return await self.any(rng).client.pending()

    def turn(self, turn_id: str) -> str | None:
        found = self.rows("SELECT status FROM turns WHERE id = %s", turn_id)
        return found[0][0] if found else None


def left(cl: Cluster) -> str:
    """The open work and the leases, for a failure's message (`until`'s `seen`)."""
    return "\n".join(f"{what}: {cl.rows(sql)}" for what, sql in (
        ("open turns", "SELECT id, thread_id, status, run_id FROM turns WHERE status != 'done'"),
        ("queued requests", "SELECT id, thread_id FROM turn_requests WHERE status = 'queued'"),
        ("open calls", "SELECT id, tool, status, suspend_reason FROM tool_calls"
                       " WHERE status NOT IN ('succeeded', 'failed', 'cancelled')"),
        ("queued decisions", "SELECT id, call_id FROM decisions WHERE status = 'queued'"),
        ("leases", "SELECT thread_id, worker_id, token, expires_at - extract(epoch FROM now())"
                   " FROM thread_leases WHERE worker_id IS NOT NULL"),
        ("workers", "SELECT id, pid, state FROM workers"),
    ))  # fmt: skip


def decision_for(p: PendingCall) -> Decision:
    """The driver approves an approval and fails what a dead worker left for review."""
    if p.reason == REVIEW_REASON:
        return Decision.fail(p.call_id, "lost with its worker", decided_by="driver")
    return Decision.approve(p.call_id, seen=p.args, decided_by="driver")


async def chatter(cl: Cluster, rng: random.Random, thread: str, rounds: int) -> None:
    """Turns on one thread, each submitted and awaited through a random worker; a worker
    dying under the client is not a failure (nothing was acknowledged)."""
    for i in range(rounds):
        try:
            turn_id = await cl.submit(cl.any(rng), thread, f"message {i}")
            while True:
                out = await cl.any(rng).client.outcome(turn_id, wait=2.0)
                if out.status == "done":
                    cl.done.add(turn_id)
                    break
        except ApiError:
            await anyio.sleep(0.1)  # load: a worker died under the client; the next goes on


async def decider(cl: Cluster, rng: random.Random, skip: Callable[[PendingCall], bool]) -> None:
    """Decide pending calls through a worker other than the one that listed them."""
    while True:
        await anyio.sleep(rng.uniform(0.01, 0.05))  # load: the decider's pace, random
        try:
            lister = cl.any(rng)
            for p in await lister.client.pending():
                if not skip(p):
                    await cl.decide(cl.any(rng, but=lister.name), decision_for(p))
        except ApiError:
            pass


async def open_work(cl: Cluster, rng: random.Random) -> dict[str, int]:
    """Decide what waits for a decision, then count the turns not done and the requests
    queued."""
    try:
        for p in await cl.pending(rng):
            await cl.decide(cl.any(rng), decision_for(p))
    except ApiError:
        pass
    return {
        "open turns": cl.rows("SELECT count(*) FROM turns WHERE status != 'done'")[0][0],
        "queued requests": cl.rows("SELECT count(*) FROM turn_requests WHERE status = 'queued'")[0][0],
    }  # fmt: skip


async def settle(cl: Cluster, rng: random.Random) -> None:
    """Until every turn is done and no request is queued, deciding what waits."""
    await until(lambda: open_work(cl, rng), "every turn done and no request queued",
                ok=lambda work: not any(work.values()), within=2 * PATIENCE,
                seen=lambda: left(cl))  # fmt: skip


def check_settled(cl: Cluster, where: str) -> None:
    cl.check(where)
    ran = Counter(c for c, _ in cl.executions())
    for call_id, tool, status in cl.rows("SELECT id, tool, status FROM tool_calls"):
        assert status in ("succeeded", "failed", "cancelled"), f"{call_id} {status} {where}"
        if status == "succeeded":
            assert ran[call_id] >= 1, f"{tool} {call_id} succeeded but never ran {where}"
    errors = cl.rows("SELECT id FROM turns WHERE reason = 'error'")
    assert not errors, f"turns ended with a runtime error {where}: {errors}"


def quiet_cancelled_connects() -> None:
    """Cancelled clients mid-connect make asyncio report InvalidStateError (see
    tests/soak.py's `_quiet_cancelled_connects`); noise, passed over. Anything else goes to
    the handler that was there (the test runner's)."""
    import asyncio

    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc, where = context.get("exception"), str(context.get("handle", ""))
        if isinstance(exc, asyncio.InvalidStateError) and "Future.set_result" in where:
            return
        if before is not None:
            before(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handle)


@pytest.fixture
async def cluster(tmp_path: Path, pg_url: str):  # noqa: ANN201
    quiet_cancelled_connects()
    cl = Cluster(tmp_path, pg_url)
    try:
        yield cl
    finally:
        await cl.close()


async def test_turns_spread_over_three_workers_and_decisions_go_through_any(
    cluster: Cluster,
) -> None:
    """Turns submitted through three workers run on all three; calls are decided through
    workers other than the one listing them; each call runs once."""
    cl, rng = cluster, random.Random(1)
    cl.start("w0", "w1", "w2")
    with anyio.fail_after(3 * PATIENCE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(decider, cl, rng, lambda p: False)
            async with anyio.create_task_group() as chats:
                for k in range(9):
                    chats.start_soon(chatter, cl, random.Random(k), f"t{k}", 3)
            tg.cancel_scope.cancel()
    await settle(cl, rng)
    check_settled(cl, "(spread)")
    assert len(cl.done) == 27
    opened_by = Counter(cl.runs[r] for (r,) in cl.rows("SELECT run_id FROM turns"))
    assert set(opened_by) == {"w0", "w1", "w2"}, opened_by
    stepped = cl.rows("SELECT DISTINCT run_id FROM steps")
    assert {cl.runs[r] for (r,) in stepped} == {"w0", "w1", "w2"}


async def hung_call(cl: Cluster, tool: str, thread: str) -> tuple[str, str, str]:
    """Submit `hang <tool>` (approving it through another worker), until its call ran:
    (turn id, call id, the worker running it)."""
    rng = random.Random(thread)
    turn_id = await cl.submit(cl.any(rng), thread, HANG + tool)
    if tool == APPROVAL_TOOL:

        async def asked() -> PendingCall | None:
            return next((p for p in await cl.pending(rng) if p.turn_id == turn_id), None)

        p = await until(asked, f"{thread}'s approval pending", seen=lambda: left(cl))
        await cl.decide(cl.any(rng), decision_for(p))
    (call_id,) = await until(lambda: _calls(cl, turn_id), f"{thread}'s call recorded",
                             seen=lambda: left(cl))  # fmt: skip

    def running() -> str | None:
        return next((w for c, w in cl.executions() if c == call_id), None)

    return turn_id, call_id, await until(running, f"{call_id} ran", seen=lambda: left(cl))


def _calls(cl: Cluster, turn_id: str) -> list[str]:
    return [r[0] for r in cl.rows("SELECT id FROM tool_calls WHERE turn_id = %s", turn_id)]


async def test_a_killed_workers_threads_finish_on_the_others(cluster: Cluster) -> None:
    """Three workers under load; one at a time is killed mid-tool-call (a plain call, an
    idempotent one, an approved one: each hangs once it ran) and restarted: its threads
    finish on the others, the plain and the approved call are surfaced for review and not
    run again, the idempotent one runs again once; nothing acknowledged is lost."""
    cl, rng = cluster, random.Random(2)
    cl.start("w0", "w1", "w2")
    mine = lambda p: p.thread_id.startswith("h-")  # noqa: E731  (decided by the scenario)
    async with anyio.create_task_group() as tg:
        tg.start_soon(decider, cl, random.Random(3), mine)
        for k in range(6):
            tg.start_soon(chatter, cl, random.Random(10 + k), f"bg{k}", 1000)
        for tool in (PLAIN_TOOL, IDEMPOTENT_TOOL, APPROVAL_TOOL):
            thread = f"h-{tool}"
            turn_id, call_id, victim = await hung_call(cl, tool, thread)
            await cl.kill(victim)  # mid-turn, mid-tool-call: its other threads' turns too
            cl.check(f"(right after killing {victim} running {tool})")

            def moved(call_id: str = call_id, tool: str = tool) -> str | None:
                status = cl.rows("SELECT status, suspend_reason FROM tool_calls WHERE id = %s",
                                 call_id)[0]  # fmt: skip
                if tool in IDEMPOTENT:
                    return "ran again" if status[0] == "succeeded" else None
                if status == ("suspended", REVIEW_REASON):
                    return "reviewed"
                return None

            seen = await until(moved, f"{tool} call {call_id} taken over", seen=lambda: left(cl))
            if seen == "reviewed":
                p = next(p for p in await cl.pending(rng) if p.call_id == call_id)
                await cl.decide(cl.any(rng), decision_for(p))
            out = await until(lambda t=turn_id: cl.turn(t), f"turn {turn_id} done",
                              ok=lambda status: status == "done", seen=lambda: left(cl))  # fmt: skip
            assert out == "done"
            ran = [w for c, w in cl.executions() if c == call_id]
            assert ran[0] == victim and (len(ran) == 1 or tool in IDEMPOTENT), ran
            if tool in IDEMPOTENT:
                assert len(ran) == 2 and ran[1] != victim, ran
            cl.check(f"(after {tool}'s takeover from {victim})")
            cl.start(victim)  # the same worker again, on its room
        tg.cancel_scope.cancel()
    await settle(cl, rng)
    check_settled(cl, "(kills mid-tool-call)")
    failed = cl.rows("SELECT tool, error FROM tool_calls WHERE thread_id LIKE 'h-%%'"
                     " AND status = 'failed'")  # fmt: skip
    assert sorted(t for t, _ in failed) == sorted([APPROVAL_TOOL, PLAIN_TOOL])
    assert all("outcome unknown" in (e or "") for _, e in failed), failed
    assert len(cl.done) > 3


async def test_a_decision_survives_the_worker_it_went_through(cluster: Cluster) -> None:
    """Two workers: calls waiting for approval are approved through one worker, killed at
    once (before, while or after it applies the decision): every decision it answered is
    applied by the other, each call runs at most once (a call it was running when it died
    is reviewed instead)."""
    cl, rng = cluster, random.Random(4)
    cl.start("w0", "w1")
    for round_ in range(3):
        turns = [await cl.submit(cl.any(rng), f"d{round_}-{k}", ONCE + APPROVAL_TOOL)
                 for k in range(4)]  # fmt: skip

        async def asked(turns: list[str] = turns) -> list[PendingCall]:
            return [p for p in await cl.pending(rng) if p.turn_id in turns]

        calls = await until(asked, "approvals pending", seen=lambda: left(cl),
                            ok=lambda got, turns=turns: len(got) == len(turns))  # fmt: skip
        through, ids = cl.any(rng), []
        for p in calls:
            ids.append((decision := decision_for(p)).id)
            await cl.decide(through, decision)
        await anyio.sleep(rng.uniform(0.0, 0.05))  # load: the kill's moment, random
        await cl.kill(through.name)  # mid-decision
        cl.check(f"(right after killing {through.name}, round {round_})")
        await settle(cl, rng)
        check_settled(cl, f"(round {round_})")
        for p in calls:  # ran once (or left for review), decided by one decision
            (status,) = cl.rows("SELECT status FROM tool_calls WHERE id = %s", p.call_id)[0]
            assert status in ("succeeded", "failed"), (p.call_id, status)
            made = cl.rows("SELECT id, action, status, decided_by FROM decisions"
                           " WHERE call_id = %s ORDER BY created_at", p.call_id)  # fmt: skip
            applied = [d for d in made if d[2] == "applied"]
            assert len(applied) == (2 if status == "failed" else 1), (p.call_id, status, made)
        ours = cl.rows("SELECT status FROM decisions WHERE id = ANY(%s)", [ids])
        assert {s for (s,) in ours} <= {"applied", "duplicate", "superseded"}, ours
        cl.start(through.name)
