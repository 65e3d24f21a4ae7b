"""One typed vocabulary: events carry the lifecycles' enums and their thread's group, and an
event stored before either keeps its JSON to the byte."""

from __future__ import annotations

import json

import anyio
import httpx
import pydantic
import pytest

from engine.api.sockets import connect_path
from engine.domain.decisions import Decision
from engine.domain.events import (
    CallChanged,
    DecisionRecorded,
    Event,
    StepFinished,
    TurnChanged,
    TurnStarted,
    parse_event,
    parse_events,
)
from engine.domain.messages import Message
from engine.io.sse import parse_sse
from engine.lifecycle import CallStatus, DecisionStatus, StepStatus, TurnStatus
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.store.recent import read_recent
from tests.helpers import rows, runtime
from tests.scripted import first_then

pytestmark = pytest.mark.usefixtures("store_backend")

# Events as execution.db and the API's stream held them before statuses were enums and
# turn events named their group (written by that code, kept here as text).
STORED = [
    '{"at":1.0,"thread_id":"t1","turn_id":"u1","kind":"turn_started","origin":"chat","sender":"bob","text":"hi","strategy":"react"}',
    '{"at":1717171717.25,"thread_id":"task:report","turn_id":"t_9","kind":"turn_started","origin":"task","sender":"pulse","text":"write the report","strategy":"plan_execute"}',
    '{"at":2.0,"thread_id":"t1","turn_id":"u1","kind":"turn_changed","status":"done","reason":"stopped:max_rounds","detail":"25 rounds"}',
    '{"at":1717171718.5,"thread_id":"task:report","turn_id":"t_9","kind":"turn_changed","status":"waiting","reason":"suspended","detail":null}',
    '{"at":1717171719.0,"thread_id":"task:report","turn_id":"t_9","kind":"turn_changed","status":"running","reason":null,"detail":null}',
    '{"at":4.5,"thread_id":"","turn_id":"u1","kind":"step_finished","step_id":7,"step_kind":"tool_round","status":"failed","summary":"2 calls","duration":0.25,"input_tokens":10,"output_tokens":3}',
    '{"at":1717171720.0,"thread_id":"task:report","turn_id":"t_9","kind":"step_finished","step_id":3,"step_kind":"inference","status":"cancelled","summary":"cancelled by operator","duration":1.5,"input_tokens":0,"output_tokens":0}',
    '{"at":7.0,"thread_id":"t1","turn_id":"u1","kind":"call_changed","call_id":"c1","tool":"shell","args":{"cmd":"ls","n":[1,2.5,null]},"status":"suspended","result":null,"error":"needs approval"}',
    '{"at":1717171721.0,"thread_id":"task:report","turn_id":"t_9","kind":"call_changed","call_id":"call_2","tool":"shell","args":{"command":"ls"},"status":"resuming","result":null,"error":null}',
    '{"at":8.0,"thread_id":"","turn_id":"","kind":"decision_recorded","decision_id":"d_1","call_id":"c1","action":"cancel","status":"applied","reason":"no","note":null}',
    '{"at":1717171722.0,"thread_id":"task:report","turn_id":"t_9","kind":"decision_recorded","decision_id":"d_2","call_id":"call_2","action":"resume","status":"duplicate","reason":null,"note":"call already decided by d_1"}',
    '{"at":1717171723.0,"thread_id":"","turn_id":"","kind":"decision_recorded","decision_id":"d_0","call_id":"call_2","action":"cancel","status":"superseded","reason":"old","note":"superseded by d_2"}',
    '{"at":9.0,"thread_id":"","turn_id":"","kind":"notice","level":"warning","text":"bad agentdeck.toml"}',
]  # fmt: skip

ENUMS = {
    TurnChanged: TurnStatus,
    StepFinished: StepStatus,
    CallChanged: CallStatus,
    DecisionRecorded: DecisionStatus,
}


@pytest.mark.parametrize("stored", STORED, ids=lambda s: json.loads(s)["kind"])
def test_an_event_stored_before_parses_and_dumps_identically(stored: str) -> None:
    event = parse_event(stored)
    assert event.model_dump_json() == stored
    [batched] = parse_events(f"[{stored}]")  # as the API's stream sends it
    assert batched.model_dump_json() == stored
    assert json.loads(event.model_dump_json()) == json.loads(stored)  # same keys, same values


@pytest.mark.parametrize("stored", [s for s in STORED if '"status"' in s],
                         ids=lambda s: json.loads(s)["status"])  # fmt: skip
def test_statuses_are_the_lifecycles_enums_and_still_the_stored_words(stored: str) -> None:
    event = parse_event(stored)
    status = event.status  # type: ignore[union-attr]
    assert type(status) is ENUMS[type(event)]
    assert status == json.loads(stored)["status"]  # a string enum: equal to its word
    assert f"{status}" == json.loads(stored)["status"]


