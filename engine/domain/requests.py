"""Turn requests and the thread groups they are offered to: the records the scheduler
(engine/services/scheduler.py) decides over and the store keeps (engine/store/schedule.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.domain.messages import Message
from engine.lifecycle import RequestStatus
from engine.lifecycle import request as request_lifecycle

__all__ = ["Coalesce", "GroupConfig", "Overflow", "Request"]

Overflow = Literal["reject", "drop_oldest", "replace_pending"]
Coalesce = Literal["none", "keep_pending", "newest"]


@dataclass(frozen=True)
class GroupConfig:
    """A thread group's settings."""

    name: str
    priority: int = 0
    max_running_turns: int = 1
    max_queued_turns: int = 100
    overflow_policy: Overflow = "reject"
    # none: every request queues; keep_pending: a thread keeps its one pending request and
    # later ones coalesce into it; newest: the newest request replaces the pending one
    coalesce: Coalesce = "none"
    paused: bool = False
    strategy: str | None = None  # the group's execution strategy (None: react)


@dataclass
class Request:
    """A turn request: queued, then admitted, coalesced into another, or rejected."""

    id: str
    message: Message
    group: str
    created_at: float
    strategy: str | None = None
    status: RequestStatus = RequestStatus.QUEUED
    reason: str | None = None
    coalesced_into: str | None = None

    def __post_init__(self) -> None:
        self.status = RequestStatus(self.status)  # a stored row gives the word

    @property
    def thread_id(self) -> str:
        return self.message.thread_id

    @property
    def turn_id(self) -> str:
        """The turn that answers this request: its own (an admitted request's turn has its
        id), or, once coalesced, the turn of the request it went into."""
        if self.status is RequestStatus.COALESCED and self.coalesced_into:
            return self.coalesced_into
        return self.id

    def move(self, dst: RequestStatus, reason: str | None = None, into: str | None = None) -> None:
        """Leave `queued` for one of its ends (IllegalTransition otherwise), saying why and,
        when coalesced, into which request."""
        self.status = request_lifecycle.check(self.status, dst)
        if reason is not None:
            self.reason = reason
        self.coalesced_into = into if dst is RequestStatus.COALESCED else None
