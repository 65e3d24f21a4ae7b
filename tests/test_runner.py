"""ToolRunner: the iterator API over assistant messages (issue 5, "ToolRunner").

Follows the seed's tool runner lifecycle: each iteration sends a request and yields the
message; an unchanged state gets the message appended; tool calls in the state's last
message are always handled; `generate_tool_response` is cached per iteration.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from engine.domain.decisions import Decision
from engine.domain.messages import ConvMessage, ToolCallPart
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import ModelRequest
from engine.providers.openai import OpenAIProvider
from engine.runtime import Runtime
from engine.tools import tool
from engine.turn.tool_runner import RunnerParams
from tests.helpers import rows, runtime
from tests.scripted import Reply, first_then
from tests.wait import until

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


class Counted:
    """Tools that count how often they really ran."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, Any]] = []

        @tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            self.runs.append(("add", (a, b)))
            return a + b

        @tool(approval="always")
        def shell(command: str) -> str:
            """Pretend to run a command."""
            self.runs.append(("shell", command))
            return f"ran {command}"

        self.add, self.shell = add, shell

    @property
    def tools(self) -> list[Any]:
        return [self.add, self.shell]


def user(text: str) -> ConvMessage:
    return ConvMessage(role="user", text=text)


def roles(messages: list[ConvMessage]) -> list[str]:
    return [m.role for m in messages]


async def test_unchanged_state_appends_message_and_results(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 2, "b": 3})]), counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        seen = [m async for m in runner]
        assert [bool(m.tool_calls) for m in seen] == [True, False]
        assert seen[-1].text == "add: 5"
        assert runner.iterations == len(rt.provider.requests) == 2
        assert roles(runner.messages) == ["user", "assistant", "tool", "assistant"]
        assert runner.messages[1] is seen[0] and runner.messages[3] is seen[1]
        assert runner.messages[2].text == "5"
        assert runner.messages[2].tool_call_id == seen[0].tool_calls[0].id
        # the second request carried the yielded message and its results
        assert roles(rt.provider.requests[1].messages) == ["user", "assistant", "tool"]
        assert counted.runs == [("add", (2, 3))]
        assert (runner.status, runner.stopped_reason) == ("done", None)
        assert runner.stopped_reason is None


async def test_push_messages_replaces_the_auto_append(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 1, "b": 2})]), counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        first = await runner.__anext__()
        note = ConvMessage(role="assistant", text="(noted)", tool_calls=first.tool_calls)
        runner.push_messages(note)  # not the yielded message itself
        second = await runner.__anext__()
        # the yielded message was not appended; the pushed one was, and its calls ran
        assert roles(runner.messages[:3]) == ["user", "assistant", "tool"]
        assert runner.messages[1] is note and first not in runner.messages
        assert counted.runs == [("add", (1, 2))]
        assert rt.provider.requests[-1].messages[1].text == "(noted)"
        assert second.text == "add: 3"
        await runner.until_done()
        assert runner.status == "done"


async def test_push_yielded_message_and_user_note(tmp_path):
    def script(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "user" and last.text == "add":
            return Reply(calls=[("add", {"a": 4, "b": 4})])
        return Reply(text=f"saw {last.role}: {last.text}")

    counted = Counted()
    async with runtime(tmp_path, script, counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        first = await runner.__anext__()
        runner.push_messages(first, user("also: be brief"))
        second = await runner.__anext__()
        # the state's last message is the user note: no tool calls to handle there
        assert roles(runner.messages) == ["user", "assistant", "user"]
        assert second.text == "saw user: also: be brief"
        assert counted.runs == []
        await runner.until_done()
        assert runner.status == "done"
        assert roles(runner.messages) == ["user", "assistant", "user", "assistant"]


async def test_push_yielded_message_and_generated_results_only_sends_next_request(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 2, "b": 5})]), counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        async for message in runner:
            if message.tool_calls:
                runner.push_messages(message)
                results = await runner.generate_tool_response()
                assert results is not None
                runner.push_messages(*results)
        assert counted.runs == [("add", (2, 5))]  # the runner did not run the tools again
        assert len(rt.provider.requests) == 2
        assert roles(runner.messages) == ["user", "assistant", "tool", "assistant"]
        assert runner.messages[-1].text == "add: 7"
        assert runner.status == "done"


