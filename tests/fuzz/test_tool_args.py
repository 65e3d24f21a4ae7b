"""Tool arguments from a model: any text fails or runs that call, never the turn."""

from __future__ import annotations

import json

import anyio
from hypothesis import example, given
from hypothesis import strategies as st

from engine.domain.decisions import storable
from engine.domain.messages import Message
from engine.providers.base import ModelRequest, parse_arguments
from engine.runtime import Runtime
from tests.fuzz.rooms import ROOMY, integrity, scratch
from tests.fuzz.values import DIGITS, json_texts
from tests.scripted import Reply, ScriptedModel, add, echo_results

# Numbers for `add` as text: small, huge (a sum of two 4,300-digit numbers has 4,301 digits,
# one more than Python prints), fractional, not numbers at all.
numbers = st.integers().map(str) | DIGITS.map(lambda n: "9" * n) | st.sampled_from(
    ["1.5", "-0", "1e400", "NaN", "Infinity", '"3"', "true", "null", "[]", "{}"])  # fmt: skip
add_args = st.tuples(numbers, numbers).map(lambda ab: '{{"a": {}, "b": {}}}'.format(*ab))
arguments = add_args | json_texts


@given(arguments)
def test_parse_arguments_is_an_object_or_one_line_why_not(raw: str) -> None:
    value, why = parse_arguments(raw)
    if value is None:
        assert why and "\n" not in why, why
    else:
        assert isinstance(value, dict) and why == ""
        storable(value, "arguments")  # what execution.db will take


def turn_with_arguments(raw: str) -> tuple[str, str | None, list[str], list[str], str]:
    """A react turn whose model calls `add` with `raw`, then a good `add`: the turn's status,
    reason, its calls' statuses, what the model saw of them, and the room's integrity."""

    def script(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "user":
            return Reply(calls=[("add", raw), ("add", {"a": 1, "b": 2})])
        return echo_results(request)

    async def go() -> tuple[str, str | None, list[str], list[str], str]:
        with scratch() as room:
            model = ScriptedModel(script)
            async with Runtime.open(room, kind="test", provider=model, tools=[add]) as rt:
                out = await rt.run_turn(
                    Message(origin="invoke", sender="t", thread_id="t", text="go")
                )
            seen = [m.text for m in model.requests[-1].messages if m.role == "tool"]
            return (out.status, out.reason, [c["status"] for c in out.calls], seen,
                    integrity(room / "execution.db"))  # fmt: skip

    return anyio.run(go)


@ROOMY
@given(arguments)
@example('{"a": ' + "9" * 4300 + ', "b": ' + "9" * 4300 + "}")
def test_any_arguments_fail_or_run_the_call_and_the_turn_goes_on(raw: str) -> None:
    status, reason, calls, seen, check = turn_with_arguments(raw)
    assert (status, reason) == ("done", "natural"), (status, reason)
    assert calls[1:] == ["succeeded"] and calls[0] in ("failed", "succeeded")
    assert len(seen) == 2 and seen[1] == "3"  # the model saw both calls end
    if calls[0] == "succeeded":
        assert parse_arguments(raw)[0] is not None
        json.loads(seen[0])  # a number, as add returns
    assert check == "ok"
