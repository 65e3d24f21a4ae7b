"""Several runtimes as workers of one cluster (engine/cluster/member.py), in one process:
each has a room of its own and shares one PostgreSQL database with the others."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.cluster import tasks
from engine.config import ClusterConfig, Config, StoreConfig
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.runtime import Runtime
from engine.store import StoreError
from engine.tools import tool
from tests.helpers import msg, on
from tests.scripted import Reply, ScriptedModel, add, after_tools, first_then, shell
from tests.wait import PATIENCE, until

pytestmark = pytest.mark.anyio


def cluster_config(url: str, name: str, lease: float = 2.0) -> Config:
    return Config(store=StoreConfig(url=url),
                  cluster=ClusterConfig(enabled=True, worker=name, lease_seconds=lease))  # fmt: skip


def answer(request) -> Reply:  # noqa: ANN001
    if after_tools(request.messages):
        return Reply(text="done")
    return Reply(text="no tools")


@asynccontextmanager
async def workers(
    tmp_path: Path, url: str, n: int, script=answer, **kw
) -> AsyncIterator[list[Runtime]]:  # noqa: ANN001, ANN003
    async with AsyncExitStack() as stack:
        rts = []
        for i in range(n):
            rt = await stack.enter_async_context(Runtime.open(
                tmp_path / f"w{i}", kind="run", provider=ScriptedModel(script), tools=[add, shell],
                config=cluster_config(url, f"w{i}", **kw)))  # fmt: skip
            rts.append(rt)
        yield rts


async def waiting_call(a: Runtime, b: Runtime, thread: str = "x") -> tuple[Any, str, dict]:
    """Submit "run it" on `thread` through worker `a` (whose script asks for a shell call)
    and wait until its call waits; the handle, the call's id and its arguments as worker
    `b` reads them from the shared store."""
    handle = await a.submit(msg("run it", thread=thread))
    outcome = await a.wait_turn(handle.turn_id)
    assert outcome.status == "waiting"
    call_id = outcome.pending[0]["call_id"]
    row = await on(b.store).fetchone("SELECT args FROM tool_calls WHERE id = ?", (call_id,))
    return handle, call_id, json.loads(row[0])


async def test_turns_submitted_to_one_worker_spread_and_each_runs_once(tmp_path, pg_url):
    async with workers(tmp_path, pg_url, 2) as (a, b):
        handles = [await a.submit(msg(f"hello {i}", thread=f"t{i}")) for i in range(12)]
        for h in handles:
            outcome = await a.wait_turn(h.turn_id)
            assert outcome.status == "done"
        rows = await on(a.store).fetchall(
            "SELECT t.thread_id, count(*), min(r.kind) FROM turns t JOIN runs r ON r.id = t.run_id"
            " GROUP BY t.thread_id")  # fmt: skip
        assert len(rows) == 12 and all(r[1] == 1 for r in rows)
        runs = await on(a.store).fetchall("SELECT DISTINCT run_id FROM turns")
        assert {r[0] for r in runs} <= {a.run_id, b.run_id}


async def test_a_decision_through_another_worker_resumes_the_call(tmp_path, pg_url):
    script = first_then([("shell", {"command": "echo hi"})])
    async with workers(tmp_path, pg_url, 2, script=script) as (a, b):
        handle, call_id, args = await waiting_call(a, b)
        assert await b.decide(Decision.approve(call_id, args=args)) == "queued"
        done = await b.wait_turn(handle.turn_id)
        assert done.status == "done"
        ran = await on(a.store).fetchall("SELECT status, result FROM tool_calls WHERE turn_id = ?",
                                     (handle.turn_id,))  # fmt: skip
        assert [r[0] for r in ran] == ["succeeded"]


async def test_a_one_off_runtime_is_refused_on_a_cluster(tmp_path, pg_url):
    with pytest.raises(StoreError, match="one-off"):
        async with Runtime.open(tmp_path / "x", provider=ScriptedModel(answer),
                                config=cluster_config(pg_url, "x"), resume="none"):  # fmt: skip
            pass


async def test_a_cluster_on_sqlite_is_refused(tmp_path):
    config = Config(cluster=ClusterConfig(enabled=True))
    with pytest.raises(StoreError, match="PostgreSQL"):
        async with Runtime.open(tmp_path / "x", provider=ScriptedModel(answer), config=config):
            pass


async def loops_holder(url: str) -> str | None:
    import psycopg

    from engine.store.pg.locks import advisory_lock_holder

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        return await advisory_lock_holder(conn, "loops")


async def test_the_runtime_loops_run_on_one_worker_and_move_when_it_stops(tmp_path, pg_url):
    from engine.loops.start import start_loops

    async def serve(name: str, stop: anyio.Event) -> None:
        async with Runtime.open(tmp_path / name, kind="run", provider=ScriptedModel(answer),
                                config=cluster_config(pg_url, name, lease=0.6)) as rt:  # fmt: skip
            start_loops(rt)
            await stop.wait()

    stops = {name: anyio.Event() for name in ("w0", "w1")}
    async with anyio.create_task_group() as tg:
        tg.start_soon(serve, "w0", stops["w0"])
        holder = await until(lambda: loops_holder(pg_url), "a worker holds the loops lock")
        assert holder == "agentdeck-loops w0"
        tg.start_soon(serve, "w1", stops["w1"])
        await anyio.sleep(0.5)  # w1 tries for the lock every 0.2 s: w0 keeps it
        assert await loops_holder(pg_url) == "agentdeck-loops w0"
        stops["w0"].set()  # w0 stops: its lock's session ends

        await until(lambda: loops_holder(pg_url), "the loops lock moves to w1",
                    ok=lambda holder: holder == "agentdeck-loops w1")  # fmt: skip
        stops["w1"].set()


async def test_a_worker_whose_lease_expired_writes_nothing_more_and_the_new_holder_recovers(
    tmp_path, pg_url, monkeypatch
):
    """A zombie: worker w0 stops renewing its leases (a long pause, a partition) while its
    call runs. w1 takes the thread over at the lease's expiry and recovers the turn as crash
    recovery does (the call's outcome unknown, for review); w0's call then returns, and its
    checkpoint is refused by the fence: the call's row stays w1's, the call ran once."""
    from engine.tools import tool

    ran: list[str] = []
    release = anyio.Event()

    @tool(name="slow")
    async def slow(n: int) -> str:
        """A side effect that outlives its worker's lease."""
        ran.append("slow")
        await release.wait()
        return "slow done"

    script = first_then([("slow", {"n": 1})])
    from engine.cluster import tasks

    beat, claims = tasks.beat_forever, tasks.claim_forever

    async def stalled(member) -> None:  # noqa: ANN001
        await anyio.sleep_forever()

    async with AsyncExitStack() as stack:
        monkeypatch.setattr(tasks, "beat_forever", stalled)  # w0 renews nothing
        monkeypatch.setattr(tasks, "claim_forever", stalled)  # and claims nothing
        a = await stack.enter_async_context(Runtime.open(
            tmp_path / "w0", kind="run", provider=ScriptedModel(script), tools=[slow],
            config=cluster_config(pg_url, "w0", lease=0.5)))  # fmt: skip
        handle = await a.submit(msg("go", thread="z"))

        async def running_call() -> list:
            return await on(a.store).fetchall(
                "SELECT id, status FROM tool_calls WHERE turn_id = ? AND status = 'running'",
                (handle.turn_id,))  # fmt: skip

        call_id = (await until(running_call, "w0's call runs"))[0][0]
        monkeypatch.setattr(tasks, "beat_forever", beat)
        monkeypatch.setattr(tasks, "claim_forever", claims)
        b = await stack.enter_async_context(Runtime.open(
            tmp_path / "w1", kind="run", provider=ScriptedModel(script), tools=[slow],
            config=cluster_config(pg_url, "w1", lease=0.5)))  # fmt: skip

        async def reviewed() -> list:
            return await on(b.store).fetchall(
                "SELECT status, suspend_reason FROM tool_calls WHERE id = ?"
                " AND status = 'suspended'", (call_id,))  # fmt: skip

        before = (await until(reviewed, "w1 recovers the call, suspended for review"))[0]
        release.set()  # w0's call returns; its checkpoint meets the fence

        await until(lambda: handle.turn_id not in a.live, "w0's fenced turn stops")
        after = await on(b.store).fetchall(
            "SELECT status, suspend_reason, result FROM tool_calls WHERE id = ?", (call_id,)
        )
        assert tuple(after[0][:2]) == tuple(before) and after[0][2] is None
        assert ran == ["slow"]
        lease = await on(b.store).fetchall(
            "SELECT worker_id FROM thread_leases WHERE thread_id='z'"
        )
        assert lease[0][0] in (None, "w1")


async def test_a_group_budget_holds_across_workers(tmp_path, pg_url):
    """Group `task` may run one turn at a time across the cluster: six tasks on six threads,
    submitted through both workers, never overlap, and all run."""
    from engine.config import GroupSettings
    from engine.tools import tool

    now, most = [0], [0]

    @tool(name="work")
    async def work(n: int) -> str:
        """Count how many run at once."""
        now[0] += 1
        most[0] = max(most[0], now[0])
        await anyio.sleep(0.05)  # held running a while, so two at once would overlap
        now[0] -= 1
        return "worked"

    script = first_then([("work", {"n": 1})])
    async with AsyncExitStack() as stack:
        rts = []
        for name in ("w0", "w1"):
            config = cluster_config(pg_url, name)
            config.groups["task"] = GroupSettings(max_running_turns=1)
            rts.append(await stack.enter_async_context(Runtime.open(
                tmp_path / name, kind="run", provider=ScriptedModel(script), tools=[work],
                config=config)))  # fmt: skip
        handles = []
        for i in range(6):
            m = Message(origin="task", sender="self", thread_id=f"k{i}", text=f"task {i}")
            handles.append(await rts[i % 2].submit(m))
        for h in handles:
            assert (await rts[0].wait_turn(h.turn_id)).status == "done"
        assert most[0] == 1


async def test_a_decision_through_a_worker_reads_running_until_the_turn_goes_on(tmp_path, pg_url):
    """`agentdeck decide` through a worker that does not run the turn: right after the
    decision is recorded the turn still reads `waiting` in the room, until the worker that
    takes its thread resumes it. The API must not say `waiting` then (the CLI stopped there
    and printed the call as still pending)."""
    from engine.api.local import LocalClient
    from engine.cli.common import settled

    script = first_then([("shell", {"command": "echo hi"})])
    async with workers(tmp_path, pg_url, 2, script=script) as (a, b):
        handle = await a.submit(msg("run it", thread="x"))
        call_id = (await a.wait_turn(handle.turn_id)).pending[0]["call_id"]
        row = await on(b.store).fetchone("SELECT args FROM tool_calls WHERE id = ?", (call_id,))
        async with b.coordinator._claim_lock, a.coordinator._claim_lock:  # nobody resumes it yet
            client = LocalClient(b)
            decided = await client.decide(Decision.approve(call_id, seen=json.loads(row[0])))
            assert decided.status == "queued"
            assert (await client.outcome(handle.turn_id)).status == "running"
        assert (await settled(client, handle.turn_id)).status == "done"


async def test_a_waiting_turn_holds_no_lease_even_with_requests_queued_behind_it(tmp_path, pg_url):
    """A thread whose turn waits for a decision is given back even with a request queued
    behind that turn (it cannot start before the decision): the decision, through any
    worker, then resumes the turn, and the queued request runs after it."""
    script = first_then([("shell", {"command": "echo hi"})])
    async with workers(tmp_path, pg_url, 2, script=script) as (a, b):
        first = await a.submit(msg("run it", thread="x"))
        call_id = (await a.wait_turn(first.turn_id)).pending[0]["call_id"]
        second = await b.submit(msg("and then", thread="x"))

        async def holders() -> list:
            return await on(a.store).fetchall(
                "SELECT worker_id FROM thread_leases WHERE thread_id = 'x'"
                " AND worker_id IS NOT NULL")  # fmt: skip

        await until(holders, "thread x's lease is given back", ok=lambda rows: not rows)
        row = await on(b.store).fetchone("SELECT args FROM tool_calls WHERE id = ?", (call_id,))
        await b.decide(Decision.approve(call_id, args=json.loads(row[0])))
        assert (await b.wait_turn(first.turn_id)).status == "done"
        assert (await a.wait_turn(second.turn_id)).status == "waiting"  # its own shell call


async def test_a_decision_another_worker_queued_ends_duplicate_when_its_call_ends(tmp_path, pg_url):
    """A decision recorded `queued` by another worker while the call it is for runs here,
    already decided (this worker never loads it) is marked duplicate when the call ends; it
    stayed `queued` forever (seen by the cluster soak)."""
    from engine.store import decisions as recorded
    from engine.tools import tool

    running, release = anyio.Event(), anyio.Event()

    @tool(name="gated", approval="always")
    async def gated(n: int) -> str:
        """Runs until the test lets it end."""
        running.set()
        await release.wait()
        return "done"

    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(Runtime.open(
            tmp_path / "w0", kind="run", provider=ScriptedModel(first_then([("gated", {"n": 1})])),
            tools=[gated], config=cluster_config(pg_url, "w0")))  # fmt: skip
        handle = await a.submit(msg("run it", thread="x"))
        call_id = (await a.wait_turn(handle.turn_id)).pending[0]["call_id"]
        await a.decide(Decision.approve(call_id, args={"n": 1}))
        with anyio.fail_after(PATIENCE):
            await running.wait()
        late = Decision.approve(call_id, args={"n": 1})  # as another worker records it
        await a.store.write([recorded.recorded(late, "queued", a.clock(), None)])
        release.set()
        assert (await a.wait_turn(handle.turn_id)).status == "done"
        status = await on(a.store).scalar("SELECT status FROM decisions WHERE id = ?", (late.id,))
        assert status == "duplicate"


async def test_a_request_queued_in_the_cluster_reads_queued_through_any_worker(tmp_path, pg_url):
    """A request no worker has started (its group paused everywhere) reads `queued` through
    the worker it was offered to (it read `running`) and through another (it was not
    found); why, only where a worker knows (the one that leased its thread)."""
    from engine.api.local import LocalClient

    async with workers(tmp_path, pg_url, 2) as (a, b):
        for rt in (a, b):
            await rt.configure_group("chat", paused=True)
        handle = await b.submit(msg("later", thread="q"))
        for rt in (b, a):  # (the worker that leased its thread says why it waits there)
            outcome = await LocalClient(rt).outcome(handle.turn_id)
            assert (outcome.status, outcome.thread_id) == ("queued", "q")
            # no reason known here (`agentdeck invoke` printed one for every turn offered
            # through a worker that did not hold its thread, a moment before it started)
            assert outcome.reason in (None, "group chat paused")


async def test_approvals_take_slots_of_their_group_across_workers(tmp_path, pg_url):
    """Six turns of group chat (two at a time across the cluster) wait for approvals; all
    six approved at once through one worker run two at a time, whichever worker resumes
    each, and every approved call runs once (issue 25: 12 of 8 ran on a cluster)."""
    from engine.config import GroupSettings
    from tests.test_resumed_budgets import Gate, script

    gate = Gate()
    async with AsyncExitStack() as stack:
        rts = []
        for name in ("w0", "w1"):
            config = cluster_config(pg_url, name)
            config.groups["chat"] = GroupSettings(max_running_turns=2)
            rts.append(await stack.enter_async_context(Runtime.open(
                tmp_path / name, kind="run", provider=ScriptedModel(script),
                tools=gate.tools(), config=config)))  # fmt: skip
        handles = [await rts[i % 2].submit(msg(f"shell c{i}", thread=f"t{i}")) for i in range(6)]
        outs = [await rts[0].wait_turn(h.turn_id) for h in handles]
        assert [o.status for o in outs] == ["waiting"] * 6
        async with anyio.create_task_group() as tg:
            for out in outs:
                tg.start_soon(rts[0].decide, Decision.approve(out.pending[0]["call_id"]))

        def seen() -> tuple[int, int]:
            held = sum(q.waits_because.startswith("resumed")
                       for rt in rts for q in rt.statistics().queued)  # fmt: skip
            return gate.now, held

        now, held = await until(seen, "each approved turn runs its call or waits for a slot",
                                ok=lambda s: s[0] + s[1] == 6,
                                seen=lambda: [rt.statistics().queued for rt in rts])  # fmt: skip
        assert (now, held) == (2, 4)  # before the fix: six calls ran at once
        gate.open.set()
        for out in outs:
            assert (await rts[1].wait_turn(out.turn_id)).status == "done"
        assert sorted(gate.runs) == [f"c{i}" for i in range(6)] and gate.most == 2


async def test_a_connection_a_cancelled_query_closed_is_replaced_and_no_lease_is_lost(
    tmp_path, pg_url
):
    """Found by a loaded run: a scheduler read cancelled mid-query closed the worker's one
    connection ("query cancellation interrupted"), every heartbeat then failed with "the
    connection is closed" until the worker lost its leases and its running turn."""
    from tests.console.scheduler_scenes import SLOW, SlowWhenAsked

    async with Runtime.open(tmp_path / "w", kind="run", provider=SlowWhenAsked(),
                            config=cluster_config(pg_url, "w", lease=20)) as rt:  # fmt: skip
        member = rt.coordinator
        assert member is not None and member.worker is not None
        await rt.submit(msg(f"{SLOW} keep running", thread="busy"))
        await until(lambda: set(member.worker.held), "the worker leases the thread",
                    ok=lambda held: held == {"busy"})  # fmt: skip
        await member.worker.conn.close()  # as psycopg does when a query's cancel is cut short
        view = await member.view()  # the next use connects again
        assert [t.thread_id for t in view.threads] == ["busy"]
        await tasks.beat(member)  # the heartbeat renews the lease on the new connection
        assert set(member.worker.held) == {"busy"}
        assert [h.thread_id for h in rt.live.values()] == ["busy"]  # its turn runs on


async def test_a_cancel_of_a_turn_another_worker_runs_is_recorded_and_outlives_that_worker(
    tmp_path: Path, pg_url: str
) -> None:
    """Issue 28: a cancel of a turn running on another worker was a NOTIFY, not a record:
    had that worker died before reading it, the turn went on where it was recovered. Now
    the cancel is recorded: worker a never hears of it (as if dead before it read the
    notice), a stops, and b, taking the thread up, ends the turn cancelled."""
    started, never = anyio.Event(), anyio.Event()

    @tool
    async def stall() -> str:
        """Wait for ever."""
        started.set()
        await never.wait()
        return "never"

    cfg = cluster_config(pg_url, "a")
    script = first_then([("stall", {})])
    async with Runtime.open(tmp_path / "b", kind="run", provider=ScriptedModel(script),
                            tools=[stall], config=cluster_config(pg_url, "b")) as b:  # fmt: skip
        async with Runtime.open(tmp_path / "a", kind="run", provider=ScriptedModel(script),
                                tools=[stall], config=cfg) as a:  # fmt: skip
            async with b.coordinator._claim_lock:  # a, not b, takes the thread
                handle = await a.submit(msg("stall", thread="x"))
                with anyio.fail_after(PATIENCE):
                    await started.wait()
            assert a.coordinator.listener is not None
            a.coordinator.listener.on_cancel = lambda payload: None  # a hears nothing
            assert await b.cancel_turn(handle.turn_id, "stop it") is True
            assert handle.turn_id in a.live  # it goes on at a, which never heard
        outcome = await until(lambda: b.outcome(handle.turn_id), "b ended the turn",
                              ok=lambda o: o.status == "done")  # fmt: skip
        assert (outcome.status, outcome.reason, outcome.detail) == ("done", "cancelled", "stop it")