@pytest.mark.parametrize("form", ["list", "callable"])
async def test_set_messages_params_replaces_the_state(tmp_path, form):
    def script(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.text == "add":
            return Reply(calls=[("add", {"a": 1, "b": 1})])
        return Reply(text=f"answering {last.text!r} after {len(request.messages)} message(s)")

    counted = Counted()
    async with runtime(tmp_path, script, counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        first = await runner.__anext__()
        assert first.tool_calls
        fresh = [user("start over"), user("what is 2+2?")]
        runner.set_messages_params(fresh if form == "list" else lambda old: old[:0] + fresh)
        assert runner.messages == fresh
        second = await runner.__anext__()
        assert rt.provider.requests[-1].messages == fresh
        assert second.text == "answering 'what is 2+2?' after 2 message(s)"
        assert counted.runs == []  # the replaced state's last message had no calls
        await runner.until_done()
        assert runner.messages == [*fresh, second]
        assert runner.status == "done"


async def test_generate_tool_response_is_cached_and_leaves_the_state(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 3, "b": 4})]), counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        first = await runner.__anext__()
        runner.push_messages(first)
        before = list(runner.messages)
        once = await runner.generate_tool_response()
        twice = await runner.generate_tool_response()
        assert once is twice
        assert [m.text for m in once] == ["7"]
        assert counted.runs == [("add", (3, 4))]
        assert runner.messages == before  # the state did not change
        # the runner uses the cached results: the tool is not run again
        second = await runner.__anext__()
        assert second.text == "add: 7"
        assert counted.runs == [("add", (3, 4))]
        assert roles(runner.messages) == ["user", "assistant", "tool"]


async def test_generate_tool_response_none_without_tool_calls(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, lambda r: Reply(text="hello"), counted.tools) as rt:
        runner = rt.tool_runner([user("hi")], thread_id="r")
        assert await runner.generate_tool_response() is None  # before any request
        message = await runner.__anext__()
        runner.push_messages(message)
        assert await runner.generate_tool_response() is None
        assert roles(runner.messages) == ["user", "assistant"]
        assert await runner.until_done() is None  # nothing left: no further request
        assert len(rt.provider.requests) == 1
        assert runner.status == "done"


async def test_generate_tool_response_sees_the_yielded_message(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 3, "b": 4})]), counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        await runner.__anext__()
        results = await runner.generate_tool_response()  # state unchanged
        assert results is not None and [m.text for m in results] == ["7"]
        assert roles(runner.messages) == ["user"]  # not changed by the call
        await runner.until_done()  # the loop appends the message and reuses the results
        assert counted.runs == [("add", (3, 4))]
        assert roles(runner.messages) == ["user", "assistant", "tool", "assistant"]


async def test_generate_tool_response_cleared_when_the_state_changes(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 1, "b": 2})]), counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        first = await runner.__anext__()
        runner.push_messages(first)
        once = await runner.generate_tool_response()
        assert [m.text for m in once] == ["3"]
        # a change clears the cache; the same message's calls are not run a second time:
        # the results come from the calls' recorded states
        runner.set_messages_params(lambda messages: messages)
        again = await runner.generate_tool_response()
        assert again is not once and again == once
        assert counted.runs == [("add", (1, 2))]
        # pushing a message with another call: recomputed from the new state
        extra = ConvMessage(
            role="assistant",
            tool_calls=[ToolCallPart(id="mine", name="add", arguments={"a": 10, "b": 20})],
        )
        runner.push_messages(*once, extra)
        third = await runner.generate_tool_response()
        assert [(m.tool_call_id, m.text) for m in third] == [("mine", "30")]
        assert counted.runs == [("add", (1, 2)), ("add", (10, 20))]
        await runner.until_done()
        assert counted.runs == [("add", (1, 2)), ("add", (10, 20))]
        assert roles(runner.messages) == ["user", "assistant", "tool", "assistant", "tool",
                                          "assistant"]  # fmt: skip
        assert runner.messages[-1].text == "add: 30"
        calls = await rows(rt, "SELECT tool, status FROM tool_calls ORDER BY step_id, idx")
        assert calls == [("add", "succeeded"), ("add", "succeeded")]


