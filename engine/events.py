"""Typed events the runtime publishes, one vocabulary for the store, the bus and the console.

Every change the runtime makes is published as one of these after its checkpoint commits
(text deltas, which are not stored, are published as they stream). Consumers match on
`kind` exhaustively.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    model_serializer,
)

from engine.lifecycle import CallStatus, DecisionStatus, StepStatus, TurnStatus


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: float
    thread_id: str = ""
    turn_id: str = ""


class _TurnEvent(_Event):
    """An event of a turn that names its thread's group (`group`, the scheduler's).

    Events stored before turns carried their group have none; read back, they are written
    out again as they were stored, without the field, so a stored event's JSON never
    changes.
    """

    @model_serializer(mode="wrap")
    def _group_if_known(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if "group" in data and data["group"] is None:
            del data["group"]
        return data


class TurnStarted(_TurnEvent):
    kind: Literal["turn_started"] = "turn_started"
    origin: str
    sender: str
    text: str
    strategy: str = "react"
    group: str | None = None  # the thread's group (None in events stored before it was said)


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


class TextDelta(_Event):
    """A piece of assistant text as the model streams it (published, not stored)."""

    kind: Literal["text_delta"] = "text_delta"
    text: str


class MessageAppended(_Event):
    """An entry was appended to a thread's conversation."""

    kind: Literal["message_appended"] = "message_appended"
    role: str
    text: str
    seq: int = 0


class CallChanged(_Event):
    """A tool call moved in its lifecycle. `deadline_at` is written only when set, so an
    event stored before calls had deadlines keeps its JSON."""

    kind: Literal["call_changed"] = "call_changed"
    call_id: str
    tool: str
    args: Any = None
    status: CallStatus
    result: str | None = None
    error: str | None = None
    # suspended: when its deadline decides it (engine.deadlines); None: no deadline
    deadline_at: float | None = None
    on_deadline: Literal["cancel", "approve"] | None = None  # what the deadline decides

    @model_serializer(mode="wrap")
    def _deadline_if_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("deadline_at", "on_deadline"):
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
    | MessageAppended
    | CallChanged
    | DecisionRecorded
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
