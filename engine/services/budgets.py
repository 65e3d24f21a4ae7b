"""Budgets: what turns may spend, enforced as stop policies.

A budget is a `Limit` with a scope: `turn` (each turn), `thread` (each thread per UTC day;
`thread:ID` for one thread), `group:NAME` (per day) and `room` (per day). agentdeck.toml
gives them (`[budget]`, `[groups.NAME] budget`); an operator sets or raises one from the
console, `agentdeck budget` or the API, which is stored and wins over the file (a stored
empty limit says "none", clearing the file's).

Two places enforce them:
- before each inference (`stop_before`): a turn whose scope has reached its limit, or
  would pass it with the next request (at least as large as its last: a conversation only
  grows), stops with reason `budget` and a detail naming the budget and how to raise it;
- at admission: the scheduler holds new turns of a thread, group or room that has reached
  its day's limit, and says why (engine/services/scheduler.py's `held`), until the limit
  is raised or the day ends.

What the day has spent is kept here as steps end (`spend`), loaded from the store at
start. On a cluster (`shared`), other workers spend too: the check before an inference
reads the store's totals, and `refresh` (every few seconds, `watch`) brings the day's per
group and the stored budgets, so that each worker's holds follow the cluster's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio

from engine.domain.usage import Limit, Scope, Usage, day_of, next_day_at, over, parse_scope
from engine.lifecycle.turn import BUDGET
from engine.store import usage as stored
from engine.turn.plugins import StopRequest

REFRESH = 2.0  # seconds between two loads of a cluster's spend and budgets

if TYPE_CHECKING:
    from engine.config import Config, LimitSettings
    from engine.domain.scheduler_stats import Statistics
    from engine.services.scheduler import Scheduler
    from engine.store import Store
    from engine.turn.state import TurnState


@dataclass(frozen=True)
class Budget:
    """A budget as it applies now: its scope, limit, where it comes from (`toml`, `set`
    by an operator), and what its scope spent today (the turn budget: nothing)."""

    scope: str
    limit: Limit
    source: str  # toml | set
    set_by: str | None = None
    set_at: float | None = None


def _limit(settings: LimitSettings | None) -> Limit | None:
    if settings is None:
        return None
    return Limit(settings.tokens, settings.cost)


class Budgets:
    """The room's budgets and what the day has spent against them."""

    def __init__(self, config: Config, store: Store, clock: Callable[[], float],
                 scheduler: Scheduler | None = None, *, shared: bool = False,
                 notice: Callable[[str, str], None] | None = None) -> None:  # fmt: skip
        b = config.budget
        self.toml: dict[str, Limit] = {
            str(scope): limit for scope, limit in (
                ("turn", _limit(b.turn)), ("thread", _limit(b.thread)), ("room", _limit(b.room)),
                *((f"group:{name}", _limit(g.budget)) for name, g in config.groups.items()),
            ) if limit is not None
        }  # fmt: skip
        self.store, self.clock, self.shared, self.notice = store, clock, shared, notice
        self.stored: dict[str, stored.StoredBudget] = {}
        self.day = ""
        self.room = Usage()
        self.groups: dict[str, Usage] = {}
        # today's spend of the threads a budget applies to (the others' is not kept: a
        # long-lived room sees more threads a day than it need hold; `set` reads it again)
        self.threads: dict[str, Usage] = {}
        self.scheduler = scheduler  # told what to hold

    # -- limits -----------------------------------------------------------------------------

    def limit(self, scope: str) -> Limit | None:
        """The limit of `scope` now: an operator's over agentdeck.toml's (None: none)."""
        if (mine := self.stored.get(scope)) is not None:
            return None if mine.limit.empty else mine.limit
        return self.toml.get(scope)

    def thread_limit(self, thread_id: str) -> tuple[str, Limit] | None:
        """A thread's own budget, else every thread's."""
        own = f"thread:{thread_id}"
        if own in self.stored or own in self.toml:
            limit = self.limit(own)
            return None if limit is None else (own, limit)
        limit = self.limit("thread")
        return None if limit is None else ("thread", limit)

    @property
    def any(self) -> bool:
        return any(self.limit(s) is not None for s in {*self.toml, *self.stored})

    def all(self) -> list[Budget]:
        """Every budget that applies, by scope."""
        out = []
        for scope in sorted({*self.toml, *self.stored}):
            limit = self.limit(scope)
            if limit is None:
                continue
            mine = self.stored.get(scope)
            out.append(Budget(scope, limit, "set" if mine else "toml",
                              mine.set_by if mine else None, mine.set_at if mine else None))  # fmt: skip
        return out

    def annotate(self, stats: Statistics) -> Statistics:
        """The scheduler's snapshot with what each group and the room spent today, and
        each group's daily budget."""
        groups = tuple(replace(g, today=self.spent_in(f"group:{g.name}"),
                               budget=self.limit(f"group:{g.name}")) for g in stats.groups)  # fmt: skip
        return replace(stats, groups=groups, today=self.spent_in("room"))

    def spent_in(self, scope: str) -> Usage:
        """What `scope` spent today (a turn budget: nothing to say, an empty Usage). The day
        moves on with the steps and at midnight (`watch`), not by reading the clock here."""
        s = parse_scope(scope)
        if s.kind == "room":
            return self.room
        if s.kind == "group":
            return self.groups.get(s.name, Usage())
        if s.kind == "thread" and s.name:
            return self.threads.get(s.name, Usage())
        return Usage()

    # -- loading and setting ----------------------------------------------------------------

    async def load(self, at: float | None = None) -> None:
        """The day's spend (the day of `at`, else now) and the stored budgets, as the store
        has them."""
        store = self.store
        self.stored = {b.scope: b for b in await stored.budgets(store)}
        at = self.clock() if at is None else at
        day = day_of(at)
        room, groups, threads = Usage(), dict[str, Usage](), dict[str, Usage]()
        for group, thread_id, used in await stored.of_day(store, day):
            room = room + used
            groups[group] = groups.get(group, Usage()) + used
            if self.thread_limit(thread_id) is not None:
                threads[thread_id] = threads.get(thread_id, Usage()) + used
        self.day, self.room, self.groups, self.threads = day, room, groups, threads
        self.hold(at=at)

    async def refresh(self) -> None:
        """What the cluster's workers spent today per group (and so the room), and the
        stored budgets: a few rows, whatever the number of threads. A thread runs on one
        worker at a time, so its own spend is this worker's and the check before each
        inference reads its total."""
        self.stored = {b.scope: b for b in await stored.budgets(self.store)}
        self._roll()  # a new day: the threads' spend starts again
        groups = dict(await stored.groups_of_day(self.store, self.day))
        room = Usage()
        for used in groups.values():
            room = room + used
        self.room, self.groups = room, groups
        self.hold()

    async def set(self, scope: Scope, limit: Limit | None, by: str) -> None:
        """Set `scope`'s budget (an empty Limit: none; None: back to agentdeck.toml's)."""
        key, at, store = str(scope), self.clock(), self.store
        if limit is None:
            await store.write([stored.budget_cleared(key)], urgent=True)
            self.stored.pop(key, None)
        else:
            await store.write([stored.budget_set(key, limit, by, at)], urgent=True)
            self.stored[key] = stored.StoredBudget(key, limit, by, at)
        if scope.kind == "thread":  # the threads a budget applies to now: their spend today
            self.threads = {t: u for t, u in self.threads.items() if self.thread_limit(t)}
            found = dict[str, Usage]()
            for _group, thread_id, used in await stored.of_day(store, self.day):
                if thread_id not in self.threads and self.thread_limit(thread_id) is not None:
                    found[thread_id] = found.get(thread_id, Usage()) + used
            self.threads.update(found)
        self.hold()

    # -- spending ---------------------------------------------------------------------------

    def _roll(self, at: float | None = None) -> bool:
        """A new day (at `at`, else now): nothing spent yet. True when the day changed."""
        day = day_of(self.clock() if at is None else at)
        if day == self.day:
            return False
        self.day, self.room, self.groups, self.threads = day, Usage(), {}, {}
        return True

    def spend(self, group: str, thread_id: str, used: Usage, at: float) -> None:
        """A step of `thread_id` (of `group`) that ended `at` spent `used` (written in its
        checkpoint)."""
        self._roll(at)
        self.room = self.room + used
        self.groups[group] = self.groups.get(group, Usage()) + used
        if self.thread_limit(thread_id) is not None:
            self.threads[thread_id] = self.threads.get(thread_id, Usage()) + used
        if self.scheduler is not None and self.any:
            self.hold(group, thread_id, at)

    def day_changed(self) -> bool:
        """Called at the start of a UTC day: holds of yesterday's spend are released."""
        if not self._roll():
            return False
        self.hold()
        return True

    async def watch(self, pump: Callable[[], object]) -> None:
        """Let held turns go when a UTC day begins (`pump` starts them); on a cluster, load
        the day's spend and the stored budgets every REFRESH seconds as well."""
        while True:  # midnight comes by the wall clock (the runtime's is read only then)
            now = time.time()
            wait = next_day_at(now) - now + 0.01
            await anyio.sleep(min(wait, REFRESH) if self.shared else wait)
            if self.shared:
                await self.refresh()
            else:
                self.day_changed()
            pump()

    # -- enforcing --------------------------------------------------------------------------

    async def stop_before(self, turn: TurnState, coming: Usage) -> StopRequest | None:
        """Whether `turn` must stop before its next inference, expected to spend `coming`."""
        if not self.any:
            return None
        self._roll()
        if (limit := self.limit("turn")) is not None and (
            why := over(turn.spent, limit, coming)
        ):  # fmt: skip
            return StopRequest(BUDGET, f"the turn's budget: {why} (raise: agentdeck budget turn)")
        room, group, thread = self.room, self.groups.get(turn.group, Usage()), self.threads.get(
            turn.thread_id, Usage())  # fmt: skip
        if self.shared:  # what every worker spent
            s = await stored.spent(self.store, self.day, turn.group, turn.thread_id)
            room, group, thread = s.room, s.group, s.thread
        if (why := self._over(turn.group, turn.thread_id, room, group, thread, coming)) is not None:
            return StopRequest(BUDGET, why)
        return None

    def _over(self, group_name: str, thread_id: str, room: Usage, group: Usage, thread: Usage,
              coming: Usage | None = None) -> str | None:  # fmt: skip
        """Which day budget the spend has reached (or would pass with `coming`), in words."""
        checks: list[tuple[str, str, Limit | None, Usage]] = [
            ("room", "the room's", self.limit("room"), room),
            (f"group:{group_name}", f"group {group_name}'s", self.limit(f"group:{group_name}"),
             group),
        ]  # fmt: skip
        if (own := self.thread_limit(thread_id)) is not None:
            checks.append((own[0], "the thread's", own[1], thread))
        for scope, whose, limit, spent in checks:
            if limit is not None and (why := over(spent, limit, coming)) is not None:
                this = f"thread:{thread_id}" if scope == "thread" else scope  # raise it here
                return f"{whose} daily budget: {why} today (raise: agentdeck budget {this})"
        return None

    def hold(self, group: str | None = None, thread_id: str | None = None,
             at: float | None = None) -> None:  # fmt: skip
        """Tell the scheduler which room, groups and threads have reached a day's limit
        (all of them, or only `group` and `thread_id` after one of its steps, at `at`)."""
        sched = self.scheduler
        if sched is None:
            return
        self._roll(at)
        before = (sched.held_room, dict(sched.held_groups))
        threads_before = set(sched.held_threads) if thread_id is None else (
            {thread_id} & set(sched.held_threads))  # fmt: skip
        room = self.limit("room")
        sched.held_room = (
            f"the room's daily budget reached: {why} today"
            if room is not None and (why := over(self.room, room)) else None
        )  # fmt: skip
        groups = [group] if group is not None else sorted(
            {*self.groups, *(s.split(":", 1)[1] for s in {*self.toml, *self.stored}
                             if s.startswith("group:")), *sched.held_groups})  # fmt: skip
        for name in groups:
            limit = self.limit(f"group:{name}")
            why = over(self.groups.get(name, Usage()), limit) if limit is not None else None
            sched.hold_group(name, f"group {name}'s daily budget reached: {why} today"
                             if why else None)  # fmt: skip
        threads = [thread_id] if thread_id is not None else sorted(
            {*self.threads, *sched.held_threads})  # fmt: skip
        for tid in threads:
            own = self.thread_limit(tid)
            why = over(self.threads.get(tid, Usage()), own[1]) if own is not None else None
            sched.hold_thread(tid, f"the thread's daily budget reached: {why} today"
                              if why else None)  # fmt: skip
        if self.notice is not None and (sched.held_room, sched.held_groups) != before:
            for name, why in sched.held_groups.items():
                if before[1].get(name) != why and name not in before[1]:
                    self.notice("warning", f"{why}: new turns of group {name} wait "
                                f"(raise: agentdeck budget group:{name})")  # fmt: skip
            if sched.held_room and not before[0]:
                self.notice("warning", f"{sched.held_room}: new turns wait "
                            "(raise: agentdeck budget room)")  # fmt: skip
        if self.notice is not None:
            for tid in sorted(set(sched.held_threads) - threads_before):
                if thread_id is None or tid == thread_id:
                    self.notice("warning", f"{sched.held_threads[tid]}: new turns of thread "
                                f"{tid} wait (raise: agentdeck budget thread:{tid})")  # fmt: skip