async def test_refusal_stops_without_running_tools(tmp_path):
    counted = Counted()
    script = lambda r: Reply(text="I won't", calls=[("add", {"a": 1, "b": 1})], refusal=True)  # noqa: E731
    async with runtime(tmp_path, script, counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        seen = [m async for m in runner]
        assert len(seen) == 1 and seen[0].refusal and seen[0].tool_calls == []
        assert counted.runs == []
        assert runner.status == "done"
        assert len(rt.provider.requests) == 1
        assert roles(runner.messages) == ["user", "assistant"]
        assert await rows(rt, "SELECT count(*) FROM tool_calls") == [(0,)]


async def test_max_iterations_sends_last_results_then_stops(tmp_path):
    counted = Counted()
    always = lambda r: Reply(text="more", calls=[("add", {"a": 1, "b": 1})])  # noqa: E731
    async with runtime(tmp_path, always, counted.tools) as rt:
        runner = rt.tool_runner([user("loop")], thread_id="r", max_iterations=3)
        seen = [m async for m in runner]
        requests = rt.provider.requests
        assert len(requests) == 4
        assert all(r.tools for r in requests[:3])
        assert requests[3].tools == []  # the final request is sent without tools
        assert requests[3].messages[-1].role == "tool"  # carrying the last results
        assert len(counted.runs) == 3
        sent = [m for m in requests[3].messages if m.role == "tool"]
        assert len(sent) == 3  # every executed result was sent
        assert seen[-1].tool_calls == []
        assert runner.messages[-1] is seen[-1]
        assert (runner.status, runner.stopped_reason) == ("stopped", "max_iterations")
        out = await rt.outcome(await turn_of(rt))
        assert (out.status, out.reason) == ("done", "stopped:max_iterations")
        assert await runner.until_done() is None  # stopped: nothing more
        assert len(rt.provider.requests) == 4


async def turn_of(rt: Runtime) -> str:
    [(turn_id,)] = await rows(rt, "SELECT id FROM turns WHERE strategy='runner'")
    return turn_id


async def test_runner_turn_is_recorded_like_any_turn(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 2, "b": 2})]), counted.tools) as rt:
        runner = rt.tool_runner([user("add")], thread_id="r")
        await runner.until_done()
        turn_id = await turn_of(rt)
        out = await rt.outcome(turn_id)
        assert (out.thread_id, out.status, out.reason) == ("r", "done", "natural")
        assert out.text == "add: 4"
        assert await rows(rt, "SELECT strategy, text FROM turns") == [("runner", "add")]
        steps = await rows(rt, "SELECT kind, status FROM steps WHERE turn_id=? ORDER BY id",
                           turn_id)  # fmt: skip
        assert steps == [("inference", "succeeded"), ("tool_round", "succeeded"),
                         ("inference", "succeeded")]  # fmt: skip
        assert await rows(rt, "SELECT tool, args, status, result FROM tool_calls") == [
            ("add", '{"a": 2, "b": 2}', "succeeded", "4")
        ]
        messages = await rows(rt, "SELECT role, text FROM messages WHERE turn_id=? ORDER BY seq",
                              turn_id)  # fmt: skip
        assert messages == [("user", "add"), ("assistant", "working"), ("tool", "4"),
                            ("assistant", "add: 4")]  # fmt: skip
        kinds = await rows(rt, "SELECT kind FROM checkpoints WHERE turn_id=? ORDER BY id", turn_id)
        assert [k[0] for k in kinds] == [
            "user_message",
            "assistant_turn_committed",
            "tool_results_committed",
            "assistant_turn_committed",
            "run_finished",
        ]


