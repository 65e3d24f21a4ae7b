"""The scheduler: serialization, budgets, priority, coalescing, overflow, reasons."""

from __future__ import annotations

import itertools

import anyio
import pytest

from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.runtime import Runtime
from engine.services.scheduler import GroupConfig, Rejected, Request, Resumed, Scheduler
from engine.tools import tool
from tests.helpers import on
from tests.scripted import Reply, ScriptedModel, first_then
from tests.wait import until

pytestmark = pytest.mark.usefixtures("store_backend")

ids = itertools.count(1)


def req(thread: str, group: str = "chat", origin: str = "invoke") -> Request:
    sender = "self" if origin in ("task", "chore", "will") else "op"
    m = Message(origin=origin, sender=sender, thread_id=thread, text="x")
    return Request(f"r{next(ids)}", m, group, created_at=0.0)


def offer(s: Scheduler, *reqs: Request) -> list[Request]:
    for r in reqs:
        s.offer(r)
    return s.admissions()


def test_one_turn_per_thread_and_a_waiting_turn_holds_its_thread_not_the_budget():
    s = Scheduler(groups={"chat": GroupConfig("chat", max_running_turns=2)})
    a1, a2, b1 = req("a"), req("a"), req("b")
    assert offer(s, a1, a2, b1) == [a1, b1]
    assert s.why_waiting(a2) == f"thread busy with turn {a1.id}"
    s.hold("a", a1.id, "chat", "waiting")
    assert s.admissions() == []  # a waits: thread a is still held
    assert s.why_waiting(a2) == f"thread waiting on a decision (turn {a1.id})"
    c1 = req("c")
    assert offer(s, c1) == [c1]  # ...but a's budget slot is free: c runs beside b
    s.release("a", a1.id)
    assert s.why_waiting(a2) == "group chat budget full (2 of 2 running)"
    s.release("b", b1.id)
    assert s.admissions() == [a2]


def test_group_budget_and_priority():
    s = Scheduler(
        groups={
            "chat": GroupConfig("chat", priority=100, max_running_turns=5),
            "chore": GroupConfig("chore", priority=20, max_running_turns=5),
        },
        max_running_turns=2,
    )
    low = [req(f"k{i}", "chore", "chore") for i in range(2)]
    high = [req(f"c{i}", "chat") for i in range(3)]
    for r in low + high:
        s.offer(r)
    assert s.admissions() == high[:2]  # chat first though chores came earlier
    assert s.why_waiting(high[2]) == "runtime budget full (2 of 2 running)"
    assert s.why_waiting(low[0]) == "lower priority than group chat"
    s.release("c0", high[0].id)
    assert s.admissions() == [high[2]]
    s.release("c1", high[1].id)
    assert s.admissions() == [low[0]]


def test_paused_group_and_budget_change():
    s = Scheduler(groups={"task": GroupConfig("task", max_running_turns=1)})
    t1, t2 = req("t1", "task", "task"), req("t2", "task", "task")
    s.configure("task", paused=True)
    assert offer(s, t1, t2) == []
    assert s.why_waiting(t1) == "group task paused"
    s.configure("task", paused=False)
    assert s.admissions() == [t1]
    assert s.why_waiting(t2) == "group task budget full (1 of 1 running)"
    s.configure("task", max_running_turns=2)
    assert s.admissions() == [t2]


def test_overflow_reject():
    s = Scheduler(groups={"chat": GroupConfig("chat", max_running_turns=0, max_queued_turns=2)})
    a, b, c = req("a"), req("b"), req("c")
    offer(s, a, b, c)
    assert (a.status, b.status, c.status) == ("queued", "queued", "rejected")
    assert c.reason == "group chat queue is full (2 queued)"


def test_overflow_drop_oldest():
    g = GroupConfig("chat", max_running_turns=0, max_queued_turns=2, overflow_policy="drop_oldest")
    s = Scheduler(groups={"chat": g})
    a, b, c = req("a"), req("b"), req("c")
    offer(s, a, b, c)
    assert (a.status, b.status, c.status) == ("rejected", "queued", "queued")
    assert a.reason == "dropped: queue full in group chat"


