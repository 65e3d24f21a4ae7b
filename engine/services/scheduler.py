"""The scheduler: which turn request starts when, and why the others wait.

Rules, in order: at most one turn per thread (a `waiting` turn holds its thread but not
its group's running budget); a paused group starts nothing; a room, group or thread over
its daily spending budget starts no new turn (`held`, said by engine/services/budgets.py;
its resumed turns run, and stop at their next inference); a group runs at most
`max_running_turns`; the runtime runs at most `max_running_turns` overall, and free slots
go to higher-priority groups first. Coalescing and overflow are decided when a request is
offered, so every request ends admitted, coalesced into another, or rejected with a reason.

A turn that runs again (resumed by a decision, or interrupted by a stopped run) takes a
slot like any other: it keeps its thread, `resumed`, until `admissions` gives it one,
ahead of the queued requests of its group.

The scheduler holds no I/O: the runtime persists what it decides (admission is durable
before it is acknowledged) and tells it when turns run, wait and end.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from engine.domain.messages import Message
from engine.domain.requests import GroupConfig, Request
from engine.domain.scheduler_stats import GroupStats, QueuedStats, Statistics, ThreadStats
from engine.lifecycle import RequestStatus

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


class QueueFull(RuntimeError):
    """A request offered with `overflow=False` found its group's queue full: nothing was
    queued, dropped or recorded, and the same request may be offered again later."""

    final = False


@dataclass(frozen=True)
class Resumed:
    """A turn that runs again, admitted to a slot of its group (see `admissions`)."""

    turn_id: str
    thread_id: str
    group: str


@dataclass
class _Holder:
    turn_id: str
    group: str
    # running; waiting for a decision; resumed: to run again, waiting for a slot
    state: Literal["running", "waiting", "resumed"]
    since: float = 0.0


@dataclass
class Scheduler:
    """Admission decisions over thread groups. Pure state; the runtime does the I/O.

    Queued requests are indexed per thread (in order) and per group (in order); each group
    keeps a heap of the threads whose head request may start, so admitting costs
    O(log n) and nothing on the hot path scans the whole queue.
    """

    groups: dict[str, GroupConfig] = field(default_factory=lambda: dict(DEFAULT_GROUPS))
    max_running_turns: int = 8
    clock: Callable[[], float] = lambda: 0.0
    holders: dict[str, _Holder] = field(default_factory=dict)  # thread -> its turn
    _threads: dict[str, deque[Request]] = field(default_factory=dict)
    _by_group: dict[str, dict[str, Request]] = field(default_factory=dict)  # arrival order
    _ready: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # heaps
    _seq: dict[str, int] = field(default_factory=dict)  # request id -> arrival number
    _counter: itertools.count = field(default_factory=itertools.count)
    _running: dict[str, int] = field(default_factory=dict)  # group -> running turns
    # group -> turns other workers of a cluster run (engine/cluster/member.py refreshes it)
    elsewhere: dict[str, int] = field(default_factory=dict)
    _resumed: dict[str, dict[str, None]] = field(default_factory=dict)  # group -> threads, in order
    _turns: dict[str, str] = field(default_factory=dict)  # turn -> the thread it holds
    # Over a spending budget (engine/services/budgets.py): why new turns wait. A held
    # thread's head request leaves its group's heap (`_parked`) until it is let go.
    held_room: str | None = None
    held_groups: dict[str, str] = field(default_factory=dict)
    held_threads: dict[str, str] = field(default_factory=dict)
    _parked: set[str] = field(default_factory=set)

    def group(self, name: str) -> GroupConfig:
        if name not in self.groups:
            self.groups[name] = GroupConfig(name)
        return self.groups[name]

    def configure(self, name: str, **changes: object) -> GroupConfig:
        """Change a group's settings while running (pause, budget, priority, ...)."""
        self.groups[name] = replace(self.group(name), **changes)  # type: ignore[arg-type]
        return self.groups[name]

    @property
    def queue(self) -> list[Request]:
        """Every queued request, in arrival order."""
        return sorted((r for q in self._threads.values() for r in q), key=lambda r: self._seq[r.id])

    def queued_in(self, group: str) -> int:
        return len(self._by_group.get(group, ()))

    # -- offering -------------------------------------------------------------------------

    def offer(self, req: Request) -> list[Request]:
        """Queue `req`, coalescing or overflowing as its group says. Returns every request
        whose status changed (including `req`), for the runtime to persist."""
        group = self.group(req.group)
        changed = [req]
        pending = list(self._threads.get(req.thread_id, ()))
        if pending and group.coalesce == "keep_pending":
            first = pending[0].id
            req.move(RequestStatus.COALESCED, f"coalesced into pending request {first}", first)
            return changed
        if pending and group.coalesce == "newest":
            for old in pending:
                newer = f"coalesced into newer request {req.id}"
                self._drop(old, RequestStatus.COALESCED, newer, req.id)
                changed.append(old)
        queued = self._by_group.get(req.group, {})
        if len(queued) >= group.max_queued_turns:
            if group.overflow_policy == "reject" or not queued:
                full = f"group {req.group} queue is full ({group.max_queued_turns} queued)"
                req.move(RequestStatus.REJECTED, full)
                return changed
            order = (
                iter(queued.values())
                if group.overflow_policy == "drop_oldest"
                else reversed(queued.values())
            )
            victim = next(order)
            why = "dropped: queue full" if group.overflow_policy == "drop_oldest" else (
                f"replaced by newer request {req.id}: queue full")  # fmt: skip
            self._drop(victim, RequestStatus.REJECTED, f"{why} in group {req.group}", req.id)
            changed.append(victim)
        self.requeue(req)
        return changed

    def requeue(self, req: Request) -> None:
        """Put a queued request in line (also used to restore the queue after a restart)."""
        self._seq[req.id] = next(self._counter)
        self._threads.setdefault(req.thread_id, deque()).append(req)
        self._by_group.setdefault(req.group, {})[req.id] = req
        self._mark_ready(req.thread_id)

    def knows(self, request_id: str) -> bool:
        """Whether the request is in line here."""
        return request_id in self._seq

    def forget(self, thread_id: str) -> list[Request]:
        """Drop all that is known of a thread (its holder, its queued requests, as they
        are): a cluster worker gave its lease up. Returns the requests taken out of line."""
        self._unhold(thread_id)
        dropped = list(self._threads.get(thread_id, ()))
        for req in dropped:
            self._remove(req)
        return dropped

    def withdraw(self, req: Request) -> None:
        """Take a queued request out of line as it is (a one-off leaves it to the next run)."""
        self._remove(req)

    def _drop(self, req: Request, status: RequestStatus, reason: str, into: str | None) -> None:
        self._remove(req)
        req.move(status, reason, into)

    def _remove(self, req: Request) -> None:
        thread_queue = self._threads[req.thread_id]
        thread_queue.remove(req)
        if not thread_queue:
            del self._threads[req.thread_id]
        del self._by_group[req.group][req.id]
        self._seq.pop(req.id, None)
        self._mark_ready(req.thread_id)

    def _mark_ready(self, thread_id: str) -> None:
        """If the thread is free and has a head request, offer that head to its group."""
        queue = self._threads.get(thread_id)
        if queue and thread_id not in self.holders:
            head = queue[0]
            heapq.heappush(self._ready.setdefault(head.group, []), (self._seq[head.id], thread_id))

    def _ready_head(self, group: str) -> Request | None:
        """The oldest head request of a free thread in `group` (stale heap entries dropped,
        and those of a held thread parked until it is let go)."""
        heap = self._ready.get(group)
        while heap:
            seq, thread_id = heap[0]
            queue = self._threads.get(thread_id)
            if queue and thread_id not in self.holders and self._seq.get(queue[0].id) == seq:
                if thread_id not in self.held_threads:
                    return queue[0]
                self._parked.add(thread_id)
            heapq.heappop(heap)
        return None

    # -- holding (spending budgets) --------------------------------------------------------

    def hold_group(self, name: str, why: str | None) -> None:
        """Hold new turns of group `name` (why: its budget), or let them go (None)."""
        if why is None:
            self.held_groups.pop(name, None)
        else:
            self.held_groups[name] = why

    def hold_thread(self, thread_id: str, why: str | None) -> None:
        """Hold new turns of a thread (why: its budget), or let them go (None)."""
        if why is not None:
            self.held_threads[thread_id] = why
        elif self.held_threads.pop(thread_id, None) is not None and thread_id in self._parked:
            self._parked.discard(thread_id)
            self._mark_ready(thread_id)

    def _held(self, group: str) -> str | None:
        """Why new turns of `group` do not start: the room's or the group's budget."""
        return self.held_room or self.held_groups.get(group)

    # -- admitting ------------------------------------------------------------------------

    def running_here(self, group: str) -> int:
        """The group's turns running in this runtime."""
        return self._running.get(group, 0)

    def queued_on(self, thread_id: str) -> int:
        return len(self._threads.get(thread_id, ()))

    def running_in(self, group: str) -> int:
        """The group's running turns: this runtime's, and its cluster's other workers'."""
        return self._running.get(group, 0) + self.elsewhere.get(group, 0)

    @property
    def running(self) -> int:
        """Turns running in this runtime (its own budget, `max_running_turns`)."""
        return sum(self._running.values())

    def admissions(self) -> list[Request | Resumed]:
        """Turns that may start now, highest priority first, in each group resumed turns
        before queued requests: the turns run (held `running`), the requests are marked
        admitted and their threads held. Call after every change."""
        admitted: list[Request | Resumed] = []
        for group in sorted(self.groups.values(), key=lambda g: -g.priority):
            while not group.paused and self.running_in(group.name) < group.max_running_turns:
                if self.running >= self.max_running_turns:
                    return admitted
                if resumed := self._resumed.get(group.name):
                    thread_id = next(iter(resumed))
                    turn_id = self.holders[thread_id].turn_id
                    self.hold(thread_id, turn_id, group.name, "running")
                    admitted.append(Resumed(turn_id, thread_id, group.name))
                    continue
                if self._held(group.name):
                    break
                req = self._ready_head(group.name)
                if req is None:
                    break
                heapq.heappop(self._ready[group.name])
                self._remove(req)
                req.move(RequestStatus.ADMITTED)
                self.hold(req.thread_id, req.id, req.group, "running")
                admitted.append(req)
        return admitted

    def why_waiting(self, req: Request) -> str | None:
        """Why a queued request is not running, or None if it may start now."""
        holder = self.holders.get(req.thread_id)
        if holder is not None:
            if holder.state == "waiting":
                return f"thread waiting on a decision (turn {holder.turn_id})"
            if holder.state == "resumed":
                return f"thread busy with turn {holder.turn_id} (resumed, waiting for a slot)"
            return f"thread busy with turn {holder.turn_id}"
        earlier = self._threads[req.thread_id][0]
        if earlier is not req:
            return f"behind request {earlier.id} on the same thread"
        if (held := self._held(req.group) or self.held_threads.get(req.thread_id)) is not None:
            return held
        return self._no_slot(self.group(req.group))

    def why_turn_resumed(self, turn_id: str) -> str | None:
        """Why a turn resumed here waits for a slot (None: it does not, or is not here)."""
        thread_id = self._turns.get(turn_id)
        return self.why_resumed(thread_id) if thread_id else None

    def why_resumed(self, thread_id: str) -> str | None:
        """Why the thread's resumed turn waits for a slot of its group, or None if it does
        not (it runs, waits for a decision, or may take a slot now)."""
        holder = self.holders.get(thread_id)
        if holder is None or holder.state != "resumed":
            return None
        group = self.group(holder.group)
        if (why := self._no_slot(group)) is None:
            return None
        if not group.paused and (n := self.running_in(group.name)) >= group.max_running_turns:
            limit = group.max_running_turns
            return f"resumed, waiting for a slot of group {group.name} ({n} of {limit} running)"
        return f"resumed, waiting: {why}"

    def _no_slot(self, group: GroupConfig) -> str | None:
        """Why the group cannot start a turn now (None: it can)."""
        if group.paused:
            return f"group {group.name} paused"
        if (running := self.running_in(group.name)) >= group.max_running_turns:
            return (
                f"group {group.name} budget full ({running} of {group.max_running_turns} running)"
            )
        if self.running >= self.max_running_turns:
            for g in self.groups.values():
                if g.priority > group.priority and (
                    self._resumed.get(g.name) or self._ready_head(g.name) is not None
                ):
                    return f"lower priority than group {g.name}"
            return f"runtime budget full ({self.running} of {self.max_running_turns} running)"
        return None

    # -- turns ----------------------------------------------------------------------------

    def hold(self, thread_id: str, turn_id: str, group: str, state: str) -> None:
        """A turn runs, waits for a decision, or (`resumed`) waits for a slot to run again,
        on its thread (also for turns restored after a restart)."""
        self._unhold(thread_id)
        since = self.clock()
        self.holders[thread_id] = _Holder(turn_id, group, state, since)  # type: ignore[arg-type]
        self._turns[turn_id] = thread_id
        if state == "running":
            self._running[group] = self._running.get(group, 0) + 1
        elif state == "resumed":
            self._resumed.setdefault(group, {})[thread_id] = None

    def resume(self, thread_id: str, turn_id: str, group: str) -> None:
        """A waiting or interrupted turn is to run again: it keeps its thread and waits for
        a slot of its group (`admissions`), behind the group's earlier resumed turns."""
        self.hold(thread_id, turn_id, self.group(group).name, "resumed")

    def _unhold(self, thread_id: str) -> None:
        holder = self.holders.pop(thread_id, None)
        if holder is None:
            return
        if self._turns.get(holder.turn_id) == thread_id:
            del self._turns[holder.turn_id]
        if holder.state == "running":
            self._running[holder.group] -= 1
        elif holder.state == "resumed":
            del self._resumed[holder.group][thread_id]

    def release(self, thread_id: str, turn_id: str) -> None:
        """A turn is done: its thread is free."""
        holder = self.holders.get(thread_id)
        if holder is not None and holder.turn_id == turn_id:
            self._unhold(thread_id)
            self._mark_ready(thread_id)

    def holder(self, thread_id: str) -> tuple[str, str] | None:
        h = self.holders.get(thread_id)
        return (h.turn_id, h.state) if h else None

    def thread_of(self, turn_id: str) -> str | None:
        """The thread a turn holds (None: it holds none here)."""
        return self._turns.get(turn_id)

    # -- looking --------------------------------------------------------------------------

    def statistics(self) -> Statistics:
        """An immutable snapshot (proportional to the queue: take it for a view, not per event)."""
        groups = tuple(
            GroupStats(
                name=g.name, priority=g.priority, running=self.running_in(g.name),
                max_running_turns=g.max_running_turns, queued=self.queued_in(g.name),
                max_queued_turns=g.max_queued_turns,
                waiting=sum(1 for h in self.holders.values()
                            if h.group == g.name and h.state != "running"),
                paused=g.paused, overflow_policy=g.overflow_policy, coalesce=g.coalesce,
                held=self._held(g.name),
            )
            for g in sorted(self.groups.values(), key=lambda g: (-g.priority, g.name))
        )  # fmt: skip
        threads = tuple(
            ThreadStats(thread_id=t, group=h.group, turn_id=h.turn_id,
                        state="running" if h.state == "running" else "waiting",
                        queued=len(self._threads.get(t, ())))
            for t, h in sorted(self.holders.items())
        ) + tuple(
            ThreadStats(thread_id=t, group=q[0].group, turn_id=None, state="idle", queued=len(q))
            for t, q in sorted(self._threads.items()) if t not in self.holders
        )  # fmt: skip
        lines = [  # each group's resumed turns ahead of its requests, as `admissions` goes
            ((-self.group(g).priority, 0, i),
             QueuedStats(h.turn_id, t, self.why_resumed(t) or "resuming", h.since, g))
            for g, ts in self._resumed.items()
            for i, (t, h) in enumerate((t, self.holders[t]) for t in ts)
        ] + [
            ((-self.group(r.group).priority, 1, self._seq[r.id]),
             QueuedStats(r.id, r.thread_id, self.why_waiting(r) or "starting", r.created_at,
                         r.group))
            for r in self.queue
        ]  # fmt: skip
        queued = tuple(q for _, q in sorted(lines, key=lambda line: line[0]))
        return Statistics(
            groups, threads, queued, self.max_running_turns, self.running, held=self.held_room
        )
