"""Message rules, Decision validation, and the event vocabulary round-trip (rules: test_rules)."""

from __future__ import annotations

import typing
from typing import Any

import pydantic
import pytest

from engine.domain import events as ev
from engine.domain.decisions import Decision
from engine.domain.messages import InvalidMessage, Message

# --- Message -------------------------------------------------------------------------------


def msg(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"origin": "invoke", "sender": "cli", "thread_id": "t1", "text": "hi"}
    return {**base, **over}


VALID = [
    pytest.param(msg(origin="invoke", sender="alice"), id="invoke"),
    pytest.param(msg(origin="invoke", sender="alice", channel=None), id="invoke-explicit-none"),
    pytest.param(msg(origin="chat", channel="slack:#ops", sender="bob"), id="chat"),
    pytest.param(msg(origin="chat", channel="irc", sender="self"), id="chat-from-self"),
    pytest.param(msg(origin="task", sender="self"), id="task"),
    pytest.param(msg(origin="chore", sender="self"), id="chore"),
    pytest.param(msg(origin="will", sender="self", meta={"due": 1}), id="will"),
    pytest.param(msg(origin="invoke", sender="self", text=""), id="empty-text"),
]


@pytest.mark.parametrize("data", VALID)
def test_valid_messages(data: dict[str, Any]) -> None:
    m = Message.parse(data)
    assert m.origin == data["origin"]
    assert m.channel == data.get("channel")
    assert m.sender == data["sender"]
    assert m.meta == data.get("meta", {})
    assert Message.model_validate(data) == m


def test_every_origin_has_a_valid_example() -> None:
    origins = set(typing.get_args(Message.model_fields["origin"].annotation))
    assert origins == {"invoke", "chat", "task", "chore", "will"}
    assert {p.values[0]["origin"] for p in VALID} == origins


INVALID = [
    pytest.param(msg(origin="chat", sender="bob"), "origin 'chat' requires a channel", id="chat-no-channel"),
    pytest.param(msg(origin="chat", channel="", sender="bob"), "origin 'chat' requires a channel", id="chat-empty-channel"),
    pytest.param(msg(origin="invoke", channel="slack"), "origin 'invoke' requires channel = None", id="invoke-channel"),
    pytest.param(msg(origin="task", channel="x", sender="self"), "origin 'task' requires channel = None", id="task-channel"),
    pytest.param(msg(origin="chore", channel="", sender="self"), "origin 'chore' requires channel = None", id="chore-empty-channel"),
    pytest.param(msg(origin="will", channel="c", sender="self"), "origin 'will' requires channel = None", id="will-channel"),
    pytest.param(msg(origin="task", sender="alice"), "origin 'task' requires sender = 'self'", id="task-sender"),
    pytest.param(msg(origin="chore", sender="cron"), "origin 'chore' requires sender = 'self'", id="chore-sender"),
    pytest.param(msg(origin="will", sender="Self"), "origin 'will' requires sender = 'self'", id="will-sender"),
    pytest.param(msg(thread_id=""), "thread_id must not be empty", id="empty-thread"),
    pytest.param(msg(origin="email"), "origin", id="unknown-origin"),
    pytest.param(msg(origin="CHAT", channel="c"), "origin", id="origin-case"),
    pytest.param({k: v for k, v in msg().items() if k != "sender"}, "sender", id="missing-sender"),
    pytest.param(msg(priority=3), "priority", id="extra-field"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "rule"), INVALID)
def test_invalid_messages_name_the_rule(data: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidMessage) as info:
        Message.parse(data)
    text = str(info.value)
    assert rule in text
    assert text.startswith("invalid message: ")
    assert "Value error, " not in text  # pydantic's prefix is stripped
    assert isinstance(info.value, ValueError)


def test_invalid_origin_lists_the_field() -> None:
    with pytest.raises(InvalidMessage, match=r"^invalid message: origin: "):
        Message.parse(msg(origin="email"))


def test_rule_errors_are_located_on_the_message() -> None:
    with pytest.raises(InvalidMessage, match=r"^invalid message: message: rule: "):
        Message.parse(msg(thread_id=""))


def test_message_is_frozen() -> None:
    m = Message.parse(msg())
    with pytest.raises(pydantic.ValidationError):
        m.text = "changed"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        m.origin = "chat"  # type: ignore[misc]
    assert m.text == "hi"


# --- Decision ------------------------------------------------------------------------------


def test_decision_constructors() -> None:
    a = Decision.approve("c1")
    assert (a.action, a.args, a.use_result, a.decided_by) == ("resume", None, False, "operator")
    assert a.id.startswith("d_") and a.id != Decision.approve("c1").id
    e = Decision.approve("c1", args={"path": "x"}, remember="room")
    assert (e.args, e.remember) == ({"path": "x"}, "room")
    r = Decision.with_result("c1", {"ok": True})
    assert (r.action, r.result, r.use_result) == ("resume", {"ok": True}, True)
    c = Decision.cancel("c1", "too risky")
    assert (c.action, c.reason) == ("cancel", "too risky")


