"""Forks and replays (engine/api/forkbook.py, engine/turn/recorded.py): a fork's conversation
is the record up to its step, as the view builder reads it, and goes on from there; a
replay answers a recorded turn again on its recorded results, running no tool, and stops
for a decision at a call whose arguments differ from the record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.client import Conflict, Invalid, NotFound
from engine.api.fork_models import ForkBody, ReplayBody
from engine.api.local import LocalClient
from engine.domain.decisions import Decision
from engine.domain.messages import ConvMessage
from engine.domain.outcome import TurnOutcome
from engine.providers.base import ModelRequest
from engine.runtime import Runtime
from engine.tools import tool
from engine.turn.view import request_messages
from tests.helpers import msg, on, runtime
from tests.scripted import Reply, after_tools
from tests.wait import PATIENCE

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


RAN: list[dict[str, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two numbers (each run is counted)."""
    RAN.append({"a": a, "b": b})
    return a + b


def adding(first: int) -> Any:
    """add(first, 1), then add(2, 2), then an answer quoting the last result."""

    def script(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "user":
            return Reply(calls=[("add", {"a": first, "b": 1})])
        asked = next(m for m in reversed(request.messages) if m.role == "assistant")
        if asked.tool_calls and asked.tool_calls[0].arguments.get("b") == 1:
            return Reply(calls=[("add", {"a": 2, "b": 2})])
        return Reply(text="sum: " + after_tools(request.messages)[0].text)

    return script


async def entries(rt: Runtime, thread: str) -> list[ConvMessage]:
    rows = await on(rt.store).fetchall(
        "SELECT body FROM messages WHERE thread_id = ? ORDER BY seq", (thread,)
    )
    return [ConvMessage.model_validate_json(r[0]) for r in rows]


async def steps(rt: Runtime, turn_id: str) -> list[tuple[int, str]]:
    rows = await on(rt.store).fetchall(
        "SELECT id, kind FROM steps WHERE turn_id = ? ORDER BY id", (turn_id,)
    )
    return [(int(r[0]), r[1]) for r in rows]


async def finished(rt: Runtime, turn_id: str | None) -> TurnOutcome:
    assert turn_id is not None
    with anyio.fail_after(PATIENCE):
        return await rt.wait_turn(turn_id)


async def test_a_fork_is_the_record_up_to_its_step_and_goes_on_from_there(tmp_path: Path) -> None:
    RAN.clear()
    async with runtime(tmp_path, adding(1), tools=[add]) as rt:
        client = LocalClient(rt)
        out = await rt.run_turn(msg("go"))
        assert out.text == "sum: 4"
        record = await entries(rt, "t1")
        kinds = await steps(rt, out.turn_id)
        assert [k for _, k in kinds] == ["inference", "tool_round", "inference", "tool_round",
                                         "inference"]  # fmt: skip
        # at the first inference: its call came with it, so its result does too
        for step_id, _ in kinds[:2]:
            forked = await client.fork(ForkBody(turn_id=out.turn_id, step_id=step_id,
                                                thread_id=f"f{step_id}"))  # fmt: skip
            assert forked.upto == 3 and forked.from_thread == "t1" and forked.kind == "fork"
            await finished(rt, forked.turn_id)
            copy = (await entries(rt, forked.thread_id))[: forked.upto]
            assert copy == record[:3]  # user, assistant (add 1+1), tool (2)
            assert request_messages(copy) == request_messages(record[:3])  # as a request reads it
        ran = len(RAN)
        # it went on from there: the model read the copy, then its own round
        assert (await entries(rt, "f" + str(kinds[0][0])))[-1].text == "sum: 4"
        assert ran == 4  # 2 in the turn, 1 more in each fork (add 2+2)
        # the last step: the whole record, which waits for nothing: no turn
        done = await client.fork(ForkBody(turn_id=out.turn_id, step_id=kinds[-1][0]))
        assert done.upto == len(record) and done.turn_id is None
        assert done.thread_id.startswith("t1~fork-")
        assert await entries(rt, done.thread_id) == record
        # the source turn gained nothing
        [(n,)] = await on(rt.store).fetchall(
            "SELECT count(*) FROM messages WHERE turn_id = ?", (out.turn_id,)
        )
        assert n == len(record)


async def test_a_fork_with_an_edited_result_is_answered_from_the_edit(tmp_path: Path) -> None:
    async with runtime(tmp_path, adding(1), tools=[add]) as rt:
        client = LocalClient(rt)
        out = await rt.run_turn(msg("go"))
        [(step_id, _), *_] = await steps(rt, out.turn_id)
        forked = await client.fork(ForkBody(turn_id=out.turn_id, step_id=step_id,
                                            edits={"2": "41"}, group="task"))  # fmt: skip
        assert forked.edited == {2: "41"} and forked.group == "task"
        await finished(rt, forked.turn_id)
        copy = await entries(rt, forked.thread_id)
        assert (
            copy[2].text == "41"
            and copy[2].tool_call_id == (await entries(rt, "t1"))[2].tool_call_id
        )
        [(group,)] = await on(rt.store).fetchall(
            "SELECT group_name FROM threads WHERE id = ?", (forked.thread_id,)
        )
        [origin] = await on(rt.store).fetchall(
            "SELECT kind, from_thread, from_turn, from_step, upto FROM forks WHERE thread_id = ?",
            (forked.thread_id,),
        )
        assert group == "task" and tuple(origin) == ("fork", "t1", out.turn_id, step_id, 3)
        with pytest.raises(Invalid, match="only a user message or a tool result"):
            await client.fork(ForkBody(turn_id=out.turn_id, step_id=step_id, edits={"1": "x"}))
        with pytest.raises(Invalid, match="not in the fork"):
            await client.fork(ForkBody(turn_id=out.turn_id, step_id=step_id, edits={"9": "x"}))
        with pytest.raises(NotFound):
            await client.fork(ForkBody(turn_id=out.turn_id, step_id=10**6))
        with pytest.raises(Conflict):
            await client.fork(ForkBody(turn_id=out.turn_id, step_id=step_id, thread_id="t1"))
        with pytest.raises(Invalid, match="unknown group"):
            await client.fork(ForkBody(turn_id=out.turn_id, step_id=step_id, group="nope"))


async def test_a_replay_runs_no_tool_and_stops_at_a_changed_argument(tmp_path: Path) -> None:
    RAN.clear()
    script: dict[str, Any] = {"first": 1}

    def model(request: ModelRequest) -> Reply:
        return adding(script["first"])(request)

    async with runtime(tmp_path, model, tools=[add]) as rt:
        client = LocalClient(rt)
        out = await rt.run_turn(msg("go"))
        assert len(RAN) == 2
        # the same model: every call matched with the record, no tool ran
        same = await client.replay(ReplayBody(turn_id=out.turn_id))
        again = await finished(rt, same.turn_id)
        assert (again.status, again.text, len(RAN)) == ("done", "sum: 4", 2)
        assert same.kind == "replay" and same.upto == 0 and same.from_turn == out.turn_id
        # a changed model: its first call has other arguments: the replay stops for a decision
        script["first"] = 5
        changed = await client.replay(ReplayBody(turn_id=out.turn_id, strategy="react"))
        stopped = await finished(rt, changed.turn_id)
        assert stopped.status == "waiting" and len(RAN) == 2
        [pending] = await client.pending()
        assert pending.args == {"a": 5, "b": 1}
        assert "recorded add call had other arguments (a: 1 -> 5)" in pending.reason
        # approved, it runs for real; the next call matches the record again
        assert await rt.decide(Decision.approve(pending.call_id, seen=pending.args)) == "queued"
        done = await finished(rt, changed.turn_id)
    assert (done.status, done.text) == ("done", "sum: 4")
    assert RAN[2:] == [{"a": 5, "b": 1}]  # add(2, 2) came from the record


async def test_a_replay_against_another_model_and_instructions(tmp_path: Path) -> None:
    async with runtime(tmp_path, adding(1), tools=[add]) as rt:
        client = LocalClient(rt)
        out = await rt.run_turn(msg("go"))
        other = await client.replay(ReplayBody(turn_id=out.turn_id, model="offline:other",
                                               instructions="Answer briefly."))  # fmt: skip
        await finished(rt, other.turn_id)
        [(model, record)] = await on(rt.store).fetchall(
            "SELECT model, record FROM turns WHERE id = ?", (other.turn_id,)
        )
        told = await client.instructions(other.thread_id)
        with pytest.raises(Exception, match="pattern"):
            ReplayBody(turn_id=out.turn_id, model="gpt")
        with pytest.raises(Invalid, match="a provider"):
            await client.replay(ReplayBody(turn_id=out.turn_id, model="acme:x"))
        with pytest.raises(NotFound):
            await client.replay(ReplayBody(turn_id="nope"))
    assert model == "offline:other" and '"replay"' in record
    assert "Answer briefly." in told.text


async def test_a_chat_turn_is_replayed_answering_no_channel(tmp_path: Path) -> None:
    """A turn the console's chat sent (origin chat, no channel): its replay is refused no
    more ("origin 'chat' requires a channel") and answers nobody."""
    from engine.domain.messages import Message

    async with runtime(tmp_path, adding(1), tools=[add]) as rt:
        chat = Message(origin="chat", sender="operator", channel="console", thread_id="c1",
                       text="go")  # fmt: skip
        out = await rt.run_turn(chat)
        replayed = await LocalClient(rt).replay(ReplayBody(turn_id=out.turn_id))
        done = await finished(rt, replayed.turn_id)
        [(origin, channel)] = await on(rt.store).fetchall(
            "SELECT origin, channel FROM turns WHERE id = ?", (replayed.turn_id,)
        )
    assert done.text == "sum: 4" and (origin, channel) == ("invoke", None)