def test_overflow_replace_pending():
    g = GroupConfig(
        "chat", max_running_turns=0, max_queued_turns=2, overflow_policy="replace_pending"
    )
    s = Scheduler(groups={"chat": g})
    a, b, c = req("a"), req("b"), req("c")
    offer(s, a, b, c)
    assert (a.status, b.status, c.status) == ("queued", "rejected", "queued")
    assert b.reason == f"replaced by newer request {c.id}: queue full in group chat"


def test_chore_coalescing_keeps_one_pending_per_chore():
    s = Scheduler()
    first, second, third = (req("chore:backup", "chore", "chore") for _ in range(3))
    assert offer(s, first) == [first]  # running
    offer(s, second, third)
    assert second.status == "queued"  # the one follow-up
    assert third.status == "coalesced" and third.coalesced_into == second.id


def test_task_and_will_keep_only_the_newest_pending():
    s = Scheduler()
    for group in ("task", "will"):
        running, rev2, rev3 = (req(f"{group}:x", group, group) for _ in range(3))
        assert offer(s, running) == [running]
        offer(s, rev2, rev3)
        assert rev2.status == "coalesced" and rev2.coalesced_into == rev3.id
        assert rev3.status == "queued"


def test_statistics_say_why_each_request_waits():
    s = Scheduler(groups={"chat": GroupConfig("chat", max_running_turns=1)})
    a, b, a2 = req("a"), req("b"), req("a")
    offer(s, a, b, a2)
    stats = s.statistics()
    assert {q.request_id: q.waits_because for q in stats.queued} == {
        b.id: "group chat budget full (1 of 1 running)",
        a2.id: f"thread busy with turn {a.id}",
    }
    [chat] = stats.groups
    assert (chat.running, chat.queued, chat.max_running_turns) == (1, 2, 1)
    assert [(t.thread_id, t.state, t.queued) for t in stats.threads] == [
        ("a", "running", 1),
        ("b", "idle", 1),
    ]


def test_a_resumed_turn_waits_for_a_slot_of_its_group_ahead_of_new_requests():
    s = Scheduler(groups={"chat": GroupConfig("chat", max_running_turns=1)})
    a, b, c, a2 = req("a"), req("b"), req("c"), req("a")
    assert offer(s, a) == [a]
    s.hold("a", a.id, "chat", "waiting")  # waits for a decision: the slot frees
    assert offer(s, b, c) == [b]
    s.resume("a", a.id, "chat")  # decided: it keeps thread a and waits for a slot
    s.offer(a2)
    assert s.admissions() == []
    stats = s.statistics()
    assert [(q.request_id, q.waits_because) for q in stats.queued] == [
        (a.id, "resumed, waiting for a slot of group chat (1 of 1 running)"),
        (c.id, "group chat budget full (1 of 1 running)"),
        (a2.id, f"thread busy with turn {a.id} (resumed, waiting for a slot)"),
    ]
    assert [(t.thread_id, t.state) for t in stats.threads] == [
        ("a", "waiting"), ("b", "running"), ("c", "idle")]  # fmt: skip
    assert (stats.groups[0].running, stats.groups[0].waiting) == (1, 1)
    s.release("b", b.id)
    assert s.admissions() == [Resumed(a.id, "a", "chat")]  # before c, which came earlier
    assert s.holder("a") == (a.id, "running") and s.admissions() == []
    s.release("a", a.id)
    assert s.admissions() == [c]


def test_a_resumed_turn_is_counted_once_whatever_it_held_and_forgotten_with_its_thread():
    s = Scheduler(groups={"chat": GroupConfig("chat", max_running_turns=1)}, max_running_turns=1)
    s.hold("a", "ta", "chat", "running")  # an interrupted turn, restored as running
    s.hold("b", "tb", "chat", "waiting")
    s.resume("a", "ta", "chat")  # resumed after a restart: it takes a slot like any other
    s.resume("b", "tb", "chat")
    assert s.running == 0
    assert s.admissions() == [Resumed("ta", "a", "chat")]  # in the order they were resumed
    assert s.forget("a") == [] and s.running == 0
    assert s.admissions() == [Resumed("tb", "b", "chat")]
    s.configure("chat", paused=True)
    s.resume("b", "tb", "chat")
    assert [q.waits_because for q in s.statistics().queued] == [
        "resumed, waiting: group chat paused"]  # fmt: skip
    s.release("b", "tb")
    assert s.statistics().queued == () and s.admissions() == []
    s.hold("c", "tc", "ops", "waiting")  # of a group only its stored turns name (a restart)
    s.resume("c", "tc", "ops")
    assert s.admissions() == [Resumed("tc", "c", "ops")]


