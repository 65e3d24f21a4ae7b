"""Diffing two turns (issue 37, engine/domain/turn_diff.py): a turn of a scripted model
against a turn of a changed script and another model (a different argument, an extra call,
different answers), read through the history reader from the owner (LocalClient), its API
(RemoteClient), and a room nobody owns (RoomReader), on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.api.client import NotFound
from engine.api.connect import connect
from engine.api.local import LocalClient
from engine.api.reading import RoomReader
from engine.domain.decisions import Decision
from engine.domain.turn_diff import ArgChange, TurnDiff, arg_changes, canonical, entries
from engine.loops.server import serve_api
from engine.providers.base import ModelRequest
from engine.room import Room
from engine.runtime import Runtime
from tests.helpers import msg, room_rows, runtime
from tests.scripted import Reply, ScriptedModel, add, after_tools, shell

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def original(request: ModelRequest) -> Reply:
    """add(2, 3) and a shell call (it asks for approval); results quoted back."""
    if request.messages[-1].role == "user":
        return Reply(text="adding", calls=[("add", {"a": 2, "b": 3}), ("shell", {"command": "ls"})])
    return Reply(text="; ".join(m.text for m in after_tools(request.messages)))


def changed(request: ModelRequest) -> Reply:
    """The script changed: add(2, 4), an extra add(1, 1), the same shell call; other words."""
    if request.messages[-1].role == "user":
        return Reply(text="adding", calls=[("add", {"a": 2, "b": 4}), ("add", {"a": 1, "b": 1}),
                                           ("shell", {"command": "ls"})])  # fmt: skip
    return Reply(text="got " + "; ".join(m.text for m in after_tools(request.messages)))


class OtherModel(ScriptedModel):
    model = "scripted-2"


async def approved_turn(rt: Runtime, text: str, thread: str) -> str:
    """Run a turn whose shell call waits; approve it as shown (by `op`); its id."""
    out = await rt.run_turn(msg(text, thread))
    assert out.status == "waiting"
    [pending] = await rt.pending()
    decision = Decision(id=rt.new_id("d"), call_id=pending.call_id, action="resume",
                        decided_by="op", args_hash=pending.args_hash)  # fmt: skip
    assert await rt.decide(decision) == "queued"
    done = await rt.wait_turn(out.turn_id)
    assert (done.status, done.reason) == ("done", "natural")
    return out.turn_id


async def two_turns(tmp_path: Path) -> tuple[str, str]:
    """A turn of `original` on scripted-1, then one of `changed` on scripted-2 (another
    runtime of the same room): their ids."""
    async with runtime(tmp_path, original, tools=[add, shell]) as rt:
        a = await approved_turn(rt, "add them", "first")
    async with runtime(tmp_path, OtherModel(changed), tools=[add, shell], first_id=100) as rt:
        b = await approved_turn(rt, "add them", "again")
    return a, b


def shape(diff: TurnDiff) -> list[tuple[str, str, str | None]]:
    return [(r.mark, r.kind, (r.a or r.b).tool) for r in diff.rows]  # type: ignore[union-attr]


async def test_a_changed_script_differs_in_an_argument_a_call_and_its_answers(
    tmp_path: Path,
) -> None:
    a, b = await two_turns(tmp_path)
    async with runtime(tmp_path, original, tools=[add, shell], first_id=200) as rt:
        diff = await LocalClient(rt).diff(a, b)
    assert (diff.a.turn_id, diff.b.turn_id) == (a, b)
    assert (diff.a.thread_id, diff.b.thread_id) == ("first", "again")
    assert (diff.a.model, diff.b.model) == ("scripted:scripted-1", "scripted:scripted-2")
    assert (diff.a.calls, diff.b.calls) == (2, 3)
    assert diff.facts_changed == ["model", "calls"]  # same strategy, outcome, tokens, steps
    assert (diff.a.status, diff.a.reason, diff.a.input_tokens, diff.a.output_tokens) == (
        "done", "natural", 30, 15)  # fmt: skip
    assert diff.a.rounds == diff.b.rounds == 3 and diff.a.steps == diff.b.steps == 5
    assert diff.a.duration is not None and diff.a.duration >= 0
    assert shape(diff) == [
        ("same", "user", None),
        ("same", "assistant", None),
        ("changed", "call", "add"),  # add(2, 3) -> add(2, 4)
        ("only_b", "call", "add"),  # the extra add(1, 1)
        ("same", "call", "shell"),  # the same call, approved as shown by op
        ("changed", "assistant", None),  # "5; pending: ..." -> "got 6; 2; pending: ..."
        ("changed", "assistant", None),  # "ran ls" -> "got ran ls"
    ]
    add_row, extra, shell_row, answer = diff.rows[2], diff.rows[3], diff.rows[4], diff.rows[6]
    assert add_row.changed == ["args", "result"]
    assert add_row.args == [ArgChange(key="b", a="3", b="4")]
    assert (add_row.a.result, add_row.b.result) == ("5", "6")  # type: ignore[union-attr]
    assert extra.b is not None and (extra.b.args, extra.b.result) == ({"a": 1, "b": 1}, "2")
    assert shell_row.a is not None and shell_row.b is not None
    assert [(d.action, d.decided_by, d.status) for d in shell_row.a.decisions] == [
        ("resume", "op", "applied")]  # fmt: skip
    assert shell_row.a.call_id != shell_row.b.call_id  # ids never make rows differ
    assert (answer.a.text, answer.b.text) == ("ran ls", "got ran ls")  # type: ignore[union-attr]
    assert answer.changed == ["text"]
    assert diff.counts() == {"same": 3, "changed": 3, "only_a": 0, "only_b": 1}

    # the other way round: the extra call is A's only, the facts swap
    async with runtime(tmp_path, original, tools=[add, shell], first_id=300) as rt:
        back = await LocalClient(rt).diff(b, a)
        itself = await LocalClient(rt).diff(a, a)
    assert [m for m, _, _ in shape(back)] == [
        "same", "same", "changed", "only_a", "same", "changed", "changed"]  # fmt: skip
    assert back.rows[2].args == [ArgChange(key="b", a="4", b="3")]
    assert itself.facts_changed == [] and {r.mark for r in itself.rows} == {"same"}


async def test_the_owner_its_api_and_a_free_room_give_the_same_diff(tmp_path: Path) -> None:
    a, b = await two_turns(tmp_path)
    room = Room.at(tmp_path / "room")
    runs = room_rows(room.path, "SELECT count(*) FROM runs")
    reader = await RoomReader.open(room)  # nobody owns the room: read, no run
    assert reader is not None
    try:
        free = await reader.diff(a, b)
        with pytest.raises(NotFound, match="no turn t999"):
            await reader.diff(a, "t999")
    finally:
        await reader.aclose()
    assert room_rows(room.path, "SELECT count(*) FROM runs") == runs
    async with runtime(tmp_path, original, tools=[add, shell], kind="run", first_id=200) as rt, \
            serve_api(rt):  # fmt: skip
        owned = await LocalClient(rt).diff(a, b)
        remote = await connect(room)
        assert remote is not None
        async with remote:
            carried = await remote.diff(turn_a=a, turn_b=b)
            with pytest.raises(NotFound, match="no turn nope"):
                await remote.diff("nope", b)
    assert free == owned == carried
    assert [r.mark for r in carried.rows] == [r.mark for r in free.rows]


# -- rows from records -------------------------------------------------------------------------


def detail(messages: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, Any]:
    turn = {"turn_id": "t1", "thread_id": "x", "status": "done", "reason": "natural"}
    return {"turn": turn, "steps": [], "messages": messages, "calls": calls, "decisions": []}


def message(seq: int, role: str, text: str, at: float, **body: Any) -> dict[str, Any]:
    return {"message_id": seq, "seq": seq, "role": role, "text": text, "created_at": at,
            "body": {"role": role, "text": text, **body}}  # fmt: skip


def call(call_id: str, tool: str, at: float, model_call_id: str | None = None,
         **kw: Any) -> dict[str, Any]:  # fmt: skip
    return {"call_id": call_id, "model_call_id": model_call_id, "step_id": 1, "idx": 0,
            "tool": tool, "args": kw.get("args", {}), "status": kw.get("status", "succeeded"),
            "result": kw.get("result"), "error": None, "created_at": at}  # fmt: skip


def test_calls_follow_the_text_that_asked_for_them_and_others_go_by_time() -> None:
    rows = entries(detail(
        [message(0, "user", "go", 1.0),
         message(1, "assistant", "asking", 2.0, tool_calls=[
             {"id": "m1", "name": "add", "arguments": {"a": 1}},
             {"id": "m2", "name": "gone", "arguments": {}}]),
         message(2, "tool", "2", 3.0, tool_call_id="m1"),  # on its call's row
         message(3, "tool", "stray", 4.0, tool_call_id="zz"),  # no call: a row of its own
         message(4, "assistant", "done", 6.0)],
        [call("c9", "breakpoint", 5.0, status="suspended"),  # no model asked: by its time
         call("c1", "add", 2.5, "m1", args={"a": 1}, result="2")],
    ))  # fmt: skip
    assert [(e.kind, e.tool or e.text, e.status) for e in rows] == [
        ("user", "go", None), ("assistant", "asking", None), ("call", "add", "succeeded"),
        ("call", "gone", None),  # asked for, never recorded as a call
        ("tool", "stray", None), ("call", "breakpoint", "suspended"),
        ("assistant", "done", None),
    ]  # fmt: skip


def test_argument_changes_name_each_key_as_canonical_json() -> None:
    assert arg_changes({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}) == []
    assert arg_changes({"a": 1, "gone": True}, {"a": 2, "new": "é"}) == [
        ArgChange(key="a", a="1", b="2"), ArgChange(key="gone", a="true", b=None),
        ArgChange(key="new", a=None, b='"é"')]  # fmt: skip
    assert arg_changes("raw text", {"a": 1}) == [ArgChange(key="", a='"raw text"', b='{"a":1}')]
    [long] = arg_changes({"s": "x" * 500}, {"s": "y"})
    assert long.a is not None and len(long.a) == 200 and long.a.endswith("…")
    assert canonical({"b": 1, "a": {"d": 2, "c": 1}}) == '{"a":{"c":1,"d":2},"b":1}'
