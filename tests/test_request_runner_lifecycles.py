"""The turn-request and tool-runner state machines: enums with the stored words, explicit
tables, checked moves; the scheduler and the runner move only along the tables."""

from __future__ import annotations

import itertools

import pytest

from engine.domain.decisions import Decision
from engine.domain.messages import ConvMessage, Message
from engine.lifecycle import IllegalTransition, RequestStatus, RunnerStatus
from engine.lifecycle import request as request_lifecycle
from engine.lifecycle import runner as runner_lifecycle
from engine.services.scheduler import GroupConfig, Request, Scheduler
from engine.store.schedule import request_row
from tests.helpers import rows, runtime
from tests.scripted import first_then

pytestmark = pytest.mark.usefixtures("store_backend")

Q = RequestStatus
R = RunnerStatus

# Written out independently of engine/lifecycle/request.py and runner.py.
REQUEST_EDGES: dict[RequestStatus, set[RequestStatus]] = {
    Q.QUEUED: {Q.ADMITTED, Q.COALESCED, Q.REJECTED},
    Q.ADMITTED: set(),
    Q.COALESCED: set(),
    Q.REJECTED: set(),
}
RUNNER_EDGES: dict[RunnerStatus, set[RunnerStatus]] = {
    R.READY: {R.RUNNING, R.STOPPED},
    R.RUNNING: {R.WAITING, R.DONE, R.STOPPED},
    R.WAITING: {R.RUNNING},
    R.DONE: set(),
    R.STOPPED: set(),
}
MACHINES = [
    (RequestStatus, REQUEST_EDGES, request_lifecycle, "turn request"),
    (RunnerStatus, RUNNER_EDGES, runner_lifecycle, "tool runner"),
]


def _pairs(legal: bool) -> list:
    return [
        pytest.param(module, src, dst, name, id=f"{name}:{src.value}->{dst.value}")
        for states, edges, module, name in MACHINES
        for src, dst in itertools.product(states, repeat=2)
        if (dst in edges[src]) is legal
    ]


def test_the_states_are_the_stored_words() -> None:
    assert [s.value for s in RequestStatus] == ["queued", "admitted", "coalesced", "rejected"]
    assert [s.value for s in RunnerStatus] == ["ready", "running", "waiting", "done", "stopped"]
    assert RequestStatus.COALESCED == "coalesced" and f"{RunnerStatus.DONE}" == "done"


@pytest.mark.parametrize(
    ("states", "edges", "module", "name"), MACHINES, ids=[m[3] for m in MACHINES]
)
def test_the_tables_are_exactly_the_diagrams(states, edges, module, name) -> None:
    assert {s: set(d) for s, d in module.TRANSITIONS.items()} == edges
    assert set(module.TRANSITIONS) == set(states)


@pytest.mark.parametrize(("module", "src", "dst", "name"), _pairs(legal=True))
def test_a_legal_move_passes(module, src, dst, name) -> None:
    assert module.check(src, dst) is dst
    assert module.check(src.value, dst.value) is dst  # the stored words work too


@pytest.mark.parametrize(("module", "src", "dst", "name"), _pairs(legal=False))
def test_an_illegal_move_raises_naming_both_states(module, src, dst, name) -> None:
    with pytest.raises(IllegalTransition, match=f"illegal {name} transition: {src} -> {dst}"):
        module.check(src, dst)


# --- the scheduler's requests --------------------------------------------------------------

ids = itertools.count(1)


def req(thread: str, status: str = "queued") -> Request:
    m = Message(origin="invoke", sender="op", thread_id=thread, text="x")
    return Request(f"q{next(ids)}", m, "chat", 0.0, None, status)  # type: ignore[arg-type]


def test_a_request_read_from_its_row_holds_the_enum_and_writes_the_word() -> None:
    r = req("a", "coalesced")
    assert r.status is RequestStatus.COALESCED
    assert request_row(r, 1.0)[1][5] == "coalesced"
    with pytest.raises(ValueError, match="paused"):
        req("a", "paused")


def test_the_scheduler_moves_requests_only_along_the_table() -> None:
    s = Scheduler(groups={"chat": GroupConfig("chat", coalesce="keep_pending")})
    a1, a2, b1, b2 = req("a"), req("a"), req("b"), req("b")
    assert all(r.status is RequestStatus.QUEUED for r in (a1, a2, b1, b2))
    s.offer(a1)
    s.offer(a2)  # keep_pending: coalesced into a1 as it is offered
    assert (a2.status, a2.coalesced_into, a2.turn_id) == (RequestStatus.COALESCED, a1.id, a1.id)
    assert s.admissions() == [a1]
    assert (a1.status, a1.coalesced_into, a1.turn_id) == (RequestStatus.ADMITTED, None, a1.id)
    with pytest.raises(IllegalTransition, match="turn request transition: admitted -> rejected"):
        a1.move(RequestStatus.REJECTED, "too late")
    assert a1.status is RequestStatus.ADMITTED and a1.reason is None  # nothing changed
    with pytest.raises(IllegalTransition, match="coalesced -> admitted"):
        a2.move(RequestStatus.ADMITTED)
    # a group whose queue is full rejects a request as it is offered
    full = Scheduler(groups={"chat": GroupConfig("chat", max_running_turns=0, max_queued_turns=1)})
    full.offer(b1)
    full.offer(b2)
    assert (b1.status, b2.status) == (RequestStatus.QUEUED, RequestStatus.REJECTED)
    assert b2.reason == "group chat queue is full (1 queued)"


@pytest.mark.anyio
async def test_stored_request_statuses_are_the_words(tmp_path) -> None:
    async with runtime(tmp_path, first_then([])) as rt:
        await rt.configure_group("chore", max_running_turns=0)
        for text in ("one", "two"):
            await rt.offer(Message(origin="chore", sender="self", thread_id="chore:x", text=text))
        await rt.run_turn(Message(origin="invoke", sender="op", thread_id="t1", text="hi"))
        stored = await rows(rt, "SELECT thread_id, status FROM turn_requests"
                                " ORDER BY created_at, id")  # fmt: skip
    assert stored == [
        ("chore:x", "queued"),
        ("chore:x", "coalesced"),  # the chore group keeps its pending request
        ("t1", "admitted"),
    ]
    assert all(type(status) is str for _, status in stored)  # words, not numbers


# --- the tool runner -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_runner_moves_along_its_table(tmp_path) -> None:
    async with runtime(tmp_path, first_then([("add", {"a": 1, "b": 2})])) as rt:
        runner = rt.tool_runner([ConvMessage(role="user", text="add")], thread_id="r")
        assert runner.status is RunnerStatus.READY
        first = await runner.__anext__()
        assert first.tool_calls and runner.status is RunnerStatus.RUNNING
        await runner.until_done()
        assert runner.status is RunnerStatus.DONE
        assert repr(runner).startswith("<ToolRunner r done ")
        await runner.aclose()  # its turn is done: nothing moves
        assert runner.status is RunnerStatus.DONE


@pytest.mark.anyio
async def test_a_waiting_runner_runs_again_once_decided(tmp_path) -> None:
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})])) as rt:
        runner = rt.tool_runner([ConvMessage(role="user", text="go")], thread_id="r")
        await runner.until_done()
        assert runner.status is RunnerStatus.WAITING
        assert [m async for m in runner] == []  # a waiting runner yields nothing more
        [pending] = runner.pending
        await runner.decide(Decision.approve(pending.call_id))
        assert runner.status is RunnerStatus.RUNNING
        await runner.until_done()
        assert runner.status is RunnerStatus.DONE