@pytest.mark.parametrize(
    ("kind", "fields"),
    [
        (TurnChanged, {"status": "paused"}),
        (CallChanged, {"call_id": "c", "tool": "t", "status": "done"}),
        (StepFinished, {"step_id": 1, "step_kind": "inference", "status": "waiting"}),
        (DecisionRecorded, {"decision_id": "d", "call_id": "c", "action": "resume",
                            "status": "succeeded"}),
    ],
)  # fmt: skip
def test_a_status_outside_its_lifecycle_is_refused(kind: type, fields: dict) -> None:
    with pytest.raises(pydantic.ValidationError, match="status"):
        kind(at=1.0, **fields)


def test_a_turn_event_with_its_group_says_it_last_and_round_trips() -> None:
    started = TurnStarted(at=1.0, thread_id="desk", turn_id="u1", origin="chat", sender="bob",
                          text="hi", group="ops")  # fmt: skip
    changed = TurnChanged(at=2.0, thread_id="desk", turn_id="u1", status=TurnStatus.DONE,
                          reason="natural", group="ops")  # fmt: skip
    for event in (started, changed):
        text = event.model_dump_json()
        assert text.endswith(',"group":"ops"}')
        assert parse_event(text) == event
    assert changed.model_dump_json() == (
        '{"at":2.0,"thread_id":"desk","turn_id":"u1","kind":"turn_changed","status":"done",'
        '"reason":"natural","detail":null,"group":"ops"}'
    )


def _collect(rt) -> list[Event]:
    seen: list[Event] = []
    rt.subscribe(seen.append)
    return seen


def ops_message(text: str) -> Message:
    """A message whose thread's group is named in `meta.group`, not by its thread id."""
    return Message(origin="invoke", sender="test", thread_id="desk", text=text,
                   meta={"group": "ops"})  # fmt: skip


@pytest.mark.anyio
async def test_turn_events_name_the_group_the_scheduler_gave(tmp_path) -> None:
    script = first_then([("shell", {"command": "ls"})])
    async with runtime(tmp_path, script) as rt:
        seen = _collect(rt)
        out = await rt.run_turn(ops_message("go"))
        assert out.status == "waiting"
    turn_events = [e for e in seen if isinstance(e, TurnStarted | TurnChanged)]
    assert [(e.kind, e.group) for e in turn_events] == [
        ("turn_started", "ops"),
        ("turn_changed", "ops"),  # waiting
    ]
    # A later run loads the waiting turn from execution.db: its events keep the group.
    async with runtime(tmp_path, script, first_id=100) as rt:
        seen = _collect(rt)
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        done = await rt.wait_turn(out.turn_id)
        assert done.status == "done"
        changed = [e for e in seen if isinstance(e, TurnChanged)]
        assert [(e.status, e.group) for e in changed] == [
            (TurnStatus.RUNNING, "ops"),
            (TurnStatus.DONE, "ops"),
        ]
        stored = await rows(rt, "SELECT body FROM events"
                                " WHERE kind IN ('turn_started', 'turn_changed')")  # fmt: skip
        assert {json.loads(b)["group"] for (b,) in stored} == {"ops"}


@pytest.mark.anyio
async def test_recent_history_reads_the_group_of_turns_and_steps(tmp_path) -> None:
    async with runtime(tmp_path, first_then([("add", {"a": 1, "b": 2})])) as rt:
        await rt.run_turn(ops_message("add"))
        await rt.run_turn(Message(origin="task", sender="self", thread_id="task:x", text="add"))
        room = rt.room
    recent = await read_recent(room)
    assert [(t.thread_id, t.group) for t in recent.turns] == [("desk", "ops"), ("task:x", "task")]
    assert {(s.thread_id, s.group) for s in recent.steps} == {("desk", "ops"), ("task:x", "task")}


@pytest.mark.anyio
async def test_the_apis_event_stream_names_the_group_in_the_same_words(tmp_path) -> None:
    room = tmp_path / "room"
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt, serve_api(rt):
        assert (await rt.run_turn(ops_message("hello"))).status == "done"
        transport = httpx.AsyncHTTPTransport(uds=connect_path(room / "agent.sock"))
        got: list[dict] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://agentdeck") as http:
            with anyio.fail_after(10):
                async with http.stream("GET", "/v1/events", params={"run": rt.run_id, "after": 0},
                                       headers={"accept": "text/event-stream"}) as r:  # fmt: skip
                    async for sse in parse_sse(r.aiter_lines()):
                        if sse.event == "events":
                            got += json.loads(sse.data)
                        if any(e.get("status") == "done" for e in got):
                            break
    turn = [e for e in got if e["kind"] in ("turn_started", "turn_changed")]
    assert [(e["kind"], e.get("status"), e["group"]) for e in turn] == [
        ("turn_started", None, "ops"),
        ("turn_changed", "done", "ops"),
    ]
    for sent in got:  # each event as sent is its model's JSON, the stored text
        assert json.loads(parse_event(json.dumps(sent)).model_dump_json()) == sent
