"""A turn resumed by a decision takes a slot of its group like any other turn (issue 25
item 11): it keeps its thread and waits for a slot, ahead of the group's new turns, and
its approved call runs once when the slot comes, also after a restart while it waited."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine.api.local import LocalClient
from engine.domain.decisions import Decision
from engine.domain.events import Event, TurnChanged, TurnStarted
from engine.runtime import Runtime
from engine.tools import Tool, tool
from tests.helpers import msg, rows, runtime
from tests.scripted import Reply, after_tools
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

SLOT = "resumed, waiting for a slot of group chat ({} of {} running)"


class Gate:
    """Tools that count how many of their runs are under way at once: `shell` (approval
    needed) and `hold` (none), each blocked until the test opens the gate."""

    def __init__(self, *, open_: bool = False) -> None:
        self.now = self.most = 0
        self.runs: list[str] = []
        self.open = anyio.Event()
        if open_:
            self.open.set()

    async def _run(self, what: str) -> str:
        self.now += 1
        self.most = max(self.most, self.now)
        self.runs.append(what)
        try:
            await self.open.wait()
        finally:
            self.now -= 1
        return f"ran {what}"

    def tools(self) -> list[Tool]:
        @tool(name="shell", approval="always")
        async def shell(command: str) -> str:
            """Runs once approved; blocks until the gate opens."""
            return await self._run(command)

        @tool(name="hold")
        async def hold(command: str) -> str:
            """Runs at once; blocks until the gate opens."""
            return await self._run(command)

        return [shell, hold]


def script(request) -> Reply:  # noqa: ANN001
    """A message `shell X` or `hold X` calls that tool with X; tool results end the turn."""
    if after_tools(request.messages):
        return Reply(text="done")
    name, command = request.messages[-1].text.split()
    return Reply(calls=[(name, {"command": command})])


class Running:
    """How many turns run at once, folded from the runtime's events (not from timing)."""

    def __init__(self, rt: Runtime) -> None:
        self.state: dict[str, str] = {}
        self.order: list[str] = []  # thread ids, each time a turn of it starts running
        self.most = 0
        rt.subscribe(self.fold)

    def fold(self, event: Event) -> None:
        if isinstance(event, TurnStarted | TurnChanged):
            status = "running" if isinstance(event, TurnStarted) else str(event.status)
            if status == "running" and self.state.get(event.turn_id) != "running":
                self.order.append(event.thread_id)
            self.state[event.turn_id] = status
            self.most = max(self.most, list(self.state.values()).count("running"))


def room_with_chat_budget(tmp_path: Path, budget: int) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(f"[groups.chat]\nmax_running_turns = {budget}\n")


def slot_reasons(rt: Runtime) -> list[str]:
    return [
        q.waits_because for q in rt.statistics().queued if q.waits_because.startswith("resumed")
    ]


async def slot_or_run(rt: Runtime, gate: Gate, call: str) -> tuple[list[str], list[str]]:
    """Once the approved `call`'s turn waits for a slot or the call has run (before the fix
    it ran at once): the reasons of the turns waiting for a slot, and the calls run."""
    return await until(lambda: (slot_reasons(rt), list(gate.runs)),
                       f"the turn of {call} waits for a slot, or {call} runs",
                       ok=lambda seen: seen[0] or call in seen[1])  # fmt: skip


async def test_six_approvals_at_once_run_two_at_a_time_in_a_group_of_two(tmp_path):
    room_with_chat_budget(tmp_path, 2)
    gate = Gate()
    async with runtime(tmp_path, script, gate.tools()) as rt:
        outs = [await rt.run_turn(msg(f"shell c{i}", thread=f"t{i}")) for i in range(6)]
        assert [o.status for o in outs] == ["waiting"] * 6
        running = Running(rt)
        async with anyio.create_task_group() as tg:  # all six approved at once
            for out in outs:
                tg.start_soon(rt.decide, Decision.approve(out.pending[0]["call_id"]))
        now, held = await until(
            lambda: (gate.now, len(slot_reasons(rt))),
            "each approved turn runs its call or waits for a slot",
            ok=lambda seen: seen[0] + seen[1] == 6,
        )
        assert (now, held) == (2, 4)  # before the fix: (6, 0), six calls at once
        assert slot_reasons(rt) == [SLOT.format(2, 2)] * 4
        [chat] = [g for g in rt.statistics().groups if g.name == "chat"]
        assert (chat.running, chat.waiting) == (2, 4)
        assert {t.state for t in rt.statistics().threads} == {"running", "waiting"}
        gate.open.set()
        for out in outs:
            assert (await rt.wait_turn(out.turn_id)).status == "done"
        assert sorted(gate.runs) == [f"c{i}" for i in range(6)]  # each approved call once
        assert (gate.most, running.most) == (2, 2)
        assert rt.statistics().queued == ()


