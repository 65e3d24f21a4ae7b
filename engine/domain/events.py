"""Typed events the runtime publishes, one vocabulary for the store, the bus and the console.

Every change the runtime makes is published as one of these after its checkpoint commits
(text deltas, which are not stored, are published as they stream). Consumers match on
`kind` exhaustively.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)
from pydantic_core import to_json

from engine.lifecycle import CallStatus, DecisionStatus, StepStatus, TurnStatus
from engine.lifecycle.call import Awaiting


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    at: float
    thread_id: str = ""
    turn_id: str = ""


class _TurnEvent(_Event):
    """An event of a turn that names its thread's group (`group`, the scheduler's).

    Events stored before turns carried their group have none; read back, they are written
    out again as they were stored, without the field, so a stored event's JSON never
    changes. So is a turn's `channel`: said only for a message from a channel.
    """

    @model_serializer(mode="wrap")
    def _group_if_known(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("group", "channel", "model", "window"):
            if name in data and data[name] is None:
                del data[name]
        return data


class TurnStarted(_TurnEvent):
    kind: Literal["turn_started"] = "turn_started"
    origin: str
    sender: str
    text: str
    strategy: str = "react"
    group: str | None = None  # the thread's group (None in events stored before it was said)
    channel: str | None = None  # the channel a chat message came from (telegram, slack...)
    model: str | None = None  # provider:model that answers it (None: said before it was)
    window: int | None = None  # that model's context window in tokens (None: not known)


class TurnChanged(_TurnEvent):
    """A turn moved in its lifecycle; `reason` is set when it leaves `running`."""

    kind: Literal["turn_changed"] = "turn_changed"
    status: TurnStatus
    reason: str | None = None
    detail: str | None = None
    group: str | None = None  # the thread's group (None in events stored before it was said)


class StepStarted(_Event):
    kind: Literal["step_started"] = "step_started"
    step_id: int
    step_kind: str  # inference | tool_round | replay


class StepFinished(_Event):
    kind: Literal["step_finished"] = "step_finished"
    step_id: int
    step_kind: str
    status: StepStatus  # succeeded | failed | cancelled
    summary: str = ""
    duration: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    # Said only when there are some, so a step stored before them keeps its JSON.
    cached_tokens: int = Field(0, exclude_if=lambda n: n == 0)  # of input_tokens, from cache
    cost: float | None = Field(None, exclude_if=lambda c: c is None)  # US dollars (None: no
    # tokens, or no known price)


class TextDelta(_Event):
    """A piece of assistant text as the model streams it (published, not stored)."""

    kind: Literal["text_delta"] = "text_delta"
    text: str


class CallOutput(_Event):
    """What a running call has printed since the last one (published, never stored: the
    call's result is the record). Sent only to those who watch its thread or call, at a
    bounded rate (engine/turn/output.py): `skipped` counts the characters of `stream`
    that were not sent before `text`, which is the newest of them."""

    kind: Literal["call_output"] = "call_output"
    call_id: str
    stream: Literal["stdout", "stderr"] = "stdout"
    text: str
    skipped: int = 0


class MessageAppended(_Event):
    """An entry was appended to a thread's conversation."""

    kind: Literal["message_appended"] = "message_appended"
    role: str
    text: str
    seq: int = -1  # its place in the thread's conversation (-1: not said)


class CallChanged(_Event):
    """A tool call moved in its lifecycle. `deadline_at`, `on_deadline` and `awaiting` are
    written only when set, so an event stored before calls had them keeps its JSON."""

    kind: Literal["call_changed"] = "call_changed"
    call_id: str
    tool: str
    args: Any = None
    status: CallStatus
    result: str | None = None
    error: str | None = None
    # suspended: when its deadline decides it (engine.services.deadlines); None: no deadline
    deadline_at: float | None = None
    on_deadline: Literal["cancel", "approve"] | None = None  # what the deadline decides
    awaiting: Awaiting | None = None  # suspended: a decision, or a review after a crash

    @model_serializer(mode="wrap")
    def _deadline_if_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("deadline_at", "on_deadline", "awaiting"):
            if data.get(name, 0) is None:
                del data[name]
        return data


class DecisionRecorded(_Event):
    """A decision arrived or moved: `status` is queued, applied, duplicate (the call was
    already decided), superseded (a newer decision replaced one a dead run left) or refused
    (its arguments are not those it approved; `note` says why)."""

    kind: Literal["decision_recorded"] = "decision_recorded"
    decision_id: str
    call_id: str
    action: str
    status: DecisionStatus
    reason: str | None = None
    note: str | None = None  # a duplicate's or a refusal's why ("call already ...")


class DeliveryChanged(_Event):
    """An answer owed to a channel was recorded or moved (engine/services/delivery.py): `state` is
    pending, sent, retrying, dead or dropped; `key` is its idempotency key (the turn's
    id), `outbox_id` its row (None when it was just recorded)."""

    kind: Literal["delivery_changed"] = "delivery_changed"
    channel: str
    key: str
    state: Literal["pending", "sent", "retrying", "dead", "dropped"]
    outbox_id: int | None = None
    tries: int = 0
    next_at: float | None = None  # retrying: not before
    error: str | None = None  # the last try's, one line


class Notice(_Event):
    """Something an operator should know that is not a state change (a bad file, a retry)."""

    kind: Literal["notice"] = "notice"
    level: Literal["info", "warning", "error"] = "info"
    text: str


Event = Annotated[
    TurnStarted
    | TurnChanged
    | StepStarted
    | StepFinished
    | TextDelta
    | CallOutput
    | MessageAppended
    | CallChanged
    | DecisionRecorded
    | DeliveryChanged
    | Notice,
    Discriminator("kind"),
]


# A notice is one line whatever a file's name holds: line breaks and other control
# characters are shown escaped, so a name cannot forge a line of the log.
_ONE_LINE = {c: f"\\x{c:02x}" for c in [*range(32), 127, 0x85]} | {
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def one_line(text: str) -> str:
    """`text` as one line of valid UTF-8: control characters and line separators escaped,
    and a file name's bytes that are not UTF-8 (lone surrogates) too (stored, those made
    the next commit fail and ended the runtime)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").translate(_ONE_LINE)


@functools.cache
def _adapter() -> TypeAdapter[Event]:
    """Built on first use: its schema builds every event model, which a start need not."""
    return TypeAdapter(Event)


def parse_event(data: str | bytes) -> Event:
    """Read a stored event back into its type."""
    return _adapter().validate_json(data)


@functools.cache
def _list_adapter() -> TypeAdapter[list[Event]]:
    return TypeAdapter(list[Event])


def parse_events(data: str | bytes) -> list[Event]:
    """Read a JSON array of events (a batch of the API's event stream) into their types."""
    return _list_adapter().validate_json(data)


# -- stored rows --------------------------------------------------------------------------
#
# A step stores a call's call_changed events and a turn its turn_changed ones: their JSON
# is built here from their fields, without pydantic's model serializer and the Python wrap
# serializers those two kinds have (which make `model_dump_json` cost about twice this):
# the same text, byte for byte (a test compares the two for every kind). Every other kind,
# step_finished included (no wrap serializer: pydantic's own is faster than building it
# here), goes through pydantic.

_SPECIAL = {"inf": "null", "-inf": "null", "nan": "null"}  # as pydantic: ser_json_inf_nan


def _float(x: float) -> str:
    """A float as pydantic writes it: Python's shortest repr, except that an exponent of -5
    is written out (3.2e-05 is 0.000032) and an exponent has no leading zero (1e-7)."""
    r = repr(x)
    if "e" not in r:
        return _SPECIAL.get(r, r)
    mantissa, exp = r.split("e")
    e = int(exp)
    if e == -5:
        sign, digits = ("-", mantissa[1:]) if mantissa[0] == "-" else ("", mantissa)
        return f"{sign}0.0000{digits.replace('.', '')}"
    return f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"


def _opt(text: str | None) -> str:
    return "null" if text is None else encode_basestring(text)


def _head(e: _Event) -> str:
    return (f'{{"at":{_float(e.at)},"thread_id":{encode_basestring(e.thread_id)},'
            f'"turn_id":{encode_basestring(e.turn_id)},"kind":"{e.kind}"')  # type: ignore[attr-defined]  # fmt: skip


def _call_changed(e: CallChanged) -> str:
    tail = "" if e.deadline_at is None else f',"deadline_at":{_float(e.deadline_at)}'
    if e.on_deadline is not None:
        tail += f',"on_deadline":"{e.on_deadline}"'
    args = to_json(e.args, inf_nan_mode="null").decode()
    return (f'{_head(e)},"call_id":{encode_basestring(e.call_id)},'
            f'"tool":{encode_basestring(e.tool)},"args":{args},'
            f'"status":"{e.status.value}","result":{_opt(e.result)},"error":{_opt(e.error)}'
            f"{tail}}}")  # fmt: skip


def _turn_changed(e: TurnChanged) -> str:
    group = "" if e.group is None else f',"group":{encode_basestring(e.group)}'
    return (f'{_head(e)},"status":"{e.status.value}","reason":{_opt(e.reason)},'
            f'"detail":{_opt(e.detail)}{group}}}')  # fmt: skip


_ROWS: dict[type, Callable[[Any], str]] = {
    CallChanged: _call_changed,
    TurnChanged: _turn_changed,
}


def event_json(event: Event) -> str:
    """The JSON an event is stored (and streamed) as: `event.model_dump_json()`."""
    build = _ROWS.get(type(event))
    return build(event) if build is not None else event.model_dump_json()
