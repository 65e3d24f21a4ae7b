"""plan_execute: normalization of the planner's answer, and scenario tests of the tool loop.

The planner is scripted: a request with purpose "plan" gets a JSON plan, any other request
is the final answer, which quotes the last message it was given (so a final answer built
from execution records starts with "action_results:").
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

import anyio
import pytest

from engine.config import Config
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.domain.outcome import TurnOutcome
from engine.domain.plans import (
    ACTION_RESULTS,
    Command,
    PlanDecision,
    action_results,
    early_next_action,
    normalize,
    parse_planner_text,
)
from engine.providers.base import ModelEvent, ModelRequest, StopEvent, TextDelta, UsageEvent
from engine.runtime import Runtime
from engine.tools import tool
from tests import helpers
from tests.helpers import msg, rows
from tests.scripted import Reply, ScriptedModel, add, shell

pytestmark = pytest.mark.usefixtures("store_backend")

RECORD_KEYS = {"purpose", "tool_name", "kwargs", "todo_suggestion", "next", "success", "result",
               "error"}  # fmt: skip


# -- normalization ------------------------------------------------------------------------


def cmd(tool_name: str = "add", **kw: Any) -> dict[str, Any]:
    return {"tool_name": tool_name, **kw}


def test_execution_commands_win_over_tool_commands_and_tool_command():
    decision = normalize(
        {
            "execution_commands": [cmd("a")],
            "tool_commands": [cmd("b")],
            "tool_command": cmd("c"),
        }
    )
    assert [c.tool_name for c in decision.commands] == ["a"]


def test_tool_commands_list_wins_over_tool_command():
    decision = normalize({"tool_commands": [cmd("b"), cmd("b2")], "tool_command": cmd("c")})
    assert [c.tool_name for c in decision.commands] == ["b", "b2"]


def test_execution_commands_that_is_not_a_list_falls_through():
    decision = normalize({"execution_commands": cmd("a"), "tool_commands": [cmd("b")]})
    assert [c.tool_name for c in decision.commands] == ["b"]


def test_single_tool_command_is_promoted_to_a_list():
    decision = normalize({"tool_command": cmd("c", tool_kwargs={"x": 1})})
    assert decision.commands == [Command("Use c", "c", {"x": 1}, "", "")]
    assert decision.executes


def test_commands_without_tool_name_and_non_dicts_are_dropped():
    decision = normalize(
        {
            "execution_commands": [
                {"purpose": "no tool"},
                {"tool_name": ""},
                {"tool_name": "   "},
                {"tool_name": 5},
                {"tool_name": None},
                "add",
                7,
                None,
                ["add"],
                cmd("kept"),
            ]
        }
    )
    assert [c.tool_name for c in decision.commands] == ["kept"]


def test_purpose_defaults_to_use_tool():
    decision = normalize(
        {"execution_commands": [cmd("add"), cmd("add", purpose=""), cmd("add", purpose=3),
                                cmd("add", purpose="Sum it")]}
    )  # fmt: skip
    assert [c.purpose for c in decision.commands] == ["Use add", "Use add", "Use add", "Sum it"]


@pytest.mark.parametrize("kwargs", ["a=1", [1, 2], 3, None, True])
def test_non_object_kwargs_become_empty(kwargs):
    decision = normalize({"execution_commands": [cmd("add", tool_kwargs=kwargs)]})
    assert decision.commands[0].tool_kwargs == {}


def test_object_kwargs_are_kept():
    decision = normalize({"execution_commands": [cmd("add", tool_kwargs={"a": 1, "b": 2})]})
    assert decision.commands[0].tool_kwargs == {"a": 1, "b": 2}


def test_todo_suggestion_fallback_chain_and_next_mirrors_it():
    decision = normalize(
        {
            "todo_suggestion": "decision todo",
            "next": "decision next",
            "execution_commands": [
                cmd("own", todo_suggestion="own todo", next="own next"),
                cmd("next_only", next="command next"),
                cmd("fallback"),
            ],
        }
    )
    assert [(c.todo_suggestion, c.next) for c in decision.commands] == [
        ("own todo", "own todo"),
        ("command next", "command next"),
        ("decision todo", "decision todo"),
    ]
    only_next = normalize({"next": "decision next", "execution_commands": [cmd("x")]})
    assert (only_next.commands[0].todo_suggestion, only_next.commands[0].next) == (
        "decision next",
        "decision next",
    )
    nothing = normalize({"execution_commands": [cmd("x", todo_suggestion=4)]})
    assert (nothing.commands[0].todo_suggestion, nothing.commands[0].next) == ("", "")


@pytest.mark.parametrize("value", ["EXECUTE", "Execute", " execute "])
def test_next_action_is_case_insensitive(value):
    decision = normalize({"next_action": value, "execution_commands": [cmd()]})
    assert decision.next_action == "execute" and decision.executes


@pytest.mark.parametrize("value", ["RESPONSE", "Response", " response "])
def test_next_action_response_is_case_insensitive_and_wins_over_commands(value):
    decision = normalize({"next_action": value, "execution_commands": [cmd()]})
    assert decision.next_action == "response" and not decision.executes


@pytest.mark.parametrize("value", [None, "", "run", 1, ["execute"]])
def test_missing_or_invalid_next_action_is_inferred_from_commands(value):
    raw: dict[str, Any] = {} if value is None else {"next_action": value}
    assert normalize({**raw, "execution_commands": [cmd()]}).next_action == "execute"
    assert normalize({**raw, "execution_commands": []}).next_action == "response"
    assert normalize(raw).next_action == "response"


def test_next_action_execute_without_commands_does_not_execute():
    decision = normalize({"next_action": "execute", "execution_commands": [{"purpose": "x"}]})
    assert decision.commands == [] and not decision.executes


def test_use_tool_false_is_anded_in():
    decision = normalize({"next_action": "execute", "use_tool": False,
                          "execution_commands": [cmd()]})  # fmt: skip
    assert decision.use_tool is False and decision.executes is False
    kept = normalize({"next_action": "execute", "use_tool": True, "execution_commands": [cmd()]})
    assert kept.executes is True
    not_a_bool = normalize({"use_tool": "no", "execution_commands": [cmd()]})
    assert not_a_bool.use_tool is True and not_a_bool.executes is True


@pytest.mark.parametrize(
    "text",
    [
        '[{"tool_name": "add"}]',
        '"execute"',
        "42",
        "null",
        "I think I should call add.",
        "{not json at all}",
        "",
        '```json\n["execute"]\n```',
    ],
)
def test_answer_that_is_not_an_object_means_response(text):
    decision = normalize(parse_planner_text(text))
    assert decision == PlanDecision("response") and not decision.executes


@pytest.mark.parametrize("raw", [None, [], ["execute"], "execute", 3, 2.5, True])
def test_normalize_of_non_objects_is_response(raw):
    assert normalize(raw) == PlanDecision("response")


def test_code_fenced_and_prose_wrapped_objects_are_parsed():
    body = '{"next_action": "execute", "execution_commands": [{"tool_name": "add"}]}'
    for text in (f"```json\n{body}\n```", f"```\n{body}\n```", f"Here is my plan:\n{body}\nok"):
        decision = normalize(parse_planner_text(text))
        assert decision.executes and decision.commands[0].tool_name == "add", text


def test_early_next_action_only_once_the_value_is_complete():
    full = '{"next_action": "response", "execution_commands": []}'
    seen = [early_next_action(full[:n]) for n in range(len(full) + 1)]
    complete_at = full.index('"response"') + len('"response"')
    assert all(v is None for v in seen[:complete_at])
    assert all(v == "response" for v in seen[complete_at:])
    assert early_next_action('{"next_action" : "EXECUTE"') == "execute"
    assert early_next_action('{"next_action": "Response ",') == "response"
    assert early_next_action('{"next_action": ') is None


def test_early_next_action_ignores_nested_keys():
    prefix = '{"execution_commands": [{"tool_name": "t", "tool_kwargs": {"next_action": "response"'
    assert early_next_action(prefix) is None


def record(purpose: str, tool_name: str = "add", **kw: Any) -> dict[str, Any]:
    base = {"purpose": purpose, "tool_name": tool_name, "kwargs": {}, "todo_suggestion": "",
            "next": "", "success": True, "result": "r", "error": None}  # fmt: skip
    return {**base, **kw}


def test_action_results_number_repeated_purposes():
    out = action_results(
        [record("P", result="1"), record("Q"), record("P", result="2"),
         record("P", success=False, result=None, error="error: e")]
    )  # fmt: skip
    assert list(out) == ["P", "Q", "P (2)", "P (3)"]
    assert out["P"]["result"] == "1" and out["P (2)"]["result"] == "2"
    assert out["P (3)"] == {"tool_name": "add", "success": False, "result": None,
                            "error": "error: e"}  # fmt: skip


def test_action_results_never_overwrite_a_literal_numbered_purpose():
    out = action_results([record("P"), record("P (2)"), record("P")])
    assert list(out) == ["P", "P (2)", "P (3)"]


# -- scenarios ----------------------------------------------------------------------------


# The planner is shown the tools it may call: add and shell (a test lists them).
runtime = partial(helpers.runtime, tools=(add, shell))


async def run_plan(rt: Runtime, text: str = "go", strategy: str = "plan_execute") -> TurnOutcome:
    handle = await rt.submit(msg(text), strategy=strategy)
    return await rt.wait_turn(handle.turn_id)


async def turn_record(rt: Runtime, turn_id: str) -> dict[str, Any]:
    [(raw,)] = await rows(rt, "SELECT record FROM turns WHERE id=?", turn_id)
    return json.loads(raw)


def planner(plans: Callable[[dict[str, Any]], Any]) -> ScriptedModel:
    """A model whose planner answers `plans(round_state)` (JSON-encoded unless a str) and
    whose final answer quotes the last message it was given."""

    def script(request: ModelRequest) -> Reply:
        if request.purpose == "plan":
            [user] = request.messages
            plan = plans(json.loads(user.text))
            return Reply(text=plan if isinstance(plan, str) else json.dumps(plan))
        return Reply(text=request.messages[-1].text)

    return ScriptedModel(script)


def plan_requests(model: ScriptedModel) -> list[ModelRequest]:
    return [r for r in model.requests if r.purpose == "plan"]


def final_results(model: ScriptedModel) -> dict[str, Any]:
    """The action_results the final answer's request carried."""
    final = model.requests[-1]
    assert final.purpose != "plan"
    text = final.messages[-1].text
    assert text.startswith(ACTION_RESULTS)
    body = text[len(ACTION_RESULTS) :]
    return json.loads(body[: body.rindex("}") + 1])