def test_decision_is_frozen() -> None:
    d = Decision.approve("c1")
    with pytest.raises(pydantic.ValidationError):
        d.action = "cancel"  # type: ignore[misc]


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param({"args": {"x": 1}}, id="args"),
        pytest.param({"args": {}}, id="empty-args"),
        pytest.param({"result": 5, "use_result": True}, id="result"),
        pytest.param({"result": None, "use_result": True}, id="null-result"),
    ],
)
def test_cancel_takes_no_args_or_result(kw: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError, match="a cancel decision takes no arguments"):
        Decision(call_id="c1", action="cancel", **kw)
    with pytest.raises(pydantic.ValidationError, match="a cancel decision takes no arguments"):
        Decision.cancel("c1", **kw)


def test_args_and_result_together_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="not both"):
        Decision(call_id="c1", action="resume", args={"x": 1}, result=2, use_result=True)
    with pytest.raises(pydantic.ValidationError, match="not both"):
        Decision.with_result("c1", 2, args={"x": 1})


@pytest.mark.parametrize(
    "kw",
    [
        pytest.param({"action": "approve"}, id="bad-action"),
        pytest.param({"action": "resume", "remember": "forever"}, id="bad-remember"),
        pytest.param({"action": "resume", "color": "red"}, id="extra-field"),
        pytest.param({"action": "resume", "args": [1, 2]}, id="args-not-object"),
    ],
)
def test_decision_field_validation(kw: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        Decision(call_id="c1", **kw)


def test_denial_text() -> None:
    assert Decision.cancel("c1").denial_text() == "denied by operator"
    assert Decision.cancel("c1", "no").denial_text() == "denied by operator: no"
    assert Decision.cancel("c1", "rule", decided_by="policy").denial_text() == (
        "denied by policy: rule"
    )


# --- events --------------------------------------------------------------------------------

EVENTS = [
    ev.TurnStarted(at=1.0, thread_id="t1", turn_id="u1", origin="chat", sender="bob", text="hi"),
    ev.TurnChanged(at=2.0, thread_id="t1", turn_id="u1", status="done", reason="stopped:max_rounds", detail="25 rounds"),
    ev.StepStarted(at=3.0, thread_id="t1", turn_id="u1", step_id=7, step_kind="inference"),
    ev.StepFinished(at=4.5, turn_id="u1", step_id=7, step_kind="tool_round", status="failed", summary="2 calls", duration=0.25, input_tokens=10, output_tokens=3),
    ev.TextDelta(at=5.0, thread_id="t1", turn_id="u1", text="Hel\u00e9\n"),
    ev.CallOutput(at=5.5, thread_id="t1", turn_id="u1", call_id="c1", stream="stderr", text="50%\r\x1b[2K", skipped=4096),
    ev.MessageAppended(at=6.0, thread_id="t1", turn_id="u1", role="tool", text="42", seq=9),
    ev.CallChanged(at=7.0, thread_id="t1", turn_id="u1", call_id="c1", tool="shell", args={"cmd": "ls", "n": [1, 2.5, None]}, status="suspended", error="needs approval"),
    ev.CallChanged(at=7.5, call_id="c2", tool="calc", args="not json {", status="succeeded", result="3"),
    ev.DecisionRecorded(at=8.0, decision_id="d_1", call_id="c1", action="cancel", status="applied", reason="no"),
    ev.Notice(at=9.0, level="warning", text="bad agentdeck.toml"),
    ev.Notice(at=9.5, text="retrying"),
    ev.DeliveryChanged(at=10.0, thread_id="telegram:42", turn_id="u1", channel="tg", key="u1", state="retrying", outbox_id=3, tries=2, next_at=12.5, error="HTTP 502"),
]  # fmt: skip


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: f"{e.kind}")
def test_event_round_trip(event: Any) -> None:
    back = ev.parse_event(event.model_dump_json())
    assert type(back) is type(event)
    assert back == event
    assert ev.parse_event(event.model_dump_json().encode()) == event


def test_every_event_type_is_covered_and_kinds_are_unique() -> None:
    union = typing.get_args(ev.Event)[0]
    types = set(typing.get_args(union))
    assert {type(e) for e in EVENTS} == types
    kinds = [t.model_fields["kind"].default for t in types]
    assert len(set(kinds)) == len(kinds)


def test_parse_event_refuses_unknown_kind() -> None:
    with pytest.raises(pydantic.ValidationError):
        ev.parse_event('{"kind": "nope", "at": 1.0}')


def test_events_are_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        EVENTS[0].text = "x"
