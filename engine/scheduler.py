"""The scheduler: which turn request starts when, and why the others wait.

Rules, in order: at most one turn per thread (a `waiting` turn holds its thread but not
its group's running budget); a paused group starts nothing; a group runs at most
`max_running_turns`; the runtime runs at most `max_running_turns` overall, and free slots
go to higher-priority groups first. Coalescing and overflow are decided when a request is
offered, so every request ends admitted, coalesced into another, or rejected with a reason.

The scheduler holds no I/O: the runtime persists what it decides (admission is durable
before it is acknowledged) and tells it when turns run, wait and end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from engine.messages import Message

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


DEFAULT_GROUPS = {
    "chat": GroupConfig("chat", priority=100, max_running_turns=4, max_queued_turns=100),
    "task": GroupConfig("task", priority=50, max_running_turns=2, max_queued_turns=50,
                        overflow_policy="drop_oldest", coalesce="newest"),
    "chore": GroupConfig("chore", priority=20, max_running_turns=1, max_queued_turns=20,
                         overflow_policy="drop_oldest", coalesce="keep_pending"),
    "will": GroupConfig("will", priority=10, max_running_turns=1, max_queued_turns=4,
                        overflow_policy="replace_pending", coalesce="newest"),
}  # fmt: skip


def group_for(message: Message) -> str:
    """The group a message's thread belongs to: `meta.group`, else by origin."""
    if isinstance(group := message.meta.get("group"), str) and group:
        return group
    return message.origin if message.origin in ("task", "chore", "will") else "chat"


class Rejected(RuntimeError):
    """A turn request was refused; the reason is recorded with it."""

    final = True


@dataclass
class Request:
    """A turn request: queued, then admitted, coalesced into another, or rejected."""

    id: str
    message: Message
    group: str
    created_at: float
    strategy: str | None = None
    status: Literal["queued", "admitted", "coalesced", "rejected"] = "queued"
    reason: str | None = None
    coalesced_into: str | None = None

    @property
    def thread_id(self) -> str:
        return self.message.thread_id


@dataclass(frozen=True)
class QueuedStats:
    request_id: str
    thread_id: str
    waits_because: str
    since: float


@dataclass(frozen=True)
class GroupStats:
    name: str
    priority: int
    running: int
    max_running_turns: int
    queued: int
    max_queued_turns: int
    waiting: int
    paused: bool
    overflow_policy: str
    coalesce: str


@dataclass(frozen=True)
class ThreadStats:
    thread_id: str
    group: str
    turn_id: str | None
    state: str  # running | waiting | idle
    queued: int


@dataclass(frozen=True)
class Statistics:
    """A snapshot of the scheduler: groups, busy threads, and why each request waits."""

    groups: tuple[GroupStats, ...]
    threads: tuple[ThreadStats, ...]
    queued: tuple[QueuedStats, ...]
    max_running_turns: int
    running: int


@dataclass
class _Holder:
    turn_id: str
    group: str
    state: Literal["running", "waiting"]


