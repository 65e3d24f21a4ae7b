"""Breakpoints (engine/domain/breakpoints.py, engine/turn/breaks.py): a turn pauses before an
inference, before a matching call or after a matching result, as a suspended `breakpoint`
call the model never sees; the operator continues, steps, edits or cancels from it, and
each is a recorded decision bound to what was shown."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.break_models import NewBreakpoint
from engine.api.client import Invalid
from engine.api.local import LocalClient
from engine.domain.decisions import Decision, PendingCall
from engine.domain.events import CallChanged, MessageAppended
from engine.domain.outcome import TurnOutcome
from engine.providers.base import ModelRequest
from engine.runtime import Runtime
from tests.helpers import msg, on, runtime
from tests.scripted import Reply, add, after_tools, shell
from tests.wait import PATIENCE

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def adds_then_answers(request: ModelRequest) -> Reply:
    """A user message gets `add(2, 3)` and a shell call; results are quoted back."""
    if request.messages[-1].role == "user":
        return Reply(calls=[("add", {"a": 2, "b": 3}), ("shell", {"command": "ls"})])
    return Reply(text=" | ".join(f"{m.tool_name}: {m.text}" for m in after_tools(request.messages)))


def two_rounds(request: ModelRequest) -> Reply:
    """add(1, 1), then add(2, 2), then an answer."""
    rounds = sum(1 for m in request.messages if m.role == "assistant")
    if rounds < 2:
        return Reply(calls=[("add", {"a": rounds + 1, "b": rounds + 1})])
    return Reply(text="done: " + after_tools(request.messages)[0].text)


async def set_point(rt: Runtime, **kw: Any) -> str:
    point = await LocalClient(rt).add_breakpoint(NewBreakpoint(**kw))
    return point.id


async def paused(rt: Runtime) -> PendingCall:
    [pause] = [p for p in await LocalClient(rt).pending() if p.awaiting == "breakpoint"]
    assert pause.tool == "breakpoint"
    return pause


async def go(rt: Runtime, decision: Decision, turn_id: str) -> TurnOutcome:
    assert await rt.decide(decision) == "queued"
    with anyio.fail_after(PATIENCE):
        return await rt.wait_turn(turn_id)


def requests(rt: Runtime) -> list[ModelRequest]:
    return rt.ctx.provider.requests  # type: ignore[attr-defined,no-any-return]


async def test_an_inference_breakpoint_pauses_before_the_model_is_asked(tmp_path: Path) -> None:
    async with runtime(tmp_path, adds_then_answers, tools=[add]) as rt:
        await set_point(rt, kind="inference", scope="room")
        out = await rt.run_turn(msg("hello"))
        assert out.status == "waiting" and requests(rt) == []
        pause = await paused(rt)
        assert pause.args["at"] == "inference" and pause.args["round"] == 0
        assert pause.args["messages"] == [{"seq": 0, "role": "user", "text": "hello"}]
        assert "paused before an inference" in pause.reason
        # the room breakpoint pauses every inference; going on passes this one only
        out = await go(rt, Decision.approve(pause.call_id, seen=pause.args), out.turn_id)
        assert out.status == "waiting" and len(requests(rt)) == 1
        second = await paused(rt)
        assert second.args["round"] == 1 and second.call_id != pause.call_id
        out = await go(rt, Decision.approve(second.call_id, seen=second.args), out.turn_id)
    assert (out.status, out.reason) == ("done", "natural")
    assert out.text.startswith("add: 5 | shell: error: unknown tool")
    for request in requests(rt):  # the model never sees a pause
        assert all(m.tool_name != "breakpoint" for m in request.messages)
        assert all(c.name != "breakpoint" for m in request.messages for c in m.tool_calls)


async def test_the_pending_message_is_edited_before_the_model_reads_it(tmp_path: Path) -> None:
    async with runtime(tmp_path, lambda r: Reply(text=f"read: {r.messages[-1].text}"),
                       tools=[add]) as rt:  # fmt: skip
        told: list[MessageAppended] = []
        rt.subscribe(lambda e: told.append(e) if isinstance(e, MessageAppended) else None)
        await set_point(rt, kind="inference", scope="once")
        out = await rt.run_turn(msg("delete everything"))
        pause = await paused(rt)
        edited = {**pause.args, "messages": [{"seq": 0, "role": "user", "text": "list files"}]}
        out = await go(rt, Decision.approve(pause.call_id, args=edited, seen=pause.args),
                       out.turn_id)  # fmt: skip
        [(text,)] = await on(rt.store).fetchall("SELECT text FROM messages WHERE seq = 0")
    assert out.text == "read: list files" and text == "list files"
    # the entry again, with its place: a console showing the thread shows the new text
    assert [e.text for e in told if e.seq == 0] == ["delete everything", "list files"]


async def test_a_call_breakpoint_holds_the_matching_call_and_lets_the_others_run(
    tmp_path: Path,
) -> None:
    async with runtime(tmp_path, adds_then_answers, tools=[add, shell]) as rt:
        said: list[CallChanged] = []
        rt.subscribe(lambda e: said.append(e) if isinstance(e, CallChanged) else None)
        await set_point(rt, kind="call", tool="shell", pattern="ls*", scope="room")
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        pause = await paused(rt)
        [held] = pause.args["calls"]
        assert (held["tool"], held["args"]) == ("shell", {"command": "ls"})
        states = dict(await on(rt.store).fetchall("SELECT tool, status FROM tool_calls"))
        assert states == {"add": "succeeded", "shell": "new", "breakpoint": "suspended"}
        assert ("shell", "new") in [(e.tool, e.status) for e in said]  # a pane shows it held
        assert len(requests(rt)) == 1  # nothing asks the model while the pause is open
        # an edit of the held call's arguments; the gate still asks for shell (its tool's rule)
        edited = {**pause.args, "calls": [{**held, "args": {"command": "ls -la"}}]}
        out = await go(rt, Decision.approve(pause.call_id, args=edited, seen=pause.args),
                       out.turn_id)  # fmt: skip
        assert out.status == "waiting"
        [ask] = await LocalClient(rt).pending()
        assert (ask.tool, ask.args, ask.awaiting) == ("shell", {"command": "ls -la"}, "decision")
        assert await rt.decide(Decision.step(ask.call_id, seen=ask.args)) == "refused"  # no pause
        out = await go(rt, Decision.approve(ask.call_id, seen=ask.args), out.turn_id)
    assert out.text == "shell: ran ls -la"  # (the model read add's result while shell waited)


async def test_a_result_breakpoint_holds_the_result_until_the_operator_goes_on(
    tmp_path: Path,
) -> None:
    async with runtime(tmp_path, adds_then_answers, tools=[add]) as rt:
        await set_point(rt, kind="result", tool="add", scope="room")
        out = await rt.run_turn(msg("go"))
        pause = await paused(rt)
        [held] = pause.args["calls"]
        assert (held["tool"], held["status"], held["result"]) == ("add", "succeeded", "5")
        assert len(requests(rt)) == 1
        edited = {**pause.args, "calls": [{**held, "result": "50"}]}
        out = await go(rt, Decision.approve(pause.call_id, args=edited, seen=pause.args),
                       out.turn_id)  # fmt: skip
        [(result,)] = await on(rt.store).fetchall(
            "SELECT result FROM tool_calls WHERE tool = 'add'"
        )
    assert result == "50"
    assert out.text.endswith(" | add: 50")  # (it entered the conversation when released)


async def test_step_pauses_again_after_exactly_one_inference_or_one_round(tmp_path: Path) -> None:
    async with runtime(tmp_path, two_rounds, tools=[add]) as rt:
        await set_point(rt, kind="inference", scope="once")
        out = await rt.run_turn(msg("go"))
        pause = await paused(rt)
        assert pause.args["at"] == "inference" and requests(rt) == []

        async def executed() -> int:
            rows = await on(rt.store).fetchall(
                "SELECT count(*) FROM tool_calls WHERE tool = 'add' AND status = 'succeeded'"
            )
            return int(rows[0][0])

        # step from an inference pause: one inference, then a pause before its calls
        out = await go(rt, Decision.step(pause.call_id, seen=pause.args), out.turn_id)
        pause = await paused(rt)
        assert (pause.args["at"], len(requests(rt)), await executed()) == ("call", 1, 0)
        # step from a call pause: one tool round, then a pause at its results
        out = await go(rt, Decision.step(pause.call_id, seen=pause.args), out.turn_id)
        pause = await paused(rt)
        assert (pause.args["at"], len(requests(rt)), await executed()) == ("result", 1, 1)
        # step from a result pause: one inference, then a pause before its calls
        out = await go(rt, Decision.step(pause.call_id, seen=pause.args), out.turn_id)
        pause = await paused(rt)
        assert (pause.args["at"], len(requests(rt)), await executed()) == ("call", 2, 1)
        assert pause.args["calls"][0]["args"] == {"a": 2, "b": 2}
        # continue: the rest runs without pausing (the once breakpoint is spent)
        out = await go(rt, Decision.approve(pause.call_id, seen=pause.args), out.turn_id)
    assert (out.status, out.text) == ("done", "done: 4")
    assert len(requests(rt)) == 3


async def test_cancel_at_a_breakpoint_ends_the_turn_and_runs_nothing_held(tmp_path: Path) -> None:
    async with runtime(tmp_path, adds_then_answers, tools=[add, shell]) as rt:
        await set_point(rt, kind="call", tool="add", scope="room")
        out = await rt.run_turn(msg("go"))
        pause = await paused(rt)
        out = await go(rt, Decision.cancel(pause.call_id, "not now"), out.turn_id)
        states = dict(await on(rt.store).fetchall("SELECT tool, status FROM tool_calls"))
    assert (out.status, out.reason) == ("done", "cancelled")
    assert "cancelled at a breakpoint by operator: not now" in (out.detail or "")
    assert states["add"] == "cancelled" and states["breakpoint"] == "cancelled"


async def test_a_pause_takes_only_decisions_bound_to_what_it_showed(tmp_path: Path) -> None:
    async with runtime(tmp_path, adds_then_answers, tools=[add]) as rt:
        await set_point(rt, kind="call", tool="add", scope="room")
        out = await rt.run_turn(msg("go"))
        pause = await paused(rt)
        other = {**pause.args, "round": 7}
        wrong = Decision.approve(pause.call_id, seen=other)
        assert await rt.decide(wrong, need_hash=True) == "refused"
        assert await rt.decide(Decision.fail(pause.call_id, "x")) == "refused"
        # an edit of what may not change is refused; the pause waits
        for sneaky in ({**pause.args, "at": "result"},
                       {**pause.args, "calls": [{**pause.args["calls"][0], "tool": "shell"}]},
                       {**pause.args, "calls": []}):  # fmt: skip
            decision = Decision.approve(pause.call_id, args=sneaky, seen=pause.args)
            assert await rt.decide(decision) == "refused"
        assert await _refused(rt) == 3
        assert (await paused(rt)).call_id == pause.call_id
        out = await go(rt, Decision.approve(pause.call_id, seen=pause.args), out.turn_id)
    assert out.status == "done"


async def _refused(rt: Runtime) -> int:
    rows = await on(rt.store).fetchall("SELECT note FROM decisions WHERE status = 'refused'")
    return sum("can change" in (r[0] or "") or "can be edited" in (r[0] or "")
               or "entries" in (r[0] or "") for r in rows)  # fmt: skip


async def test_scopes_once_thread_and_group(tmp_path: Path) -> None:
    async with runtime(tmp_path, lambda r: Reply(text="hi"), tools=[add]) as rt:
        client = LocalClient(rt)
        thread = await set_point(rt, kind="inference", scope="thread", thread_id="t2")
        assert (await rt.run_turn(msg("a", "t1"))).status == "done"
        out = await rt.run_turn(msg("b", "t2"))
        pause = await paused(rt)
        await go(rt, Decision.approve(pause.call_id, seen=pause.args), out.turn_id)
        assert [(p.id, p.hits) for p in await client.breakpoints()] == [(thread, 1)]
        removed = await client.remove_breakpoint(thread)
        assert removed.breakpoint.id == thread and await client.breakpoints() == []
        assert (await rt.run_turn(msg("c", "t2"))).status == "done"

        once = await set_point(rt, kind="inference", scope="once")
        out = await rt.run_turn(msg("d", "t3"))
        pause = await paused(rt)
        await go(rt, Decision.approve(pause.call_id, seen=pause.args), out.turn_id)
        assert (await rt.run_turn(msg("e", "t3"))).status == "done"  # spent
        [spent] = await client.breakpoints()
        assert (spent.id, spent.hits, spent.spent) == (once, 1, True)

        await set_point(rt, kind="inference", scope="group", group="task")
        assert (await rt.run_turn(msg("f", "t4"))).status == "done"  # chat: not paused
        task = msg("g", "t5").model_copy(update={"meta": {"group": "task"}})
        assert (await rt.run_turn(task)).status == "waiting"

        with pytest.raises(Invalid, match="unknown group"):
            await set_point(rt, kind="inference", scope="group", group="nope")
        with pytest.raises(Invalid, match="thread breakpoint names its thread"):
            await set_point(rt, kind="inference", scope="thread")
        with pytest.raises(Invalid, match="unknown tool"):
            await set_point(rt, kind="call", tool="nope")
        with pytest.raises(Invalid, match="names no tool"):
            await set_point(rt, kind="inference", tool="add")


async def test_every_strategy_pauses_plan_execute_at_its_commands_and_direct_before_it_answers(
    tmp_path: Path,
) -> None:
    def plans(request: ModelRequest) -> Reply:
        if request.purpose != "plan":
            return Reply(text="answer: " + request.messages[-1].text[-40:])
        state = json.loads(request.messages[0].text)
        if state["done_plans"]:
            return Reply(text=json.dumps({"next_action": "response"}))
        command = {"purpose": "sum", "tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}}
        return Reply(text=json.dumps({"next_action": "execute", "execution_commands": [command]}))

    async with runtime(tmp_path, plans, tools=[add]) as rt:
        await set_point(rt, kind="call", tool="add", scope="room")
        handle = await rt.submit(msg("go"), strategy="plan_execute")
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(handle.turn_id)
        assert out.status == "waiting" and len(requests(rt)) == 1
        pause = await paused(rt)
        assert pause.args["calls"][0]["args"] == {"a": 1, "b": 2}
        edited = {**pause.args, "calls": [{**pause.args["calls"][0], "args": {"a": 40, "b": 2}}]}
        out = await go(rt, Decision.approve(pause.call_id, args=edited, seen=pause.args),
                       out.turn_id)  # fmt: skip
        assert out.status == "done" and '"result": "42"' in requests(rt)[-1].messages[-1].text

        await set_point(rt, kind="inference", scope="once")
        handle = await rt.submit(msg("hi", "t9"), strategy="direct")
        with anyio.fail_after(PATIENCE):
            out = await rt.wait_turn(handle.turn_id)
        asked = len(requests(rt))
        assert out.status == "waiting"
        pause = await paused(rt)
        out = await go(rt, Decision.step(pause.call_id, seen=pause.args), out.turn_id)
    assert out.status == "done" and len(requests(rt)) == asked + 1  # no calls: no pause after


async def test_a_once_breakpoint_holds_every_call_of_its_round_it_matches(tmp_path: Path) -> None:
    def twice(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "user":
            return Reply(calls=[("add", {"a": 1, "b": 1}), ("add", {"a": 2, "b": 2})])
        return Reply(text=" | ".join(m.text for m in after_tools(request.messages)))

    async with runtime(tmp_path, twice, tools=[add]) as rt:
        await set_point(rt, kind="call", tool="add", scope="once")
        out = await rt.run_turn(msg("go"))
        pause = await paused(rt)
        assert [c["args"] for c in pause.args["calls"]] == [{"a": 1, "b": 1}, {"a": 2, "b": 2}]
        out = await go(rt, Decision.approve(pause.call_id, seen=pause.args), out.turn_id)
        [point] = await LocalClient(rt).breakpoints()
    assert out.text == "2 | 4" and (point.hits, point.spent) == (1, True)
