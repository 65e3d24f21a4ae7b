"""A turn done here answers its waiters from what its loop wrote, not by reading the store
again (engine/turn/state.py `TurnState.outcome`): that answer must be the store's, field
for field, whatever way the turn ended."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.domain.decisions import Decision
from engine.providers.base import ModelRequest
from engine.runtime import Runtime
from engine.store.outcome import read_outcome
from engine.tools import tool
from tests.helpers import msg, runtime
from tests.scripted import Reply, add, boom, echo_results, shell

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

HUNG: dict[str, anyio.Event] = {}  # the test's: "in" once the tool runs, "go" to end it


@tool
async def hang() -> str:
    """Waits until the test lets it go."""
    HUNG["in"].set()
    await HUNG["go"].wait()
    return "let go"


def script(request: ModelRequest) -> Reply:
    last = request.messages[-1]
    if last.role != "user":
        return echo_results(request)
    match last.text:
        case "calls":  # one succeeds, one raises, one unknown, one with bad arguments
            return Reply(text="working", calls=[("add", {"a": 2, "b": 3}), ("boom", {}),
                                                ("nope", {}), ("add", {"a": "x"})])  # fmt: skip
        case "ask":
            return Reply(calls=[("shell", {"command": "ls"})])
        case "hang":
            return Reply(calls=[("hang", {})])
        case "fail":
            raise RuntimeError("the model broke")
        case _:
            return Reply(text=f"you said {last.text}")


async def kept_and_stored(rt: Runtime, turn_id: str, handle: Any) -> None:
    """The waiter's answer is the handle's kept outcome, and it equals the store's."""
    got = await rt.wait_turn(turn_id)
    assert handle.outcome is not None and got is handle.outcome
    assert got == await read_outcome(rt.store, turn_id)


async def test_a_done_turns_kept_outcome_is_the_stores(tmp_path: Path) -> None:
    HUNG.update({"in": anyio.Event(), "go": anyio.Event()})
    async with runtime(tmp_path, script, tools=(add, boom, shell, hang)) as rt:
        for text, thread in (("hello", "a"), ("calls", "b"), ("fail", "c")):
            handle = await rt.submit(msg(text, thread))
            await kept_and_stored(rt, handle.turn_id, handle)
        outcome = await rt.wait_turn((await rt.submit(msg("calls", "b"))).turn_id)
        assert [c["status"] for c in outcome.calls] == ["succeeded", "failed", "failed", "failed"]
        assert (await rt.wait_turn((await rt.submit(msg("fail", "c2"))).turn_id)).reason == "error"

        # waits for a decision (the store answers), then resumed and done (kept again)
        asked = await rt.submit(msg("ask", "d"))
        waiting = await rt.wait_turn(asked.turn_id)
        assert waiting.status == "waiting" and asked.outcome is None
        assert waiting == await read_outcome(rt.store, asked.turn_id)
        [call] = waiting.pending
        await rt.decide(Decision.approve(call["call_id"], args=call["args"]))
        resumed = rt.live.get(asked.turn_id)
        assert resumed is not None
        await kept_and_stored(rt, asked.turn_id, resumed)

        # cancelled while its tool runs
        hung = await rt.submit(msg("hang", "e"))
        await HUNG["in"].wait()
        assert await rt.cancel_turn(hung.turn_id)
        await kept_and_stored(rt, hung.turn_id, hung)
        assert (await rt.wait_turn(hung.turn_id)).reason == "cancelled"
