"""What the runtime bounds around every tool call: its time, its result's size, its secrets."""

from __future__ import annotations

import itertools
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from engine.config import Config
from engine.messages import Message
from engine.runtime import Runtime
from engine.tools import ToolError, tool
from tests.scripted import ScriptedModel, first_then

pytestmark = pytest.mark.anyio


def msg(text: str) -> Message:
    return Message(origin="invoke", sender="test", thread_id="t1", text=text)


@asynccontextmanager
async def runtime(tmp_path, script, tools, config=None):  # noqa: ANN001, ANN202
    counter = itertools.count(1)
    async with Runtime.open(
        tmp_path / "room",
        kind="test",
        provider=ScriptedModel(script),
        tools=list(tools),
        config=config,
        ids=lambda prefix: f"{prefix}{next(counter)}",
    ) as rt:
        yield rt


async def rows(rt: Runtime, sql: str, *params: Any) -> list[tuple]:
    return [tuple(r) for r in await rt.store.fetchall(sql, params)]


# --- time limit ----------------------------------------------------------------------------


@tool
async def stuck() -> str:
    """Never returns on its own."""
    await anyio.sleep_forever()
    return "never"


async def test_the_configured_time_limit_ends_a_stuck_call_with_an_error_the_model_sees(
    tmp_path,
):
    config = Config.model_validate({"runtime": {"tool_timeouts": {"stuck": 0.1}}})
    async with runtime(tmp_path, first_then([("stuck", {})]), [stuck], config) as rt:
        with anyio.fail_after(30):  # the guard: without a limit the turn never ends
            out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "natural")
        assert out.calls[0]["status"] == "failed"
        error = "stuck did not finish within its time limit (0.1s) and was stopped"
        assert await rows(rt, "SELECT error FROM tool_calls") == [(error,)]
        assert f"stuck: error: {error}" in out.text


# --- result size ---------------------------------------------------------------------------


@tool
def flood() -> str:
    """A result far past the cap."""
    return "x" * 1_000_000


@tool
def shout() -> str:
    """An error far past the cap."""
    raise ToolError("y" * 1_000_000)


async def test_every_result_and_error_is_cut_to_the_cap_before_it_is_stored(tmp_path):
    config = Config.model_validate({"runtime": {"max_result_bytes": 2048}})
    script = first_then([("flood", {}), ("shout", {})])
    async with runtime(tmp_path, script, [flood, shout], config) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "natural")
        stored = await rows(
            rt, "SELECT length(CAST(result AS BLOB)), length(CAST(error AS BLOB)) FROM tool_calls"
        )
        assert stored == [(2048, None), (None, 2048)]
        longest = await rows(
            rt, "SELECT max(length(CAST(text AS BLOB))) FROM messages WHERE role='tool'"
        )
        assert longest[0][0] <= 2048 + len("error: ")
        longest_event = await rows(rt, "SELECT max(length(CAST(body AS BLOB))) FROM events")
        assert longest_event[0][0] < 8192
        seen = [m.text for m in rt.provider.requests[-1].messages if m.role == "tool"]
        assert all("[cut by the runtime: the result was 1,000,0" in t for t in seen), seen
