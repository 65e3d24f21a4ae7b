"""The turn loop as the seed has it (issue 14, "the loop true to the seed"): the order of the
plugin phases, gate outcomes reaching AfterToolExecute, no call `running` that never ran,
and a plugin narrowing the tools of one step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.domain.decisions import Decision
from engine.domain.messages import ConvMessage
from engine.providers.base import ModelRequest
from engine.turn.plugins import Gate, MaxRounds, Phase, PhaseContext, Plugin
from tests.helpers import msg, on, rows, runtime
from tests.scripted import Reply, echo_results, first_then

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


async def call_events(rt: Any) -> dict[str, list[str]]:
    """Each tool's CallChanged statuses, in order."""
    out: dict[str, list[str]] = {}
    for (body,) in await rows(rt, "SELECT body FROM events WHERE kind='call_changed' ORDER BY id"):
        event = json.loads(body)
        out.setdefault(event["tool"], []).append(event["status"])
    return out


class Blocker(Plugin):
    """Blocks every call of one tool at BeforeToolExecute."""

    phases = frozenset({Phase.BEFORE_TOOL_EXECUTE})

    def __init__(self, tool: str) -> None:
        self.tool = tool

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        return Gate.block("not today") if ctx.tool == self.tool else None


class StopAfterInference(Plugin):
    """Ends the turn once the model has answered, before any of its calls runs."""

    phases = frozenset({Phase.AFTER_INFERENCE})

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        ctx.request_stop("behavior_requested", "seen enough")
        return None


async def test_calls_the_gate_ends_never_show_running(tmp_path):
    def script(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "user":
            return Reply(calls=[("nope", {}), ("add", {"a": "x"}), ("boom", {}), ("add", "{bad")])
        return echo_results(request)

    async with runtime(tmp_path, script, plugins=[Blocker("boom")]) as rt:
        out = await rt.run_turn(msg("go"))
        assert [c["status"] for c in out.calls] == ["failed"] * 4
        assert "blocked: not today" in out.text
        # unknown tool, invalid arguments, blocked: failed straight from `new`
        assert await call_events(rt) == {"nope": ["failed"], "add": ["failed", "failed"],
                                         "boom": ["failed"]}  # fmt: skip
        statuses = await rows(rt, "SELECT status FROM tool_calls")
        assert statuses == [("failed",)] * 4


async def test_calls_of_a_turn_stopped_after_inference_are_cancelled_from_new(tmp_path):
    gated: list[str] = []

    class Gatekeeper(Plugin):
        phases = frozenset({Phase.BEFORE_TOOL_EXECUTE})

        async def on_phase(self, ctx: PhaseContext) -> Gate | None:
            gated.append(ctx.tool or "")
            return None

    script = first_then([("add", {"a": 1, "b": 2}), ("shell", {"command": "ls"})])
    async with runtime(tmp_path, script, plugins=[StopAfterInference(), Gatekeeper()]) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason, out.detail) == ("done", "behavior_requested", "seen enough")
        assert [c["status"] for c in out.calls] == ["cancelled", "cancelled"]
        # the seed's post-inference terminate: no tool round, so no gate and nothing running
        assert gated == []
        assert await call_events(rt) == {"add": ["cancelled"], "shell": ["cancelled"]}


class ToolPhases(Plugin):
    """Records BeforeToolExecute and AfterToolExecute: (phase, tool, args, outcome)."""

    phases = frozenset({Phase.BEFORE_TOOL_EXECUTE, Phase.AFTER_TOOL_EXECUTE})

    def __init__(self, gate: Gate | None = None) -> None:
        self.seen: list[tuple[str, str | None, Any, str | None]] = []
        self.gate = gate

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        before = ctx.phase is Phase.BEFORE_TOOL_EXECUTE
        self.seen.append(("before" if before else "after", ctx.tool, ctx.args, ctx.outcome))
        return self.gate if before and not ctx.approved else None


