"""The scheduler view: thread groups, busy threads, and why each queued request waits.

It draws the scheduler's snapshot (`rt.statistics()`, through the bridge) on an interval
timer, `REFRESH` times a second, only while it is shown: the snapshot costs time in
proportion to the queue, so it is taken for the view and never per runtime event. Keys
on the groups table pause or resume a group and raise or lower its running budget; the
screen applies them through the bridge and a notification confirms each one. `b` asks
for the group's daily spending budget (console/screens/daily_budget.py) and sets it: the
turns it held start.

The summary line says what the room spent today and, when the room's own daily budget
holds every new turn, why; each group's row says what it spent and against which budget.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen

from console.bridge import Bridge
from console.format import age, set_title, short_id
from console.glyphs import look
from console.groups import group_of
from console.screens.daily_budget import DailyBudgetScreen, NewBudget
from console.widgets.groups_table import GroupsTable
from console.widgets.key_bar import KeyBar
from console.widgets.keyed_table import KeyedTable
from console.widgets.text import Static
from engine.domain.usage import cost_text, spent_text
from engine.lifecycle import TurnStatus
from engine.services.scheduler import GroupConfig, Statistics

REFRESH = 4  # snapshots a second while the view is shown
THREAD_COLUMNS = ("thread", "group", "turn", "state", "queued")
CLUSTER_COLUMNS = (*THREAD_COLUMNS, "worker")  # a cluster's: which worker leases the thread
QUEUED_COLUMNS = ("request", "thread", "group", "waits because", "age")


class SchedulerScreen(Screen[None]):
    """Opened by `s` (or the palette's "Scheduler"); Esc or q closes it."""

    BINDINGS = [Binding("escape,q", "close", "Close")]

    class Configured(Message):
        """A group change reached the runtime; `group` is its new configuration."""

        def __init__(self, group: GroupConfig) -> None:
            super().__init__()
            self.group = group

    def __init__(self, bridge: Bridge, clock: Callable[[], float]) -> None:
        super().__init__()
        self.bridge, self.clock = bridge, clock
        self.snapshots = 0  # how many times the view read the scheduler (tests look)
        self.stats: Statistics | None = None  # the last snapshot drawn
        self._configuring = asyncio.Lock()

    def compose(self) -> ComposeResult:
        yield Static(id="sched-summary")
        with Vertical(id="sched-groups-pane", classes="pane"):
            yield GroupsTable(id="sched-groups")
        with Vertical(id="sched-threads-pane", classes="pane"):
            yield KeyedTable(THREAD_COLUMNS, state_columns=("state",), id="sched-threads")
        with Vertical(id="sched-queued-pane", classes="pane"):
            yield KeyedTable(QUEUED_COLUMNS, id="sched-queued")
        yield KeyBar()

    def on_mount(self) -> None:
        self.refresh_stats()
        self.set_interval(1 / REFRESH, self.refresh_stats, name="scheduler")
        self.query_one(GroupsTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    # -- drawing ----------------------------------------------------------------------------

    def refresh_stats(self) -> None:
        """Take one snapshot (in a worker: an attached console asks the owner) and redraw
        what changed in it."""
        # the coroutine is made when the worker runs (Textual types it as returning Never)
        self.run_worker(self._refresh, group="stats", exclusive=True)  # type: ignore[arg-type]

    async def _refresh(self) -> None:
        try:
            stats = await self.bridge.statistics()
        except Exception as exc:  # an owner that went away: said on the screen, not raised
            self.query_one("#sched-summary", Static).update(f" scheduler: {exc}")
            return
        if stats is None:
            self.query_one("#sched-summary", Static).update(" scheduler: the runtime is not open")
            return
        self.snapshots += 1
        self.stats = stats
        self.query_one("#sched-summary", Static).update(_summary(stats))
        self.query_one(GroupsTable).show_groups(stats.groups)
        threads = self.query_one("#sched-threads", KeyedTable)
        cluster = stats.worker is not None
        threads.use_columns(CLUSTER_COLUMNS if cluster else THREAD_COLUMNS)
        threads.show({
            t.thread_id: (t.thread_id, t.group, short_id(t.turn_id) if t.turn_id else "—", t.state,
                          str(t.queued), *((t.worker or "—",) if cluster else ()))
            for t in stats.threads
        })  # fmt: skip
        of = " of the cluster" if cluster else ""
        now = self.clock()
        self.query_one("#sched-queued", KeyedTable).show({
            q.request_id: (short_id(q.request_id), q.thread_id, group_of(q.thread_id, q.group),
                           q.waits_because, age(now - q.since))
            for q in stats.queued
        })  # fmt: skip
        for pane, title in (
            ("#sched-groups-pane", f"Groups ({len(stats.groups)})"),
            ("#sched-threads-pane", f"Threads{of} ({len(stats.threads)})"),
            ("#sched-queued-pane", f"Queued requests ({len(stats.queued)})"),
        ):
            widget = self.query_one(pane)
            set_title(widget, title)

    # -- actions ----------------------------------------------------------------------------

    @on(GroupsTable.Configure)
    def configure(self, event: GroupsTable.Configure) -> None:
        event.stop()
        self.run_worker(self._configure(event.group, event.toggle_pause, event.delta),
                        group="configure")  # fmt: skip

    async def _configure(self, name: str, toggle_pause: bool, delta: int) -> None:
        # Presses are handled one at a time, each reading the group as the last one left
        # it: quick repeated presses each count.
        async with self._configuring:
            await self._configure_now(name, toggle_pause, delta)

    async def _configure_now(self, name: str, toggle_pause: bool, delta: int) -> None:
        stats = await self.bridge.statistics()
        group = next((g for g in stats.groups if g.name == name), None) if stats else None
        if group is None:
            self.notify(f"Group {name} is not in the scheduler.", severity="warning")
            return
        if toggle_pause:
            changes: dict[str, object] = {"paused": not group.paused}
            done = (f"Group {name} paused: it starts no turns until resumed (p)."
                    if not group.paused else f"Group {name} resumed.")  # fmt: skip
        else:
            budget = max(0, group.max_running_turns + delta)
            if budget == group.max_running_turns:
                self.notify(f"Group {name} budget is already 0.", severity="warning")
                return
            changes = {"max_running_turns": budget}
            done = f"Group {name} budget {group.max_running_turns} → {budget} running turns."
        try:
            config = await self.bridge.configure_group(name, **changes)
        except Exception as exc:  # shown to the operator, never a crash
            self.notify(f"Changing group {name} failed: {exc}", severity="error")
            return
        self.notify(done, title="Scheduler")
        self.refresh_stats()
        self.post_message(self.Configured(config))

    @on(GroupsTable.SetBudget)
    def set_budget(self, event: GroupsTable.SetBudget) -> None:
        event.stop()
        self._set_budget(event.group)

    @work(group="budget", exclusive=True)
    async def _set_budget(self, name: str) -> None:
        """Ask for `name`'s daily budget and set it; say what it is now, or why not."""
        scope = f"group:{name}"
        group = next((g for g in self.stats.groups if g.name == name), None) if self.stats else None
        today, limit = (group.today, group.budget) if group is not None else (None, None)
        try:  # where the budget comes from, for the dialog to say
            row = next((b for b in (await self.bridge.api.budgets()).budgets
                        if b.scope == scope), None)  # fmt: skip
        except Exception:  # (the runtime went away: the set below says so)
            row = None
        whose = None if row is None else (
            "agentdeck.toml's" if row.source == "toml" else f"set by {row.set_by or 'operator'}")  # fmt: skip
        answer = await self.app.push_screen_wait(DailyBudgetScreen(name, today, limit, whose))
        if answer is None:
            return
        try:
            view = await self.bridge.set_budget(scope, tokens=answer.tokens, cost=answer.cost,
                                                clear=answer.clear)  # fmt: skip
        except Exception as exc:  # shown to the operator, never a crash
            self.notify(f"Setting the daily budget of group {name} failed: {exc}",
                        severity="error")  # fmt: skip
            return
        row = next((b for b in view.budgets if b.scope == scope), None)
        self.notify(_budget_said(name, answer, row is not None and row.source == "toml"),
                    title="Scheduler")  # fmt: skip
        self.refresh_stats()


def _budget_said(name: str, answer: NewBudget, toml: bool) -> str:
    """What the notification says a budget became."""
    if answer.clear:
        return (f"Group {name}'s daily budget is agentdeck.toml's again." if toml
                else f"Group {name} has no daily budget now (agentdeck.toml gives none).")  # fmt: skip
    caps = [cost_text(answer.cost)] if answer.cost is not None else []
    caps += [f"{answer.tokens:,} tokens"] if answer.tokens is not None else []
    if not caps:
        return f"Group {name} has no daily budget now."
    return f"Group {name}'s daily budget: at most {' and '.join(caps)} a day."


def _summary(stats: Statistics) -> Text:
    run, wait = look(TurnStatus.RUNNING), look(TurnStatus.WAITING)
    waiting = sum(g.waiting for g in stats.groups)
    paused = [g.name for g in stats.groups if g.paused]
    text = Text(no_wrap=True, overflow="ellipsis")
    # a cluster's worker: the threads are the cluster's, the running budget this worker's
    text.append(f" worker {stats.worker}  " if stats.worker is not None else " runtime  ")
    text.append(f"{run.glyph} {stats.running}/{stats.max_running_turns} running  ")
    text.append(f"{wait.glyph} {waiting} waiting  ")
    text.append(f"{len(stats.queued)} queued  ")
    pause = look("paused")
    text.append(f"{pause.glyph} paused: {', '.join(paused)}" if paused else "no group paused")
    if stats.today is not None:
        text.append(f"  today {spent_text(stats.today)}")
    if stats.held:  # the room's own daily budget: no new turn starts
        text.append(f"  ⚠ {stats.held}")
    return text