class ClosableProvider:
    """A planner that streams many chunks and records whether its stream was closed early."""

    name = "closable"
    model = "closable-1"

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks
        self.yielded = 0
        self.closed_early = False
        self.finished = False
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if request.purpose != "plan":
            yield TextDelta(text="final answer")
            yield StopEvent()
            return
        try:
            for chunk in self.chunks:
                yield TextDelta(text=chunk)
                self.yielded += 1
            yield UsageEvent(input_tokens=1, output_tokens=1)
            yield StopEvent()
            self.finished = True
        finally:  # runs on GeneratorExit when the consumer closes the stream early
            self.closed_early = not self.finished


@pytest.mark.anyio
async def test_short_circuit_closes_the_planner_stream_early(tmp_path):
    head = ['{"next_', 'action": "res', 'ponse", ']
    tail = ['"execution_commands": [{"tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}}'] + [
        ', {"tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}}' for _ in range(50)
    ] + ["]}"]  # fmt: skip
    provider = ClosableProvider(head + tail)
    async with runtime(tmp_path, provider) as rt:
        out = await run_plan(rt)
        assert provider.closed_early and not provider.finished
        # closed right after the chunk that completed the value, not before, not later
        assert provider.yielded == len(head) - 1  # the third yield raised GeneratorExit
        assert (out.status, out.reason) == ("done", "natural")
        assert out.text == "final answer"
        assert out.calls == []
        summaries = await rows(rt, "SELECT summary FROM steps WHERE kind='plan'")
        assert len(summaries) == 1 and "short-circuit" in summaries[0][0]
        assert summaries == [("plan: response (short-circuit)",)]
        assert [r.purpose for r in provider.requests] == ["plan", "answer"]


