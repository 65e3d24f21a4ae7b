"""The turn loop as the seed has it (issue 14, "the loop true to the seed"): the order of the
plugin phases, gate outcomes reaching AfterToolExecute, no call `running` that never ran,
and a plugin narrowing the tools of one step."""

from __future__ import annotations

from typing import Any

import pytest

from engine.plugins import Gate, Phase, PhaseContext, Plugin
from engine.providers.base import ModelRequest
from tests.helpers import msg, rows, runtime
from tests.scripted import Reply, echo_results, first_then

pytestmark = pytest.mark.anyio


async def call_events(rt: Any) -> dict[str, list[str]]:
    """Each tool's CallChanged statuses, in order."""
    out: dict[str, list[str]] = {}
    for tool, status in await rows(
        rt, "SELECT json_extract(body, '$.tool'), json_extract(body, '$.status') FROM events"
        " WHERE kind='call_changed' ORDER BY id"
    ):  # fmt: skip
        out.setdefault(tool, []).append(status)
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
