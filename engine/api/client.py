"""The one interface the console and the CLI program against, and the errors it raises.

Two implementations: `LocalClient` over a `Runtime` in this process (the room's owner) and
`RemoteClient` over the owner's API (everyone else). Both return the engine's own types,
so a caller cannot tell them apart except by `hosted`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from anyio.abc import TaskStatus

from engine.api.models import (
    Cancelled,
    ChannelsView,
    Decided,
    DeliveryRow,
    GroupChange,
    Info,
    NewRule,
    Revoked,
    RoomOverview,
    SubmitBody,
    Submitted,
)
from engine.cluster_view import ClusterView
from engine.decisions import Decision, PendingCall
from engine.events import Event
from engine.outcome import TurnOutcome
from engine.review import Killed, Review
from engine.room import Room
from engine.rules import Rule
from engine.scheduler import GroupConfig, Statistics
from engine.store.recent import Conversation, Recent

Receive = Callable[[Event], None]
Resync = Callable[[], Awaitable[None]]


class ApiError(Exception):
    """The owner refused a request; `status` is the HTTP status, the text says why."""

    status = 500

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if status is not None:
            self.status = status


class NotFound(ApiError, LookupError):
    """No such turn, call or route."""

    status = 404


class Conflict(ApiError):
    """The request cannot apply now (a waiting thread, a full queue, a stopping runtime)."""

    status = 409


class Invalid(ApiError, ValueError):
    """The request is malformed: the text names what."""

    status = 422


class Refused(ApiError):
    """The scheduler refused the request (its group's queue is full); the text is the
    reason it recorded."""

    status = 429


class OwnerGone(ApiError):
    """Nobody serves the room any more (the owner stopped or died), or never did."""

    status = 503


class ServerError(RuntimeError):
    """The API cannot be served as configured; the text says why and what to change."""


class RoomClient(Protocol):
    """What an operator can do to a room's runtime, wherever it runs."""

    room: Room

    @property
    def hosted(self) -> bool:
        """True in the owner's own process; False when attached to it from another."""
        ...

    async def info(self) -> Info:
        """Who serves the room, since when, with which model."""
        ...

    async def submit(self, body: SubmitBody) -> Submitted:
        """Offer a message; return once its request is durable."""
        ...

    async def outcome(self, turn_id: str, wait: float = 0.0) -> TurnOutcome:
        """Where a turn (or a request still queued) stands; with `wait`, up to that many
        seconds for it to stop running first."""
        ...

    async def decide(self, decision: Decision) -> Decided:
        """Record a decision on a call; return once it is durable."""
        ...

    async def cancel(self, turn_id: str, reason: str = "cancelled by operator") -> Cancelled:
        """Cancel a running or waiting turn."""
        ...

    async def pending(self) -> list[PendingCall]:
        """Every call waiting for a decision, oldest first."""
        ...

    async def reviews(self) -> list[Review]:
        """Every call waiting for a review after a crash, oldest first, with what is known
        of it now (its process group alive or not, the files it was writing)."""
        ...

    async def kill_orphan(self, call_id: str) -> Killed:
        """End the process group a crash left of call `call_id` (SIGTERM, then SIGKILL):
        only one this room recorded, in a run before the current one."""
        ...

    async def rules(self) -> list[Rule]:
        """Every rule applied (agentdeck.toml's, then execution.db's), with uses and last use."""
        ...

    async def add_rule(self, rule: NewRule) -> Rule:
        """Store and apply a new rule; `Invalid` says what is wrong with it."""
        ...

    async def revoke_rule(self, rule_id: str, by: str = "operator") -> Revoked:
        """Revoke a rule of execution.db: `NotFound` for no such rule, `Conflict` for
        agentdeck.toml's (changed in the file) or one revoked already."""
        ...

    async def channels(self) -> ChannelsView:
        """Every loop (server, pulse, hook listener) and channel with its state, and the
        outbound deliveries by state."""
        ...

    async def deliveries(self, state: str | None = None, limit: int = 100) -> list[DeliveryRow]:
        """The answers owed to channels, newest first (only those in `state` when given)."""
        ...

    async def retry_delivery(self, outbox_id: int) -> DeliveryRow:
        """Send a dead answer again: `NotFound` for no such delivery, `Conflict` for one
        not dead, or when the delivery worker is not running."""
        ...

    async def drop_delivery(self, outbox_id: int) -> DeliveryRow:
        """Give up on a dead or retrying answer: `NotFound`, `Conflict` as for a retry."""
        ...

    async def rooms(self) -> list[RoomOverview]:
        """Every room on the machine's bus (this room's bus file), with its running and
        waiting counts and whether its owner is alive."""
        ...

    async def statistics(self) -> Statistics:
        """The scheduler: groups, threads, queued requests and why they wait. On a cluster's
        worker, every thread of the cluster, each with the worker leasing it (`worker`)."""
        ...

    async def cluster(self) -> ClusterView | None:
        """The cluster's workers with their heartbeats and leases, and every thread with
        its worker; None when the runtime is not a cluster's worker."""
        ...

    async def configure_group(self, name: str, change: GroupChange) -> GroupConfig:
        """Pause, resume or re-budget a thread group; it persists."""
        ...

    async def follow(
        self, receive: Receive, resync: Resync, *, task_status: TaskStatus[None] = ...
    ) -> None:
        """Hand every event to `receive`, in order, until cancelled; `task_status` is told
        once nothing published from then on can be missed (start it with `tg.start`).
        When events were missed (a slow reader, a new owner), `resync` is awaited: reload
        state from the truth, then events go on. Raises `OwnerGone` when nobody serves the
        room any more."""
        ...

    async def recent(self) -> Recent:
        """What a console shows first: threads, recent turns, steps and calls, read from
        execution.db (read-only: the same in the owner's process and any other)."""
        ...

    async def conversation(self, thread_id: str, limit: int) -> Conversation:
        """A thread's newest stored messages, and how its turns ended."""
        ...

    def new_id(self, prefix: str) -> str:
        """A fresh id (decisions name themselves, so a retry is recognised)."""
        ...

    async def aclose(self) -> None: ...