@pytest.mark.anyio
async def test_no_short_circuit_when_planner_executes(tmp_path):
    chunks = ['{"next_action": "execute", ', '"execution_commands": [{"tool_name": "add", ',
              '"tool_kwargs": {"a": 1, "b": 2}}]}']  # fmt: skip

    class Once(ClosableProvider):
        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            if request.purpose == "plan" and len(self.requests) >= 1:
                self.chunks = ['{"next_action": "response"}']
            async for event in super().stream(request):
                yield event

    provider = Once(chunks)
    async with runtime(tmp_path, provider) as rt:
        out = await run_plan(rt)
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["succeeded"]
        summaries = [s for (s,) in await rows(rt, "SELECT summary FROM steps WHERE kind='plan'"
                                               " ORDER BY id")]  # fmt: skip
        assert summaries[0] == "calls add"
        assert summaries[-1] == "plan: response (short-circuit)"


@pytest.mark.anyio
async def test_round_state_is_passed_to_the_planner(tmp_path):
    def plans(state: dict[str, Any]) -> dict[str, Any]:
        i = state["round_index"]
        if i < 2:
            return {"next_action": "execute", "execution_commands": [
                {"purpose": f"sum {i}", "tool_name": "add", "tool_kwargs": {"a": i, "b": 10},
                 "todo_suggestion": f"then {i}"}]}  # fmt: skip
        return {"next_action": "response"}

    model = planner(plans)
    config = Config.model_validate({"runtime": {"plan_max_rounds": 4}})
    async with runtime(tmp_path, model, config=config) as rt:
        out = await run_plan(rt, "please add things")
        assert (out.status, out.reason) == ("done", "natural")
        states = [json.loads(r.messages[0].text) for r in plan_requests(model)]
        assert len(states) == 3
        for r in plan_requests(model):
            assert len(r.messages) == 1 and r.messages[0].role == "user"
            assert r.system and "next_action" in r.system
        tool_names = [t["name"] for t in states[0]["available_tools"]]
        assert sorted(tool_names) == ["add", "shell"]
        for i, state in enumerate(states):
            assert state["user_input"] == "please add things"
            assert state["round_index"] == i
            assert state["max_rounds"] == 4
            assert state["available_tools"] == states[0]["available_tools"]
            assert "user_extra_requirement" in state
        assert states[0]["done_plans"] == [] and states[0]["last_round_result"] == []
        r0 = record("sum 0", kwargs={"a": 0, "b": 10}, todo_suggestion="then 0",
                    next="then 0", result="10")  # fmt: skip
        r1 = record("sum 1", kwargs={"a": 1, "b": 10}, todo_suggestion="then 1",
                    next="then 1", result="11")  # fmt: skip
        assert states[1]["done_plans"] == [r0] and states[1]["last_round_result"] == [r0]
        assert states[2]["done_plans"] == [r0, r1] and states[2]["last_round_result"] == [r1]