async def test_gate_suspends_and_the_runner_waits(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})]), counted.tools) as rt:
        runner = rt.tool_runner([user("go")], thread_id="r")
        last = await runner.until_done()
        assert runner.status == "waiting"
        assert counted.runs == []
        [pending] = runner.pending
        assert (pending.tool, pending.args) == ("shell", {"command": "ls"})
        # the model was told the call waits, and answered
        placeholder = runner.messages[2]
        assert (placeholder.role, placeholder.pending) == ("tool", True)
        assert last is not None and "waiting for an operator decision" in last.text
        out = await rt.outcome(await turn_of(rt))
        assert (out.status, out.reason) == ("waiting", "suspended")
        assert [p.call_id for p in await rt.pending()] == [pending.call_id]
        assert [m async for m in runner] == []  # a waiting runner yields nothing more


async def test_gate_approved_from_the_runner(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})]), counted.tools) as rt:
        runner = rt.tool_runner([user("go")], thread_id="r")
        await runner.until_done()
        [pending] = runner.pending
        assert await runner.decide(Decision.approve(pending.call_id)) == "queued"
        assert ("shell", "ls") in counted.runs
        assert runner.pending == []
        result = runner.messages[-1]
        assert (result.role, result.text, result.pending) == ("tool", "ran ls", False)
        last = await runner.until_done()
        assert runner.status == "done"
        assert last is not None and last.text == "shell: ran ls"
        assert rt.provider.requests[-1].messages[-1].text == "ran ls"
        assert rt.provider.requests[-1].tools  # an ordinary request, with tools


async def test_gate_cancel_decision_is_seen_by_the_model(tmp_path):
    counted = Counted()
    async with runtime(
        tmp_path, first_then([("shell", {"command": "rm -rf /"})]), counted.tools
    ) as rt:
        runner = rt.tool_runner([user("go")], thread_id="r")
        await runner.until_done()
        [pending] = runner.pending
        await runner.decide(Decision.cancel(pending.call_id, "not on prod"))
        last = await runner.until_done()
        assert runner.status == "done"
        assert counted.runs == []
        denial = [m for m in rt.provider.requests[-1].messages if m.role == "tool"][-1]
        assert denial.is_error and "denied by operator: not on prod" in denial.text
        assert last is not None and "not on prod" in last.text
        assert (await rt.outcome(await turn_of(rt))).calls[0]["status"] == "cancelled"


@pytest.mark.parametrize("action", ["approve", "cancel"])
async def test_decided_runner_turn_runs_once_and_ends_natural(tmp_path, action):
    counted = Counted()
    async with runtime(tmp_path, first_then([("shell", {"command": "ls"})]), counted.tools) as rt:
        runner = rt.tool_runner([user("go")], thread_id="r")
        await runner.until_done()
        [pending] = runner.pending
        decision = (
            Decision.approve(pending.call_id)
            if action == "approve"
            else Decision.cancel(pending.call_id, "no")
        )
        await runner.decide(decision)
        await runner.until_done()
        # anything the runtime started in the background has finished
        await until(lambda: list(rt.live), "the runtime's turns all ended",
                    ok=lambda live: not live)  # fmt: skip
        assert counted.runs == ([("shell", "ls")] if action == "approve" else [])
        out = await rt.outcome(await turn_of(rt))
        assert (out.status, out.reason) == ("done", "natural")
        replays = await rows(rt, "SELECT count(*) FROM steps WHERE kind='replay'")
        assert replays == [(1,)]