async def test_every_call_passes_before_and_after_tool_execute_with_its_outcome(tmp_path):
    def script(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "user":
            return Reply(calls=[("nope", {}), ("add", {"a": "x"}), ("add", "{bad"), ("boom", {}),
                                ("shell", {"command": "ls"}), ("add", {"a": 1, "b": 2})])  # fmt: skip
        return echo_results(request)

    tool_phases = ToolPhases()
    async with runtime(tmp_path, script, plugins=[Blocker("boom"), tool_phases]) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        # the seed's TOOL_CALL sub-state machine: BeforeToolExecute, then the gate's outcome
        # (failed: missing, invalid, blocked; suspended) or the tool's, then AfterToolExecute
        assert tool_phases.seen == [
            ("before", "nope", {}, None), ("after", "nope", {}, "failed"),
            ("before", "add", {"a": "x"}, None), ("after", "add", {"a": "x"}, "failed"),
            ("before", "add", "{bad", None), ("after", "add", "{bad", "failed"),
            ("before", "boom", {}, None), ("after", "boom", {}, "failed"),
            ("before", "shell", {"command": "ls"}, None),
            ("after", "shell", {"command": "ls"}, "suspended"),
            ("before", "add", {"a": 1, "b": 2}, None),
            ("after", "add", {"a": 1, "b": 2}, "succeeded"),
        ]  # fmt: skip
        tool_phases.seen.clear()
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert tool_phases.seen == [
            ("before", "shell", {"command": "ls"}, None),
            ("after", "shell", {"command": "ls"}, "succeeded"),
        ]


async def test_a_block_wins_over_a_missing_tool_and_a_suspend_loses_to_it(tmp_path):
    def script(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "user":
            return Reply(calls=[("nope", {}), ("add", {"a": "x"})])
        return echo_results(request)

    async with runtime(tmp_path / "a", script, plugins=[ToolPhases(Gate.block("no"))]) as rt:
        out = await rt.run_turn(msg("go"))
        assert [c["status"] for c in out.calls] == ["failed", "failed"]
        assert out.text == "nope: error: blocked: no\nadd: error: blocked: no"
    # an operator is never asked to approve a call that cannot run
    async with runtime(tmp_path / "b", script, plugins=[ToolPhases(Gate.suspend("ask"))]) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["failed", "failed"]
        assert "unknown tool 'nope'" in out.text and "invalid arguments for add" in out.text


class Recorder(Plugin):
    """Records every phase (with its call and outcome) and, between them, the checkpoints
    the turn committed since the phase before: the seed's canonical flow, as it happened."""

    def __init__(self) -> None:
        self.trace: list[str] = []
        self.store: Any = None
        self._seen = 0

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        await self.checkpoints()
        words = [ctx.phase.value, ctx.tool or "", ctx.outcome or ""]
        self.trace.append(" ".join(w for w in words if w))
        return None

    async def checkpoints(self) -> list[str]:
        found = await on(self.store).fetchall("SELECT kind FROM checkpoints ORDER BY id")
        kinds = [kind for (kind,) in found]
        self.trace += [f"[{k}]" for k in kinds[self._seen :]]
        self._seen = len(kinds)
        return self.trace


INFERENCE = ["StepStart", "BeforeInference", "AfterInference", "StepEnd"]


async def test_phases_and_checkpoints_in_the_seeds_order(tmp_path):
    recorder = Recorder()
    async with runtime(tmp_path, first_then([("add", {"a": 2, "b": 3})]),
                       plugins=[recorder]) as rt:  # fmt: skip
        recorder.store = rt.store
        out = await rt.run_turn(msg("add"))
        assert (out.status, out.reason) == ("done", "natural")
        assert await recorder.checkpoints() == [
            "RunStart", "[user_message]",
            *INFERENCE, "BeforeToolExecute add", "[assistant_turn_committed]",
            "AfterToolExecute add succeeded", "[tool_results_committed]",
            *INFERENCE, "[assistant_turn_committed]",
            "RunEnd", "[run_finished]",
        ]  # fmt: skip


async def test_phases_of_a_turn_that_waits_and_resumes(tmp_path):
    recorder = Recorder()
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})]),
                       plugins=[recorder]) as rt:  # fmt: skip
        recorder.store = rt.store
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        assert await recorder.checkpoints() == [
            "RunStart", "[user_message]",
            *INFERENCE, "BeforeToolExecute shell", "AfterToolExecute shell suspended",
            "[assistant_turn_committed]", "[tool_results_committed]",
            "RunEnd", "[run_finished]",
        ]  # fmt: skip
        recorder.trace.clear()
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        # the resumed run: RunStart, the decision's replay and its commit, the loop, RunEnd
        assert await recorder.checkpoints() == [
            "RunStart", "BeforeToolExecute shell", "AfterToolExecute shell succeeded",
            "[tool_results_committed]",
            *INFERENCE, "[assistant_turn_committed]",
            "RunEnd", "[run_finished]",
        ]  # fmt: skip