@pytest.mark.anyio
async def test_planner_arguments_nested_past_the_limit_fail_the_call_not_the_turn(tmp_path):
    # Found by tests/fuzz: 600-deep tool_kwargs reached the conversation, which could not be
    # serialized, and the turn ended in error.
    deep = json.loads("[" * 600 + "]" * 600)

    def plans(state: dict[str, Any]) -> dict[str, Any]:
        if state["round_index"] == 0:
            return {"next_action": "execute", "execution_commands": [
                {"purpose": "deep", "tool_name": "add", "tool_kwargs": {"a": 1, "b": deep}},
                {"purpose": "fine", "tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}}]}  # fmt: skip
        return {"next_action": "response"}

    model = planner(plans)
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt)
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["failed", "succeeded"]
        results = final_results(model)
        assert "nested more than 64 deep" in results["deep"]["error"]
        assert results["fine"]["result"] == "3"


@pytest.mark.anyio
async def test_concurrency_limit_in_one_round(tmp_path):
    running, peak, seen = 0, 0, []

    @tool
    async def work(n: int) -> int:
        """Track how many run at once."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(5):
            await anyio.sleep(0.001)  # held running, so the calls overlap up to the limit
        seen.append(n)
        running -= 1
        return n

    def plans(state: dict[str, Any]) -> dict[str, Any]:
        if state["round_index"] == 0:
            return {"next_action": "execute", "execution_commands": [
                {"tool_name": "work", "tool_kwargs": {"n": i}} for i in range(5)]}  # fmt: skip
        return {"next_action": "response"}

    model = planner(plans)
    config = Config.model_validate({"runtime": {"tool_concurrency": 2}})
    async with runtime(tmp_path, model, tools=[work], config=config) as rt:
        out = await run_plan(rt)
        assert (out.status, out.reason) == ("done", "natural")
        assert sorted(seen) == [0, 1, 2, 3, 4]
        assert peak == 2
        logs = (await turn_record(rt, out.turn_id))["tool_logs"]
        assert [r["kwargs"]["n"] for r in logs] == [0, 1, 2, 3, 4]


@pytest.mark.anyio
async def test_max_rounds_makes_no_extra_planner_call_and_is_recorded(tmp_path):
    def plans(state: dict[str, Any]) -> dict[str, Any]:
        return {"next_action": "execute", "execution_commands": [
            {"purpose": "again", "tool_name": "add", "tool_kwargs": {"a": 1, "b": 1}}]}  # fmt: skip

    model = planner(plans)
    config = Config.model_validate({"runtime": {"plan_max_rounds": 3}})
    async with runtime(tmp_path, model, config=config) as rt:
        out = await run_plan(rt)
        assert len(plan_requests(model)) == 3
        assert len(model.requests) == 4  # 3 planner calls + the final answer
        assert (out.status, out.reason) == ("done", "natural")
        assert "max_rounds" in (out.detail or "")
        assert [c["status"] for c in out.calls] == ["succeeded"] * 3
        record_ = await turn_record(rt, out.turn_id)
        assert record_["max_rounds_reached"] == 3
        assert len(record_["tool_logs"]) == 3
        assert out.text.startswith(ACTION_RESULTS)  # the final answer was produced
        assert list(final_results(model)) == ["again", "again (2)", "again (3)"]


@pytest.mark.anyio
async def test_duplicate_purposes_and_tool_logs(tmp_path):
    first_may_finish = anyio.Event()

    @tool
    async def slow(x: int) -> str:
        """Finishes only after `fast` did."""
        await first_may_finish.wait()
        return f"slow {x}"

    @tool
    def fast(x: int) -> str:
        """Finishes at once."""
        first_may_finish.set()
        return f"fast {x}"

    def plans(state: dict[str, Any]) -> dict[str, Any]:
        if state["round_index"] == 0:
            return {"next_action": "execute", "todo_suggestion": "check", "execution_commands": [
                {"purpose": "P", "tool_name": "slow", "tool_kwargs": {"x": 1}},
                {"purpose": "Q", "tool_name": "fast", "tool_kwargs": {"x": 2},
                 "next": "compare"},
            ]}  # fmt: skip
        if state["round_index"] == 1:
            return {"tool_command": {"purpose": "P", "tool_name": "fast", "tool_kwargs": {"x": 3}}}
        return {"next_action": "response"}

    model = planner(plans)
    async with runtime(tmp_path, model, tools=[slow, fast]) as rt:
        out = await run_plan(rt)
        assert (out.status, out.reason) == ("done", "natural")
        results = final_results(model)
        assert list(results) == ["P", "Q", "P (2)"]
        assert results["P"] == {"tool_name": "slow", "success": True, "result": "slow 1",
                                "error": None}  # fmt: skip
        assert results["P (2)"]["result"] == "fast 3"
        assert "P (2)" in out.text
        logs = (await turn_record(rt, out.turn_id))["tool_logs"]
        assert all(set(r) == RECORD_KEYS for r in logs)
        assert logs == [
            record("P", "slow", kwargs={"x": 1}, todo_suggestion="check", next="check",
                   result="slow 1"),
            record("Q", "fast", kwargs={"x": 2}, todo_suggestion="compare", next="compare",
                   result="fast 2"),
            record("P", "fast", kwargs={"x": 3}, result="fast 3"),
        ]  # fmt: skip


@pytest.mark.anyio
async def test_suspended_command_approved(tmp_path):
    def plans(state: dict[str, Any]) -> dict[str, Any]:
        if not state["done_plans"]:
            return {"next_action": "execute", "execution_commands": [
                {"purpose": "list files", "tool_name": "shell",
                 "tool_kwargs": {"command": "ls"}}]}  # fmt: skip
        return {"next_action": "response"}

    model = planner(plans)
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt)
        assert (out.status, out.reason) == ("waiting", "suspended")
        assert len(model.requests) == 1  # no planning on while the only command waits
        [pending] = out.pending
        assert pending["tool"] == "shell"
        assert await rt.decide(Decision.approve(pending["call_id"])) == "queued"
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["succeeded"]
        assert "ran ls" in out.text
        assert final_results(model)["list files"]["result"] == "ran ls"
        # the planner saw the approved result before deciding to answer
        last_state = json.loads(plan_requests(model)[-1].messages[0].text)
        assert last_state["last_round_result"][0]["result"] == "ran ls"
        [log] = (await turn_record(rt, out.turn_id))["tool_logs"]
        assert (log["success"], log["result"], log["error"]) == (True, "ran ls", None)
        [(strategy,)] = await rows(rt, "SELECT strategy FROM turns WHERE id=?", out.turn_id)
        assert strategy == "plan_execute"


@pytest.mark.anyio
async def test_suspended_command_denied(tmp_path):
    def plans(state: dict[str, Any]) -> dict[str, Any]:
        if not state["done_plans"]:
            return {"next_action": "execute", "execution_commands": [
                {"purpose": "wipe", "tool_name": "shell",
                 "tool_kwargs": {"command": "rm -rf /"}}]}  # fmt: skip
        return {"next_action": "response"}

    model = planner(plans)
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt)
        assert out.status == "waiting"
        await rt.decide(Decision.cancel(out.pending[0]["call_id"], "not on prod"))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["cancelled"]
        assert "denied by operator: not on prod" in out.text
        wipe = final_results(model)["wipe"]
        assert wipe["success"] is False and wipe["result"] is None
        assert "denied by operator: not on prod" in wipe["error"]
        [log] = (await turn_record(rt, out.turn_id))["tool_logs"]
        assert log["success"] is False and "not on prod" in log["error"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "bad",
    [
        "this is not JSON at all",
        "",
        "{",
        '{"next_action": 5, "execution_commands": "x", "tool_commands": {"a": 1},'
        ' "tool_command": [1], "use_tool": "yes", "todo_suggestion": []}',
        '{"next_action": ["execute"], "execution_commands": [null, 1, "add", {"tool_name": 5}]}',
        '["execute", {"tool_name": "add"}]',
        "null",
    ],
)
async def test_malformed_planner_output_never_crashes_the_turn(tmp_path, bad):
    model = planner(lambda state: bad)
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt, "hello")
        assert (out.status, out.reason) == ("done", "natural")
        assert out.text == "hello"  # the final answer, from the conversation alone
        assert out.calls == []
        assert len(plan_requests(model)) == 1


@pytest.mark.anyio
async def test_garbage_typed_commands_run_as_failures_and_the_turn_answers(tmp_path):
    def plans(state: dict[str, Any]) -> Any:
        if state["round_index"] == 0:
            return {"next_action": "EXECUTE", "execution_commands": [
                {"tool_name": "add", "tool_kwargs": "a=1,b=2", "purpose": 7},
                {"tool_name": "nope", "tool_kwargs": {}},
                {"tool_name": "add", "tool_kwargs": {"a": "x", "b": []}},
            ]}  # fmt: skip
        return "{{{ garbage"

    model = planner(plans)
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt)
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["failed"] * 3
        logs = (await turn_record(rt, out.turn_id))["tool_logs"]
        assert [(r["purpose"], r["kwargs"], r["success"]) for r in logs] == [
            ("Use add", {}, False),
            ("Use nope", {}, False),
            ("Use add", {"a": "x", "b": []}, False),
        ]
        assert all(r["error"] for r in logs)
        assert list(final_results(model)) == ["Use add", "Use nope", "Use add (2)"]


@pytest.mark.anyio
async def test_planner_output_with_a_huge_integer_does_not_crash_the_turn(tmp_path):
    model = planner(lambda state: '{"execution_commands": [], "n": ' + "1" * 5000 + "}")
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt, "hello")
        assert (out.status, out.reason) == ("done", "natural"), out.detail


@pytest.mark.anyio
async def test_deeply_nested_planner_output_does_not_crash_the_turn(tmp_path):
    model = planner(lambda state: "[" * 100_000)
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt, "hello")
        assert (out.status, out.reason) == ("done", "natural"), out.detail


@pytest.mark.anyio
async def test_strategy_is_recorded_on_the_turn(tmp_path):
    model = planner(lambda state: {"next_action": "response"})
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt, "hi")
        assert (out.status, out.reason, out.text) == ("done", "natural", "hi")
        react = await run_plan(rt, "again", strategy="react")
        strategies = await rows(rt, "SELECT id, strategy FROM turns ORDER BY created_at, id")
        assert dict(strategies) == {out.turn_id: "plan_execute", react.turn_id: "react"}
        # no records: nothing injected, no tool_logs
        assert "tool_logs" not in await turn_record(rt, out.turn_id)


@pytest.mark.anyio
async def test_direct_strategy_one_inference_no_tools(tmp_path):
    model = ScriptedModel(lambda request: Reply(text="direct answer",
                                                calls=[("add", {"a": 1, "b": 2})]))  # fmt: skip
    async with runtime(tmp_path, model) as rt:
        out = await run_plan(rt, "hi", strategy="direct")
        assert (out.status, out.reason, out.text) == ("done", "natural", "direct answer")
        assert len(model.requests) == 1
        assert model.requests[0].tools == []
        assert model.requests[0].purpose == "answer"
        assert out.calls == []
        [(strategy,)] = await rows(rt, "SELECT strategy FROM turns WHERE id=?", out.turn_id)
        assert strategy == "direct"


@pytest.mark.anyio
async def test_the_turn_record_survives_loading_the_turn_again(tmp_path):
    """Issue 14: a turn loaded from execution.db (to resume or cancel it) started from an
    empty record, and its next commit wrote that over the strategy's data (tool_logs)."""

    def plans(state: dict[str, Any]) -> dict[str, Any]:
        return {"next_action": "execute", "execution_commands": [
            {"purpose": "list", "tool_name": "shell", "tool_kwargs": {"command": "ls"}},
            {"purpose": "sum", "tool_name": "add", "tool_kwargs": {"a": 1, "b": 2}}]}  # fmt: skip

    config = Config.model_validate({"runtime": {"plan_max_rounds": 1}})
    async with runtime(tmp_path, planner(plans), config=config) as rt:
        out = await run_plan(rt)
        # max_rounds reached with shell still waiting: answered, and waiting for shell
        assert (out.status, out.reason) == ("waiting", "suspended")
        kept = await turn_record(rt, out.turn_id)
        assert kept["max_rounds_reached"] == 1
        assert [r["purpose"] for r in kept["tool_logs"]] == ["list", "sum"]
    async with runtime(tmp_path, planner(plans), config=config, first_id=100) as rt:
        assert await rt.cancel_turn(out.turn_id, "not needed any more")
        done = await rt.outcome(out.turn_id)
        assert (done.status, done.reason) == ("done", "cancelled")
        assert await turn_record(rt, out.turn_id) == kept


@pytest.mark.anyio
async def test_the_extra_requirement_reaches_the_planner_and_the_answer_after_a_resume(tmp_path):
    """The seed's planner reads `user_extra_requirement`: what the sender asks beyond the
    text, here a message's meta `extra_requirement`. It was always empty."""

    def plans(state: dict[str, Any]) -> dict[str, Any]:
        if not state["done_plans"]:
            return {"next_action": "execute", "execution_commands": [
                {"purpose": "list files", "tool_name": "shell",
                 "tool_kwargs": {"command": "ls"}}]}  # fmt: skip
        return {"next_action": "response"}

    model = planner(plans)
    message = Message(origin="invoke", sender="test", thread_id="t1", text="go",
                      meta={"extra_requirement": "answer in one line"})  # fmt: skip
    async with runtime(tmp_path, model) as rt:
        handle = await rt.submit(message, strategy="plan_execute")
        out = await rt.wait_turn(handle.turn_id)
        assert (out.status, out.reason) == ("waiting", "suspended")
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))  # resumed from the db
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        states = [json.loads(r.messages[0].text) for r in plan_requests(model)]
        assert len(states) == 2
        assert [s["user_extra_requirement"] for s in states] == ["answer in one line"] * 2
        final = model.requests[-1]
        assert final.purpose == "answer" and "answer in one line" in (final.system or "")
