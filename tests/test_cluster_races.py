"""Races of a cluster's workers found by the process tests (tests/test_cluster_processes.py),
each made deterministic here, in one process: two runtimes on one PostgreSQL database."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import pytest

from engine.cluster import tasks
from engine.runtime import Runtime
from engine.store import claimed as reading
from engine.tools import Tool, tool
from tests.helpers import msg, on
from tests.scripted import Reply, ScriptedModel, after_tools
from tests.test_cluster_runtime import cluster_config
from tests.wait import PATIENCE, until

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def two(tmp_path: Path, url: str, tools: list[Tool]) -> AsyncIterator[list[Runtime]]:
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(Runtime.open(
            tmp_path / name, kind="run", provider=ScriptedModel(block_first), tools=tools,
            config=cluster_config(url, name))) for name in ("a", "b")]  # fmt: skip


def block_first(request) -> Reply:  # noqa: ANN001
    """`block` on a message that says so, else a plain answer."""
    msgs = request.messages
    if after_tools(msgs):
        return Reply(text="done")
    return Reply(calls=[("block", {})]) if msgs[-1].text == "block" else Reply(text="hi")


def gated() -> tuple[anyio.Event, Tool]:
    """A `block` tool that runs until the test sets the event it returns with it."""
    gate = anyio.Event()

    @tool(name="block")
    async def block() -> str:
        """Wait for the test."""
        await gate.wait()
        return "unblocked"

    return gate, block


async def test_a_stale_read_of_a_thread_does_not_start_its_request_twice(tmp_path, pg_url):
    """A notice makes the worker holding a thread read its queued requests; a request it
    admitted after that read began is read as queued. It must not go in line again: its
    turn would be opened twice (the second open fails on the turn's key, and the worker
    stopped with it)."""
    gate, block = gated()

    async with two(tmp_path, pg_url, [block]) as (a, b):
        async with b.coordinator._claim_lock:  # a, not b's claim loop, takes the thread
            first = await a.submit(msg("block", thread="x"))
            await until(lambda: ("x" in a.coordinator.worker.held,
                                 first.turn_id in a.supervisor.loops),
                        "a holds thread x and runs its first turn", ok=all)  # fmt: skip
        second = await b.submit(msg("after", thread="x"))  # queued behind, through b
        await until(lambda: a.scheduler.knows(second.turn_id),  # a read it (b's notice)
                    "a reads the request queued through b")  # fmt: skip
        stale = await reading.thread_work(a.store, ["x"])  # `second` queued, as a read it
        gate.set()
        assert (await a.wait_turn(second.turn_id)).status == "done"
        a.coordinator._load(stale["x"])  # that read, applied after `second` ran
        a.supervisor.pump()
        assert not a.scheduler.knows(second.turn_id)
        assert second.turn_id not in a.live
        rows = await on(a.store).fetchall("SELECT id FROM turns WHERE thread_id = 'x'")
        assert sorted(r[0] for r in rows) == sorted([first.turn_id, second.turn_id])


async def test_a_request_queued_for_another_worker_is_not_said_queued_here(tmp_path, pg_url):
    """A request offered to a worker that does not hold its thread is in line at the
    worker that does: asking why it waits (what the API's submit and outcome do) must not
    fail, and once it ran there it is not said to wait here."""
    gate, block = gated()

    async with two(tmp_path, pg_url, [block]) as (a, b):
        async with b.coordinator._claim_lock:  # a, not b's claim loop, takes the thread
            first = await a.submit(msg("block", thread="x"))
            await until(lambda: first.turn_id in a.supervisor.loops, "a runs the first turn")
        second = await b.submit(msg("after", thread="x"))
        b.why_queued(second.turn_id)  # raised KeyError: b's scheduler never had the thread
        gate.set()
        assert (await b.wait_turn(second.turn_id)).status == "done"
        assert b.why_queued(second.turn_id) is None


async def test_a_request_its_worker_claimed_meanwhile_is_kept_as_admitted(tmp_path, pg_url):
    """An offer for a thread the worker does not hold writes the request with a notice;
    the worker's claim loop, woken by it, may lease the thread and admit the request before
    the offer goes on. The offer must not then put its own copy (still `queued`) in place of
    the admitted one: a later read of the thread would take it for news and start it
    again."""
    async with two(tmp_path, pg_url, []) as (a, b), b.coordinator._claim_lock:  # a claims
        real = a.store.write

        async def write_then_claim(ops, **kw):  # noqa: ANN001, ANN003
            await real(ops, **kw)
            if any(
                "turn_requests" in a.store.dialect.text(op[0]) for op in ops
            ):  # the claim loop wins the race
                await a.coordinator.claim(["y"])

        a.store.write = write_then_claim  # type: ignore[method-assign]
        handle = await a.submit(msg("hello", thread="y"))
        a.store.write = real  # type: ignore[method-assign]
        assert (await a.wait_turn(handle.turn_id)).status == "done"
        assert a.request(handle.turn_id).status == "admitted"


async def test_a_lease_lost_before_the_turn_is_recorded_does_not_stop_the_worker(tmp_path, pg_url):
    """The lease may go between a request's admission and its turn's first commit (a
    pause longer than the lease; found by bench_cluster): that commit is fenced. The worker
    must go on (the LeaseLost stopped it, with every turn it ran), and the request, still
    queued, runs once, here when the worker claims the thread again."""
    async with Runtime.open(tmp_path / "a", kind="run", provider=ScriptedModel(block_first),
                            config=cluster_config(pg_url, "a")) as a:  # fmt: skip
        real, fenced = a.store.write, []

        async def expire_then_write(ops, **kw):  # noqa: ANN001, ANN003
            if any(op[0] == "turns.turn_opened" for op in ops):  # the first commit
                a.store.write = real  # type: ignore[method-assign]
                await a.coordinator.db(lambda c: c.execute(
                    "UPDATE thread_leases SET expires_at = 0 WHERE thread_id = 'z'"))  # fmt: skip
                fenced.append(ops)
            await real(ops, **kw)

        a.store.write = expire_then_write  # type: ignore[method-assign]
        handle = await a.submit(msg("hello", thread="z"))
        with anyio.fail_after(PATIENCE):
            assert (await a.wait_turn(handle.turn_id)).status == "done"
        assert fenced
        again = await a.submit(msg("again", thread="w"))  # a still runs turns
        with anyio.fail_after(PATIENCE):
            assert (await a.wait_turn(again.turn_id)).status == "done"
        rows = await on(a.store).fetchall("SELECT id FROM turns WHERE thread_id = 'z'")
        assert [r[0] for r in rows] == [handle.turn_id]


async def test_a_notice_heard_while_a_thread_is_being_taken_does_not_start_its_request_twice(
    tmp_path, pg_url
):
    """A request offered through a worker that does not hold its thread: the worker claims
    the thread, and the request's own notice may be heard between the lease and the read
    of the thread's work. The thread is not held until that read is taken up: the notice
    must not load the request first (it was then loaded again and opened twice, and the
    duplicate turn's key stopped the worker)."""
    async with two(tmp_path, pg_url, []) as (a, b), b.coordinator._claim_lock:  # a claims
        real = a.coordinator._new_block

        async def block_then_notice() -> None:  # between the lease and the read
            await real()
            await tasks.noticed(a.coordinator, "z")

        a.coordinator._new_block = block_then_notice  # type: ignore[method-assign]
        handle = await a.submit(msg("hello", thread="z"))
        a.coordinator._new_block = real  # type: ignore[method-assign]
        assert (await a.wait_turn(handle.turn_id)).status == "done"
        rows = await on(a.store).fetchall("SELECT id FROM turns WHERE thread_id = 'z'")
        assert [r[0] for r in rows] == [handle.turn_id]


async def test_a_late_release_keeps_the_lease_of_a_thread_whose_turn_started(tmp_path, pg_url):
    """A release is asked for when a thread has nothing to run here (a lease taken with no
    work, a turn settled) and runs later, as a task: a turn of the thread may have started
    in between. The lease must stay: given back, the turn's thread went to the next claim
    (this worker's or another's) with the turn's request still read as queued, and its
    turn was opened twice."""
    gate, block = gated()

    async with two(tmp_path, pg_url, [block]) as (a, b), b.coordinator._claim_lock:  # a claims
        handle = await a.submit(msg("block", thread="x"))
        await until(lambda: handle.turn_id in a.supervisor.loops, "a runs the turn")
        await a.coordinator._release("x")  # asked for before the turn started, run now
        assert a.coordinator.holds("x")
        leased = await on(a.store).fetchall(
            "SELECT worker_id FROM thread_leases WHERE thread_id='x'"
        )
        assert [r[0] for r in leased] == ["a"]
        gate.set()
        assert (await a.wait_turn(handle.turn_id)).status == "done"


async def test_a_stale_read_of_a_turn_that_ended_does_not_hold_its_thread(tmp_path, pg_url):
    """A read of a held thread (a notice's refresh) may see a turn running that ended here
    since, while the next turn of the thread runs. The read must not make the ended turn
    the thread's holder again: the running turn could not free the thread when it ended,
    and every later request of the thread waited for ever behind a turn that was done (the
    worker kept the lease and ran nothing of the thread; seen in the process tests)."""
    gates = [anyio.Event(), anyio.Event()]
    calls = []

    @tool(name="block")
    async def block() -> str:
        """Wait for the test (each call for a gate of its own)."""
        calls.append(1)
        await gates[len(calls) - 1].wait()
        return "unblocked"

    async with two(tmp_path, pg_url, [block]) as (a, b), b.coordinator._claim_lock:  # a claims
        first = await a.submit(msg("block", thread="x"))
        await until(lambda: first.turn_id in a.supervisor.loops, "a runs the first turn")
        stale = await reading.thread_work(a.store, ["x"])  # `first` running, as read now
        second = await a.submit(msg("block", thread="x"))  # in line behind it: x stays held
        gates[0].set()
        await until(lambda: second.turn_id in a.supervisor.loops, "a runs the second turn")
        a.coordinator._load(stale["x"])  # that read, applied now
        gates[1].set()
        assert (await a.wait_turn(second.turn_id)).status == "done"
        third = await a.submit(msg("after", thread="x"))
        with anyio.fail_after(PATIENCE):
            assert (await a.wait_turn(third.turn_id)).status == "done"


async def test_a_request_starting_when_its_worker_leases_the_thread_again_starts_once(
    tmp_path, pg_url
):
    """The lease runs out while an admitted request's turn is being opened, and the worker's
    own claim leases the thread again before that first commit is written (found by the
    cluster soak: a loaded machine, a late heartbeat). The request, still queued in the
    database, must not be taken up a second time by that claim (it was: its second opening
    took over the first's handle, whose fence then passed, and the duplicate turn key
    stopped the worker). The first commit is fenced; the request then runs, once."""
    async with Runtime.open(tmp_path / "a", kind="run", provider=ScriptedModel(block_first),
                            config=cluster_config(pg_url, "a")) as a:  # fmt: skip
        sv = a.supervisor
        real = sv.conversation

        async def expire_and_claim_first(thread_id: str):  # noqa: ANN202 - as the turn opens
            sv.conversation = real  # type: ignore[method-assign]
            await a.coordinator.db(lambda c: c.execute(
                "UPDATE thread_leases SET expires_at = 0 WHERE thread_id = 'z'"))  # fmt: skip
            assert await a.coordinator.claim() == ["z"]  # leased again, before the first commit
            return await real(thread_id)

        starting, most = [0], [0]  # of the request's turn, at once
        real_start = sv._start_turn

        async def counted(req, handle, carried=None):  # noqa: ANN001, ANN202
            starting[0] += 1
            most[0] = max(most[0], starting[0])
            try:
                return await real_start(req, handle, carried)
            finally:
                starting[0] -= 1

        sv._start_turn = counted  # type: ignore[method-assign]
        sv.conversation = expire_and_claim_first  # type: ignore[method-assign]
        handle = await a.submit(msg("hello", thread="z"))
        with anyio.fail_after(PATIENCE):
            assert (await a.wait_turn(handle.turn_id)).status == "done"
        again = await a.submit(msg("again", thread="w"))  # a still runs turns
        with anyio.fail_after(PATIENCE):
            assert (await a.wait_turn(again.turn_id)).status == "done"
        rows = await on(a.store).fetchall("SELECT id FROM turns WHERE thread_id = 'z'")
        assert [r[0] for r in rows] == [handle.turn_id]
        assert most[0] == 1  # never two openings of it at once


async def test_a_turn_whose_lease_lapsed_goes_on_when_its_worker_leases_the_thread_again(
    tmp_path, pg_url
):
    """A loaded machine lets a lease lapse under a running turn, and the same worker's claim
    leases the thread again before anyone else: nobody held it between, so the turn goes on
    under the new token. It was stopped and resumed (its running call then surfaced for
    review, and an idempotent one ran again: the soak counted one run three times)."""
    ran, release = [], anyio.Event()

    @tool(name="block")
    async def block() -> str:
        """Runs until the test lets it end."""
        ran.append(1)
        await release.wait()
        return "unblocked"

    async with Runtime.open(tmp_path / "a", kind="run", provider=ScriptedModel(block_first),
                            tools=[block], config=cluster_config(pg_url, "a")) as a:  # fmt: skip
        handle = await a.submit(msg("block", thread="z"))
        await until(lambda: ran, "the call runs")
        await a.coordinator.db(lambda c: c.execute(
            "UPDATE thread_leases SET expires_at = 0 WHERE thread_id = 'z'"))  # fmt: skip
        assert await a.coordinator.claim() == ["z"]  # the same worker, before anyone else
        release.set()
        with anyio.fail_after(PATIENCE):
            outcome = await a.wait_turn(handle.turn_id)
        assert outcome.status == "done" and ran == [1]
        assert [c["status"] for c in outcome.calls] == ["succeeded"]


async def test_a_turn_resumed_while_a_stopped_loop_of_it_ends_is_not_resumed_twice(
    tmp_path, pg_url
):
    """A loop stopped on a lost lease ends after the turn was resumed beside it: it must
    take only its own handle off the live turns. It took the resumed one's, so the next
    read of the thread resumed the turn a second time beside the first (the soak: a
    duplicate message seq, an idempotent call run three times on one worker)."""
    from engine.services.handles import TurnHandle

    async with Runtime.open(tmp_path / "a", kind="run", provider=ScriptedModel(block_first),
                            config=cluster_config(pg_url, "a")) as a:  # fmt: skip
        sv = a.supervisor
        stopped, resumed = TurnHandle("t_x", "z", lost=True), TurnHandle("t_x", "z")
        a.live["t_x"] = resumed  # the newer loop stands for the turn now
        sv._unlive(stopped)  # the stopped one ends
        assert a.live["t_x"] is resumed
        assert sv.spawn_resume("t_x", "z") is resumed  # and it is not resumed again
        a.live.pop("t_x")