async def test_phases_of_a_plan_execute_turn_and_its_final_answer(tmp_path):
    def script(request: ModelRequest) -> Reply:
        if request.purpose == "plan":
            done = json.loads(request.messages[0].text)["done_plans"]
            commands = [] if done else [{"tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}}]
            return Reply(text=json.dumps({"next_action": "execute" if commands else "response",
                                          "execution_commands": commands}))  # fmt: skip
        return Reply(text="three")

    recorder = Recorder()
    async with runtime(tmp_path, script, plugins=[recorder]) as rt:
        recorder.store = rt.store
        handle = await rt.submit(msg("go"), strategy="plan_execute")
        out = await rt.wait_turn(handle.turn_id)
        assert (out.status, out.reason, out.text) == ("done", "natural", "three")
        assert await recorder.checkpoints() == [
            "RunStart", "[user_message]",
            *INFERENCE, "BeforeToolExecute add", "[assistant_turn_committed]",
            "AfterToolExecute add succeeded", "[tool_results_committed]",
            *INFERENCE,  # the planner answers "response"
            *INFERENCE, "[assistant_turn_committed]",  # the final answer is a step like any
            "RunEnd", "[run_finished]",
        ]  # fmt: skip


async def test_phases_of_a_tool_runner(tmp_path):
    recorder = Recorder()
    async with runtime(tmp_path, first_then([("add", {"a": 2, "b": 3})]),
                       plugins=[recorder]) as rt:  # fmt: skip
        recorder.store = rt.store
        runner = rt.tool_runner([ConvMessage(role="user", text="add")], thread_id="r")
        await runner.until_done()
        assert runner.status == "done"
        assert await recorder.checkpoints() == [
            "RunStart", "[user_message]",
            *INFERENCE, "BeforeToolExecute add", "[assistant_turn_committed]",
            "AfterToolExecute add succeeded", "[tool_results_committed]",
            *INFERENCE, "[assistant_turn_committed]",
            "RunEnd", "[run_finished]",
        ]  # fmt: skip


async def test_a_tool_runner_obeys_a_plugins_stop(tmp_path):
    script = first_then([("add", {"a": 2, "b": 3})])
    async with runtime(tmp_path, script, plugins=[MaxRounds(1)]) as rt:
        runner = rt.tool_runner([ConvMessage(role="user", text="add")], thread_id="r")
        seen = [m async for m in runner]
        assert len(seen) == 1 and seen[0].tool_calls
        assert (runner.status, runner.stopped_reason) == ("stopped", "stopped:max_rounds")
        assert [m.role for m in runner.messages] == ["user", "assistant", "tool"]
        [(status, reason)] = await rows(rt, "SELECT status, reason FROM turns")
        assert (status, reason) == ("done", "stopped:max_rounds")
        assert len(rt.provider.requests) == 1  # the second request was never sent


async def test_a_plugin_narrows_the_tools_of_one_step(tmp_path):
    seen: list[list[str]] = []

    class NoBoom(Plugin):
        phases = frozenset({Phase.STEP_START})

        async def on_phase(self, ctx: PhaseContext) -> Gate | None:
            assert ctx.tools is not None
            ctx.tools.remove("boom")
            return None

    class NoShellAtFirst(Plugin):
        phases = frozenset({Phase.BEFORE_INFERENCE})

        async def on_phase(self, ctx: PhaseContext) -> Gate | None:
            assert ctx.tools is not None
            seen.append(list(ctx.tools))  # StepStart's narrowing holds for the whole step
            if ctx.round_index == 0:
                ctx.tools = [name for name in ctx.tools if name != "shell"]
            return None

    # the model calls shell although it is not offered: the call fails, out of scope
    script = first_then([("shell", {"command": "ls"}), ("add", {"a": 1, "b": 2})])
    async with runtime(tmp_path, script, plugins=[NoBoom(), NoShellAtFirst()]) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "natural")
        offered = [[t["name"] for t in r.tools] for r in rt.provider.requests]
        assert offered == [["add"], ["add", "shell"]]
        assert seen == [["add", "shell"], ["add", "shell"]]
        assert [c["status"] for c in out.calls] == ["failed", "succeeded"]
        assert "shell: error: tool 'shell' is not offered in this step" in out.text
        assert await rows(rt, "SELECT count(*) FROM decisions") == [(0,)]  # nobody asked