async def test_a_resumed_turn_takes_the_slot_before_a_new_request_of_its_group(tmp_path):
    room_with_chat_budget(tmp_path, 1)
    gate = Gate()
    async with runtime(tmp_path, script, gate.tools()) as rt:
        running = Running(rt)
        waiting = await rt.run_turn(msg("shell a", thread="a"))
        busy = await rt.submit(msg("hold b", thread="b"))  # runs, holding chat's one slot
        await until(lambda: gate.now, "b's call runs", ok=lambda n: n == 1)
        await rt.decide(Decision.approve(waiting.pending[0]["call_id"]))

        def thread_a() -> tuple[str, list[str]]:
            stats = rt.statistics()
            [a] = [t.state for t in stats.threads if t.thread_id == "a"]
            return a, [q.waits_because for q in stats.queued]

        state, why = await until(thread_a, "the approved turn runs or waits for a slot",
                                 ok=lambda seen: seen[0] == "running" or seen[1])  # fmt: skip
        assert (state, why) == ("waiting", [SLOT.format(1, 1)])  # before the fix: running
        out = await LocalClient(rt).outcome(waiting.turn_id)  # what `agentdeck decide` says
        assert (out.status, out.reason, len(out.calls)) == ("queued", SLOT.format(1, 1), 1)
        new = await rt.submit(msg("hold c", thread="c"))
        assert [q.waits_because for q in rt.statistics().queued] == [
            SLOT.format(1, 1), "group chat budget full (1 of 1 running)"]  # fmt: skip
        gate.open.set()
        for handle in (busy, waiting, new):
            assert (await rt.wait_turn(handle.turn_id)).status == "done"
        assert running.order == ["a", "b", "a", "c"]  # the resumed turn went first
        assert (gate.runs, running.most) == (["b", "a", "c"], 1)


async def test_an_approval_waiting_for_a_slot_survives_a_restart_and_runs_once(tmp_path):
    gate = Gate(open_=True)
    async with runtime(tmp_path, script, gate.tools()) as rt:
        out = await rt.run_turn(msg("shell a", thread="a"))
        await rt.configure_group("chat", max_running_turns=0)  # no slot to be had
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        assert await slot_or_run(rt, gate, "a") == ([SLOT.format(0, 0)], [])
    assert gate.runs == []
    async with runtime(tmp_path, script, gate.tools(), first_id=100) as rt:
        # the decision is durable and the turn, resumed by the new run, takes a slot too
        await until(lambda: slot_reasons(rt), "after the restart, it waits for a slot again",
                    ok=lambda why: why == [SLOT.format(0, 0)])  # fmt: skip
        assert gate.runs == []
        await rt.configure_group("chat", max_running_turns=1)
        assert (await rt.wait_turn(out.turn_id)).status == "done"
        assert gate.runs == ["a"]
        assert await rows(rt, "SELECT status FROM decisions") == [("applied",)]
        assert await rows(rt, "SELECT status FROM tool_calls") == [("succeeded",)]


async def test_a_turn_cancelled_while_it_waits_for_a_slot_ends_and_frees_its_thread(tmp_path):
    room_with_chat_budget(tmp_path, 1)
    gate = Gate()
    async with runtime(tmp_path, script, gate.tools()) as rt:
        waiting = await rt.run_turn(msg("shell a", thread="a"))
        busy = await rt.submit(msg("hold b", thread="b"))
        await until(lambda: gate.now, "b's call runs", ok=lambda n: n == 1)
        await rt.decide(Decision.approve(waiting.pending[0]["call_id"]))
        assert await slot_or_run(rt, gate, "a") == ([SLOT.format(1, 1)], ["b"])
        assert await rt.cancel_turn(waiting.turn_id, "not now")
        out = await rt.wait_turn(waiting.turn_id)
        assert (out.status, out.reason) == ("done", "cancelled")
        assert slot_reasons(rt) == [] and rt.scheduler.holder("a") is None
        gate.open.set()
        assert (await rt.wait_turn(busy.turn_id)).status == "done"
        assert gate.runs == ["b"]  # the approved call never ran
