"""plan_execute's planner output: any text is a plan or "respond", and a turn planned from
it ends without an error, its room intact."""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import example, given
from hypothesis import strategies as st

from engine.domain.messages import Message
from engine.domain.plans import (
    NextActionScanner,
    PlanDecision,
    early_next_action,
    normalize,
    parse_planner_text,
)
from engine.providers.base import ModelRequest, parse_arguments
from engine.runtime import Runtime
from tests.fuzz.rooms import ROOMY, integrity, scratch
from tests.fuzz.values import deep_json, dumps, huge_number_json, json_objects, json_values, texts
from tests.scripted import Reply, ScriptedModel, add

wild = json_values | st.sampled_from(["execute", "response", "EXECUTE", " Response ", "add"])


def maybe(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


commands = maybe(
    tool_name=st.sampled_from(["add", " add ", "shell", "", "no_such_tool"]) | wild,
    tool_kwargs=st.fixed_dictionaries({"a": st.integers(), "b": st.integers()}) | json_objects
    | wild,
    arguments=json_objects | wild, purpose=texts | wild, todo_suggestion=wild, next=wild,
)  # fmt: skip
plans = maybe(
    next_action=wild, execution_commands=st.lists(commands | wild, max_size=3) | wild,
    tool_commands=st.lists(commands | wild, max_size=3) | wild, tool_command=commands | wild,
    todo_suggestion=wild, next=wild, use_tool=wild,
)  # fmt: skip


@st.composite
def raw_kwargs_plan(draw: st.DrawFn) -> str:
    """A plan whose command's arguments are raw JSON text: absurdly deep, or huge numbers."""
    kwargs = draw(deep_json() | huge_number_json())
    return ('{"next_action": "execute", "tool_commands": [{"tool_name": "add", '
            f'"tool_kwargs": {kwargs}}}]}}')  # fmt: skip


@st.composite
def dressed(draw: st.DrawFn, inner: st.SearchStrategy[str]) -> str:
    """Planner text as models write it: bare, in a code fence, or with prose around."""
    text = draw(inner)
    return draw(st.sampled_from(["{}", "```json\n{}\n```", "```{}```", "Sure! {} Done.", "{}}"]))\
        .replace("{}", text)  # fmt: skip


planner_texts = dressed(plans.map(dumps) | raw_kwargs_plan() | st.text(max_size=80))


@given(planner_texts, st.lists(st.integers(0, 400), max_size=6))
def test_any_planner_text_normalizes_and_streams_alike(text: str, cuts: list[int]) -> None:
    decision = normalize(parse_planner_text(text))
    assert isinstance(decision, PlanDecision) and decision.next_action in ("execute", "response")
    for command in decision.commands:
        assert command.tool_name and command.tool_kwargs is not None
        if isinstance(command.tool_kwargs, str):  # kept as text: the call will say why not
            assert parse_arguments(command.tool_kwargs)[1]
    # The short-circuit reads the stream piece by piece; where the pieces end changes nothing.
    scanner, first = NextActionScanner(), None
    edges = [0, *sorted(c for c in cuts if c < len(text)), len(text)]
    for a, b in zip(edges, edges[1:], strict=False):
        found = scanner.feed(text[a:b])
        first = first if first is not None else found
    assert first == early_next_action(text)


def plan_turn(text: str) -> tuple[str, str | None, str]:
    """A plan_execute turn whose planner answers `text` each round: its status, reason and
    the room's integrity check."""

    def script(request: ModelRequest) -> Reply:
        if request.purpose == "plan":
            return Reply(text=text)
        return Reply(text="the answer")

    async def go() -> tuple[str, str | None, str]:
        with scratch() as room:
            async with Runtime.open(room, kind="test", provider=ScriptedModel(script),
                                    tools=[add]) as rt:  # fmt: skip
                message = Message(origin="invoke", sender="t", thread_id="t", text="go")
                handle = await rt.submit(message, strategy="plan_execute")
                out = await rt.wait_turn(handle.turn_id)
            return out.status, out.reason, integrity(room / "execution.db")

    return anyio.run(go)


DEEP_PLAN = ('{"next_action": "execute", "tool_command": {"tool_name": "add", "tool_kwargs": '
             '{"a": 1, "b": ' + "[" * 600 + "]" * 600 + "}}}")  # fmt: skip


@ROOMY
@given(planner_texts)
@example(DEEP_PLAN)  # found here: the turn ended in error
def test_a_turn_planned_from_any_text_ends_without_error(text: str) -> None:
    status, reason, check = plan_turn(text)
    # A stop policy may end it (five failed rounds in a row), an error may not.
    assert status == "done" and (reason == "natural" or reason.startswith("stopped:")), reason
    assert check == "ok"