async def test_decided_mid_iteration_joins_the_tool_response_once(tmp_path):
    counted = Counted()
    script = first_then([("add", {"a": 1, "b": 2}), ("shell", {"command": "ls"})])
    async with runtime(tmp_path, script, counted.tools) as rt:
        runner = rt.tool_runner([user("go")], thread_id="r")
        async for _message in runner:
            for call in runner.pending:
                await runner.decide(Decision.approve(call.call_id))
        assert runner.status == "done"
        roles = [(m.role, m.tool_name) for m in runner.messages]
        assert roles == [
            ("user", None),
            ("assistant", None),
            ("tool", "add"),
            ("tool", "shell"),
            ("assistant", None),
        ]
        assert counted.runs.count(("shell", "ls")) == 1


async def test_set_messages_params_takes_the_whole_parameters(tmp_path):
    """Like the SDK's: messages, system, tools, max_tokens and the model, all at once;
    the list and the callable of messages still work (the test above)."""
    counted = Counted()
    script = first_then([("shell", {"command": "ls"}), ("add", {"a": 1, "b": 2})])
    async with runtime(tmp_path, script, counted.tools) as rt:
        runner = rt.tool_runner([user("hi")], thread_id="r", system="be kind", max_tokens=99)
        assert runner.params == RunnerParams([user("hi")], system="be kind", max_tokens=99)
        await runner.__anext__()
        first = rt.provider.requests[0]
        assert (first.system, first.max_tokens, first.model) == ("be kind", 99, None)
        assert [t["name"] for t in first.tools] == ["add", "shell"]
        runner.set_messages_params(
            RunnerParams([user("go")], system="be brief", tools=["add"], max_tokens=50,
                         model="other-model")
        )  # fmt: skip
        assert runner.messages == [user("go")] and runner.system == "be brief"
        second = await runner.__anext__()
        request = rt.provider.requests[-1]
        assert (request.system, request.max_tokens) == ("be brief", 50)
        assert request.model == "other-model"
        assert request.messages == [user("go")]
        assert [t["name"] for t in request.tools] == ["add"]
        assert [c.name for c in second.tool_calls] == ["shell", "add"]
        await runner.until_done()
        # the step offered add only: the model's shell call fails at the gate, unrun
        assert counted.runs == [("add", (1, 2))]
        shell_result = next(m for m in runner.messages if m.tool_name == "shell")
        assert "not offered in this step" in shell_result.text
        # a part of them: the rest stays as it was
        runner.set_messages_params(replace(runner.params, system=None))
        assert (runner.params.tools, runner.params.max_tokens) == (["add"], 50)


async def test_runner_tools_as_schemas_and_unknown_tools(tmp_path):
    counted = Counted()
    async with runtime(tmp_path, first_then([("add", {"a": 1, "b": 2})]), counted.tools) as rt:
        schema = {"name": "add", "description": "Sum two integers.", "parameters": {
            "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}  # fmt: skip
        runner = rt.tool_runner([user("add")], thread_id="r", tools=[schema])
        await runner.until_done()
        assert rt.provider.requests[0].tools == [schema]  # sent as given
        assert counted.runs == [("add", (1, 2))]  # and its calls run the room's tool
        with pytest.raises(ValueError, match="no tool 'nope'"):
            runner.set_messages_params(RunnerParams([user("x")], tools=["nope"]))
        with pytest.raises(ValueError, match="no tool 'nope'"):
            rt.tool_runner([user("x")], tools=[{"name": "nope"}])


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_requests_model_and_max_tokens_reach_the_wire(kind):
    provider = (
        OpenAIProvider("default-model", "k", max_tokens=1000)
        if kind == "openai"
        else AnthropicProvider("default-model", "k", max_tokens=1000)
    )
    plain = provider.body(ModelRequest(messages=[user("hi")]))
    assert (plain["model"], plain["max_tokens"]) == ("default-model", 1000)
    asked = provider.body(ModelRequest(messages=[user("hi")], model="other", max_tokens=7))
    assert (asked["model"], asked["max_tokens"]) == ("other", 7)
