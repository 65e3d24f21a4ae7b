"""The bodies of the room's API: what a client sends and what it gets back.

Requests and answers are pydantic models; where the engine already has the type (a
`Decision`, a `PendingCall`, a `TurnOutcome`, the scheduler's `Statistics`) the API uses
that type as it is, so the in-process and the remote client return the same objects.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.domain.decisions import storable
from engine.domain.instructions import MAX_PART

Strategy = Literal["react", "direct", "plan_execute"]
# a submitted turn may also be an operator's compaction of its thread, or its undoing
TurnStrategy = Literal["react", "direct", "plan_execute", "compact", "uncompact"]


class _Body(BaseModel):
    # Built when defined (the domain's and config's models defer it to their first use, so a
    # command builds only those it uses): a route's body, and FastAPI refuses a deferred
    # model's schema under the parameter's alias.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SubmitBody(_Body):
    """A message for a turn: `invoke` (a one-off) or `chat` (a channel's conversation)."""

    origin: Literal["invoke", "chat"] = "invoke"
    thread_id: str = Field(min_length=1, max_length=512)
    text: str
    sender: str = Field("api", min_length=1, max_length=200)
    channel: str | None = Field(None, max_length=200)  # required for chat
    strategy: TurnStrategy | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    refuse_if_waiting: bool = False  # 409 when the thread has a turn waiting for a decision

    @model_validator(mode="after")
    def _storable(self) -> SubmitBody:
        # A body's JSON can hold "\udcff", a lone surrogate: the conversation and SQLite
        # cannot encode it (the constrained strings above refuse it themselves).
        storable(self.text, "text")
        storable(self.meta, "meta")
        return self


class Submitted(_Body):
    """The request is durable: it runs now, waits in the queue, or went into another."""

    request_id: str
    turn_id: str  # the turn that will answer it (another request's, when coalesced)
    thread_id: str
    status: Literal["queued", "admitted", "coalesced"]
    why_queued: str | None = None  # set while it waits in the queue


class Decided(_Body):
    """A decision is recorded: `queued` (applied as soon as its call can take it),
    `duplicate` (the call was already decided; `winner` names the decision that was) or
    `refused` (an approval not bound to the call's arguments, or bound to none: `note`
    says why; nothing ran and the call still waits: engine/decisions/binding.py)."""

    decision_id: str
    call_id: str
    status: Literal["queued", "duplicate", "refused"]
    turn_id: str
    thread_id: str
    call_status: str
    winner: str | None = None
    note: str | None = None


class CancelBody(_Body):
    reason: str = Field("cancelled by operator", max_length=10_000)


class Cancelled(_Body):
    turn_id: str
    cancelled: bool  # False: the turn had already ended


class GroupChange(_Body):
    """The settings to change; those left out stay as they are."""

    priority: int | None = None
    max_running_turns: int | None = Field(None, ge=0, le=1000)
    max_queued_turns: int | None = Field(None, ge=1, le=1_000_000)
    overflow_policy: Literal["reject", "drop_oldest", "replace_pending"] | None = None
    coalesce: Literal["none", "keep_pending", "newest"] | None = None
    paused: bool | None = None
    strategy: Strategy | None = None


class InstructionsBody(_Body):
    thread_id: str = Field(min_length=1, max_length=4096)
    text: str | None = Field(None, max_length=MAX_PART)  # None or blank: the thread has none


class InstructionsPart(_Body):
    source: str  # AGENTS.md, [agent] instructions, the group NAME, the thread ID
    text: str


class ThreadInstructions(_Body):
    """What a new turn on a thread is told now: the system prompt and where each part
    comes from (engine/domain/instructions.py); `own` is the thread's own part."""

    thread_id: str
    group: str
    hash: str  # "" when there are none
    text: str
    parts: list[InstructionsPart]
    own: str | None


class Info(_Body):
    """Who serves the room: health and identity."""

    version: str
    pid: int
    kind: str  # console | run | start
    run_id: str
    room: str
    model: str
    started_at: float
    uptime: float
    seq: int  # the newest event's sequence number
    streams: int  # event streams open now


class Problem(_Body):
    """An error, as RFC 9457 `application/problem+json`."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str = ""


class LoopState(_Body):
    """One loop or channel: its state (starting, up, failing, stopped), its last poll or
    delivery that went through (`last_ok`), its last error and how many in a row."""

    name: str
    kind: str  # telegram, slack, webhook; or the loop's own name (server, pulse, hook)
    loop: str  # server, pulse, hook, poll
    group: str | None = None  # a channel's thread group
    state: str
    last_ok: float | None = None
    last_error: str | None = None
    errors: int = 0
    received: int = 0
    rejected: int = 0
    lag: float | None = None
    detail: dict[str, str] = Field(default_factory=dict)


class ChannelsView(_Body):
    """Every loop (server, pulse, hook listener) and channel of the room, and its outbound
    deliveries by state; `delivering` is False when the delivery worker does not run."""

    loops: list[LoopState]
    channels: list[LoopState]
    hook_address: str | None = None
    deliveries: dict[str, int]
    delivering: bool


class DeliveryRow(_Body):
    """One answer owed to a channel (the outbox), as it stands; `text` is its first 200
    characters. Where it goes (the reply address) is not shown."""

    id: int
    turn_id: str
    thread_id: str
    channel: str
    state: str  # pending, retrying, sent, dead, dropped
    tries: int
    next_at: float
    last_error: str | None = None
    created_at: float
    sent_at: float | None = None
    text: str = ""


class RoomOverview(_Body):
    """One room of the machine's bus: its turns running and waiting, and its owner."""

    room: str  # its path
    name: str
    running: int
    waiting: int
    pid: int | None = None  # the owner's, None when nobody served it
    alive: bool  # the owner's process is alive
    updated_at: float
    this: bool = False  # the room this client is for
