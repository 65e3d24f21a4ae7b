"""Tool arguments a model sends that cannot be parsed or stored fail that call, not the turn.

The model sees a tool error saying what was wrong and goes on; the raw text is kept as the
call's arguments, so the room (history, export, a restart) reads it back as text.
"""

from __future__ import annotations

import json

import pytest

from engine.api.history import History
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.base import AssistantAccumulator, ToolCallDelta
from tests.helpers import on, runtime
from tests.scripted import Reply, add, echo_results, first_then, shell

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


def nested(depth: int) -> str:
    return '{"a": 1, "b": ' + "[" * depth + "]" * depth + "}"


BAD = {
    "nested-600": (nested(600), "nested more than 64 deep"),
    "nested-5000": (nested(5000), "nested more than 64 deep"),
    "5000-digit-int": ('{"a": ' + "7" * 5000 + ', "b": 1}', "4300 digits"),
    "not-an-object": ("[1, 2]", "must be a JSON object, got array"),
    "not-json": ('{"a": 1,', "the text is not JSON"),
    "lone-surrogate": ('{"a": "\\ud800", "b": 1}', "surrogates not allowed"),  # tests/fuzz
}


@pytest.mark.parametrize(("raw", "says"), list(BAD.values()), ids=list(BAD))
async def test_unusable_arguments_fail_the_call_and_the_turn_goes_on(tmp_path, raw, says):
    def script(request):
        if request.messages[-1].role == "user":
            return Reply(calls=[("add", raw), ("add", {"a": 1, "b": 2})])
        return echo_results(request)

    async with runtime(tmp_path, script, [add]) as rt:
        out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id="t", text="go"))
        assert (out.status, out.reason) == ("done", "natural")
        assert [c["status"] for c in out.calls] == ["failed", "succeeded"]
        seen = [m for m in rt.provider.requests[1].messages if m.role == "tool"]
        assert (
            seen[0].is_error
            and says in seen[0].text
            and "invalid arguments for add" in seen[0].text
        )
        assert seen[1].text == "3"
        # The room reads the call back: its arguments are the model's text, as sent.
        async with History(rt.room) as history:
            detail = await history.turn(out.turn_id)
            path = await history.export_turn(out.turn_id)
        [bad, _] = detail["calls"]
        assert bad["args"] == raw and says in bad["error"]
        assert json.loads(path.read_text())["calls"][0]["args"] == raw


def test_the_accumulator_keeps_unusable_arguments_as_text() -> None:
    acc = AssistantAccumulator()
    for i, raw in enumerate(value for value, _ in BAD.values()):
        acc.add(ToolCallDelta(index=i, id=f"c{i}", name="add", arguments=raw))
    acc.add(ToolCallDelta(index=9, id="ok", name="add", arguments='{"a": 1, "b": 2}'))
    message = acc.message()
    assert [c.arguments for c in message.tool_calls] == [v for v, _ in BAD.values()] + [
        {"a": 1, "b": 2}]  # fmt: skip
    message.model_dump_json()  # what the conversation stores


async def test_a_waiting_turn_with_unusable_arguments_survives_a_restart(tmp_path) -> None:
    raw, _ = BAD["5000-digit-int"]
    script = first_then([("add", raw), ("shell", {"command": "ls"})])
    go = Message(origin="invoke", sender="t", thread_id="t", text="go")
    async with runtime(tmp_path, script, [add, shell]) as rt:
        out = await rt.run_turn(go)
        assert out.status == "waiting" and [c["status"] for c in out.calls] == [
            "failed", "suspended"]  # fmt: skip
    async with runtime(tmp_path, script, [add, shell], first_id=100) as rt:
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural") and "ran ls" in out.text
        [args] = await on(rt.store).fetchall("SELECT args FROM tool_calls WHERE tool='add'", ())
        assert json.loads(args[0]) == raw