@dataclass
class Scheduler:
    """Admission decisions over thread groups. Pure state; the runtime does the I/O."""

    groups: dict[str, GroupConfig] = field(default_factory=lambda: dict(DEFAULT_GROUPS))
    max_running_turns: int = 8
    clock: Callable[[], float] = lambda: 0.0
    queue: list[Request] = field(default_factory=list)  # in arrival order
    holders: dict[str, _Holder] = field(default_factory=dict)  # thread -> its turn

    def group(self, name: str) -> GroupConfig:
        if name not in self.groups:
            self.groups[name] = GroupConfig(name)
        return self.groups[name]

    def configure(self, name: str, **changes: object) -> GroupConfig:
        """Change a group's settings while running (pause, budget, priority, ...)."""
        self.groups[name] = replace(self.group(name), **changes)  # type: ignore[arg-type]
        return self.groups[name]

    # -- offering -------------------------------------------------------------------------

    def offer(self, req: Request) -> list[Request]:
        """Queue `req`, coalescing or overflowing as its group says. Returns every request
        whose status changed (including `req`), for the runtime to persist."""
        group = self.group(req.group)
        changed = [req]
        pending = [r for r in self.queue if r.thread_id == req.thread_id]
        if pending and group.coalesce == "keep_pending":
            req.status, req.coalesced_into = "coalesced", pending[0].id
            req.reason = f"coalesced into pending request {pending[0].id}"
            return changed
        if pending and group.coalesce == "newest":
            for old in pending:
                self._drop(old, "coalesced", f"coalesced into newer request {req.id}", req.id)
                changed.append(old)
        queued = [r for r in self.queue if r.group == req.group]
        if len(queued) >= group.max_queued_turns:
            if group.overflow_policy == "reject" or not queued:
                req.status = "rejected"
                req.reason = f"group {req.group} queue is full ({group.max_queued_turns} queued)"
                return changed
            victim = queued[0] if group.overflow_policy == "drop_oldest" else queued[-1]
            why = "dropped: queue full" if group.overflow_policy == "drop_oldest" else (
                f"replaced by newer request {req.id}: queue full")  # fmt: skip
            self._drop(victim, "rejected", f"{why} in group {req.group}", req.id)
            changed.append(victim)
        self.queue.append(req)
        return changed

    def _drop(self, req: Request, status: str, reason: str, into: str | None) -> None:
        self.queue.remove(req)
        req.status, req.reason = status, reason  # type: ignore[assignment]
        req.coalesced_into = into if status == "coalesced" else None

    # -- admitting ------------------------------------------------------------------------

    def running_in(self, group: str) -> int:
        return sum(1 for h in self.holders.values() if h.group == group and h.state == "running")

    @property
    def running(self) -> int:
        return sum(1 for h in self.holders.values() if h.state == "running")

    def admissions(self) -> list[Request]:
        """Requests that may start now, highest priority first; they are marked admitted
        and their threads held. Call after every change."""
        admitted: list[Request] = []
        for req in self._by_priority():
            if self.why_waiting(req) is None:
                self.queue.remove(req)
                req.status = "admitted"
                self.holders[req.thread_id] = _Holder(req.id, req.group, "running")
                admitted.append(req)
        return admitted

    def _by_priority(self) -> list[Request]:
        order = {r.id: i for i, r in enumerate(self.queue)}
        return sorted(self.queue, key=lambda r: (-self.group(r.group).priority, order[r.id]))

    def why_waiting(self, req: Request) -> str | None:
        """Why a queued request is not running, or None if it may start now."""
        holder = self.holders.get(req.thread_id)
        if holder is not None:
            if holder.state == "waiting":
                return f"thread waiting on a decision (turn {holder.turn_id})"
            return f"thread busy with turn {holder.turn_id}"
        earlier = next(r for r in self.queue if r.thread_id == req.thread_id)
        if earlier is not req:
            return f"behind request {earlier.id} on the same thread"
        group = self.group(req.group)
        if group.paused:
            return f"group {group.name} paused"
        if self.running_in(group.name) >= group.max_running_turns:
            return f"group {group.name} budget full ({group.max_running_turns} running)"
        if self.running >= self.max_running_turns:
            ahead = self._higher_priority_waiting(group)
            if ahead:
                return f"lower priority than group {ahead}"
            return f"runtime budget full ({self.max_running_turns} running)"
        return None

    def _higher_priority_waiting(self, group: GroupConfig) -> str | None:
        for r in self._by_priority():
            g = self.group(r.group)
            if g.priority > group.priority and r.thread_id not in self.holders:
                return g.name
        return None

    # -- turns ----------------------------------------------------------------------------

    def hold(self, thread_id: str, turn_id: str, group: str, state: str) -> None:
        """A turn runs or waits on its thread (also for turns resumed after a restart)."""
        self.holders[thread_id] = _Holder(turn_id, group, state)  # type: ignore[arg-type]

    def release(self, thread_id: str, turn_id: str) -> None:
        """A turn is done: its thread is free."""
        holder = self.holders.get(thread_id)
        if holder is not None and holder.turn_id == turn_id:
            del self.holders[thread_id]

    def holder(self, thread_id: str) -> tuple[str, str] | None:
        h = self.holders.get(thread_id)
        return (h.turn_id, h.state) if h else None

    # -- looking --------------------------------------------------------------------------

    def statistics(self) -> Statistics:
        """An immutable snapshot, cheap enough to take on every frame."""
        groups = tuple(
            GroupStats(
                name=g.name, priority=g.priority, running=self.running_in(g.name),
                max_running_turns=g.max_running_turns,
                queued=sum(1 for r in self.queue if r.group == g.name),
                max_queued_turns=g.max_queued_turns,
                waiting=sum(1 for h in self.holders.values()
                            if h.group == g.name and h.state == "waiting"),
                paused=g.paused, overflow_policy=g.overflow_policy, coalesce=g.coalesce,
            )
            for g in sorted(self.groups.values(), key=lambda g: (-g.priority, g.name))
        )  # fmt: skip
        queued_by_thread: dict[str, int] = {}
        for r in self.queue:
            queued_by_thread[r.thread_id] = queued_by_thread.get(r.thread_id, 0) + 1
        threads = tuple(
            ThreadStats(thread_id=t, group=h.group, turn_id=h.turn_id, state=h.state,
                        queued=queued_by_thread.pop(t, 0))
            for t, h in sorted(self.holders.items())
        ) + tuple(
            ThreadStats(thread_id=t, group=next(r.group for r in self.queue if r.thread_id == t),
                        turn_id=None, state="idle", queued=n)
            for t, n in sorted(queued_by_thread.items())
        )  # fmt: skip
        queued = tuple(
            QueuedStats(r.id, r.thread_id, self.why_waiting(r) or "starting", r.created_at)
            for r in self._by_priority()
        )
        return Statistics(groups, threads, queued, self.max_running_turns, self.running)
