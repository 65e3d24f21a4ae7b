"""What the scheduler shows of itself: a snapshot of its groups, the threads its turns
hold and why each queued request (or resumed turn) waits. Plain records, kept apart from
engine/services/scheduler.py's decisions: the API serves them, the console and `agentdeck status`
draw them, and a cluster's view (engine/domain/cluster_view.py) joins its threads to them."""

from __future__ import annotations

from dataclasses import dataclass

from engine.domain.usage import Limit, Usage


@dataclass(frozen=True)
class QueuedStats:
    request_id: str  # a resumed turn waiting for a slot: the turn's (its request's) id
    thread_id: str
    waits_because: str
    since: float
    group: str = ""  # the request's group


@dataclass(frozen=True)
class GroupStats:
    name: str
    priority: int
    running: int
    max_running_turns: int
    queued: int
    max_queued_turns: int
    waiting: int  # turns holding a thread, not running: waiting for a decision or a slot
    paused: bool
    overflow_policy: str
    coalesce: str
    held: str | None = None  # why new turns wait: a spending budget reached (None: they don't)
    today: Usage | None = None  # what the group spent today (UTC; None: not said)
    budget: Limit | None = None  # the group's daily budget (None: none)


@dataclass(frozen=True)
class ThreadStats:
    thread_id: str
    group: str
    turn_id: str | None
    state: str  # running | waiting (for a decision, or resumed: for a slot) | idle
    queued: int
    worker: str | None = None  # the cluster worker leasing the thread (None: not a cluster)


@dataclass(frozen=True)
class Statistics:
    """A snapshot of the scheduler: groups, busy threads, and why each request (and each
    resumed turn, first in its group) waits."""

    groups: tuple[GroupStats, ...]
    threads: tuple[ThreadStats, ...]
    queued: tuple[QueuedStats, ...]
    max_running_turns: int
    running: int
    # the worker that answered when the runtime is a cluster's (its threads then are the
    # whole cluster's, each with its worker: engine/domain/cluster_view.py); None otherwise
    worker: str | None = None
    held: str | None = None  # why no new turn starts in the room: its daily budget reached
    today: Usage | None = None  # what the room spent today (UTC; None: not said)