# -- with the runtime -----------------------------------------------------------------------


@tool(approval="always")
def shell(command: str) -> str:
    """Pretend."""
    return command


def msg(thread: str, origin: str = "invoke", text: str = "go") -> Message:
    sender = "self" if origin in ("task", "chore", "will") else "op"
    return Message(origin=origin, sender=sender, thread_id=thread, text=text)


@pytest.mark.anyio
async def test_admission_is_durable_and_survives_a_restart(tmp_path):
    room = tmp_path / "room"
    (room).mkdir()
    (room / "agentdeck.toml").write_text("[groups.task]\npaused = true\n")
    script = first_then([])
    async with Runtime.open(room, provider=ScriptedModel(script), tools=[shell]) as rt:
        handle = await rt.submit(msg("task:report", "task"))
        stats = rt.statistics()
        assert [q.waits_because for q in stats.queued] == ["group task paused"]
    # the accepted request is in execution.db before submit returned; a new run finds it
    (room / "agentdeck.toml").write_text("")
    async with Runtime.open(room, provider=ScriptedModel(script), tools=[shell]) as rt:
        assert [q.request_id for q in rt.statistics().queued] == [handle.turn_id]
        await rt.configure_group("task", paused=False)
        out = await rt.wait_turn(handle.turn_id)
        assert (out.status, out.reason) == ("done", "natural")


@pytest.mark.anyio
async def test_rejected_request_raises_with_its_recorded_reason(tmp_path):
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(
        "[groups.chat]\nmax_running_turns = 0\nmax_queued_turns = 1\n"
    )
    async with Runtime.open(room, provider=ScriptedModel(first_then([])), tools=[]) as rt:
        await rt.submit(msg("a"))
        with pytest.raises(Rejected, match="queue is full"):
            await rt.submit(msg("b"))
        rows = await on(rt.store).fetchall(
            "SELECT status, reason FROM turn_requests ORDER BY created_at"
        )
        assert [tuple(r) for r in rows] == [
            ("queued", None),
            ("rejected", "group chat queue is full (1 queued)"),
        ]


@pytest.mark.anyio
async def test_waiting_turn_frees_its_group_budget(tmp_path):
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text("[groups.chat]\nmax_running_turns = 1\n")
    script = lambda r: (
        Reply(calls=[("shell", {"command": "x"})])
        if r.messages[-1].role == "user"
        else Reply(text="ok")
    )  # noqa: E731
    async with Runtime.open(room, provider=ScriptedModel(script), tools=[shell]) as rt:
        first = await rt.run_turn(msg("a"))
        assert first.status == "waiting"
        second = await rt.run_turn(msg("b"))  # runs although chat's budget is 1
        assert second.status == "waiting"
        third = await rt.submit(msg("a"))  # queues behind the waiting turn on thread a
        because = [f"thread waiting on a decision (turn {first.turn_id})"]
        await until(lambda: [q.waits_because for q in rt.statistics().queued],
                    "the third request queued behind the waiting turn",
                    ok=lambda why: why == because)  # fmt: skip
        await rt.decide(Decision.approve(first.pending[0]["call_id"]))
        out = await rt.wait_turn(third.turn_id)
        assert out.status == "waiting"


@pytest.mark.anyio
async def test_coalesced_request_is_followed_by_wait_turn(tmp_path):
    release = anyio.Event()

    @tool
    async def work() -> str:
        """Waits."""
        await release.wait()
        return "done"

    script = first_then([("work", {})])
    async with Runtime.open(tmp_path / "room", provider=ScriptedModel(script), tools=[work]) as rt:
        running = await rt.submit(msg("task:t", "task", "rev1"))
        older = await rt.submit(msg("task:t", "task", "rev2"))
        newer = await rt.submit(msg("task:t", "task", "rev3"))
        assert older.turn_id != newer.turn_id
        release.set()
        out = await rt.wait_turn(older.turn_id)  # follows rev2 into rev3
        assert out.turn_id == newer.turn_id and out.status == "done"
        texts = [
            r[0] for r in await on(rt.store).fetchall("SELECT text FROM turns ORDER BY created_at")
        ]
        assert texts == ["rev1", "rev3"]
        await rt.wait_turn(running.turn_id)
