"""Runtime: the one API over a room. It wires the store, the scheduler, the turn
supervisor and the event bus, and answers the operator.

    async with Runtime.open(room) as rt:
        handle = await rt.submit(Message(origin="invoke", sender="cli", thread_id="t", text="hi"))
        outcome = await rt.wait_turn(handle.turn_id)

Turns run in `engine.services.supervisor`; events and the commits that store them go through
`engine.services.event_bus`; SQL is in `engine.store`. Long-lived tasks (turns, resumptions, loops) live
in the one task group the runtime owns.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Literal

import anyio

from engine.channels.config import delivering, secret_names
from engine.config import Config, check_approvals, toml_rules
from engine.decisions.inbox import DecisionInbox
from engine.decisions.record import Recorded
from engine.domain.breakpoints import BreakBook
from engine.domain.decisions import Decision, PendingCall, storable_message
from engine.domain.events import Notice, one_line
from engine.domain.messages import ConvMessage, Message
from engine.domain.outcome import TurnOutcome
from engine.domain.rules import Rule, RuleBook
from engine.domain.usage import Limit, Scope
from engine.lifecycle import RequestStatus
from engine.providers.base import Provider
from engine.room import Room
from engine.runtime.lifetime import serving
from engine.runtime.recent import RecentRequests
from engine.runtime.summary import SummaryFile, summary_of
from engine.services.budgets import Budgets
from engine.services.coordinator import Coordinator
from engine.services.deadlines import pending_calls
from engine.services.event_bus import EventBus
from engine.services.handles import Carried, TurnHandle
from engine.services.instructions import InstructionsBook
from engine.services.restore import restore_schedule
from engine.services.scheduler import (
    GroupConfig,
    QueueFull,
    Rejected,
    Request,
    Scheduler,
    Statistics,
    group_for,
)
from engine.services.supervisor import TurnSupervisor
from engine.shell.sandbox import Sandbox
from engine.store import DiskFull, Store
from engine.store import breakpoints as pointed
from engine.store import rules as ruled
from engine.store import turns as rows
from engine.store.outcome import read_outcome
from engine.store.schedule import coalesced_into, group_row, key_row, request_row
from engine.strategies import strategy_for
from engine.tools import Tool, ToolRegistry
from engine.tools.mcp import McpServers
from engine.turn.call import CallState
from engine.turn.context import TurnContext
from engine.turn.conversation import Conversation
from engine.turn.loop import TurnLoop
from engine.turn.models import Models, model_for
from engine.turn.plugins import Plugin
from engine.turn.tool_runner import ToolRunner

__all__ = ["Runtime", "TurnHandle", "TurnOutcome"]

_RANDOM = random.Random()  # seeded from os.urandom


class Runtime:
    """One active run over a room: owns the store, the turns and their task group."""

    def __init__(
        self,
        room: Room,
        store: Store,
        config: Config,
        provider: Provider,
        tools: ToolRegistry,
        plugins: list[Plugin],
        kind: str,
        clock: Callable[[], float],
        ids: Callable[[str], str] | None,
        coordinator: Coordinator,
    ) -> None:
        self.room, self.store, self.config = room, store, config
        self.coordinator = coordinator  # one room alone, or one worker of a cluster
        self.provider, self.tools, self.plugins = provider, tools, plugins
        self.kind, self.clock = kind, clock
        self._ids = ids
        self.log = logging.getLogger("agentdeck")
        self.run_id = self.new_id("r")
        self.decisions = DecisionInbox(store)
        self.rules = RuleBook(workspace=room.workspace)  # agentdeck.toml's, execution.db's
        self.breakpoints = BreakBook(workspace=room.workspace)
        self.scheduler = Scheduler(max_running_turns=config.runtime.max_running_turns, clock=clock)
        self.bus = bus = EventBus(store, self.run_id, clock)
        self.subscribe, self.publish, self.commit = bus.subscribe, bus.publish, bus.commit
        self.ctx = TurnContext(  # what its turns get of this run: never the runtime itself
            run_id=self.run_id, clock=clock, new_id=self.new_id, coordinator=coordinator,
            publish=self.publish, commit=self.commit, provider=provider, tools=tools,
            plugins=plugins, decisions=self.decisions, rules=self.rules, config=config,
            breakpoints=self.breakpoints, workspace=room.workspace, log=self.log,
        )  # fmt: skip
        self.models = self.ctx.models = Models(config, provider, partial(model_for, config))
        self.summary_file = SummaryFile(room, partial(summary_of, self))
        self.instructions = InstructionsBook(room.path, config, store, notice=self.notice)
        self.budgets = self.ctx.budgets = Budgets(config, store, clock, self.scheduler,
                                                  shared=config.cluster.enabled, notice=self.notice)  # fmt: skip
        # [[mcp]] servers, their tools joining `tools` (the SDK is imported only then)
        self.mcp = McpServers.configured(config, room.path, room.workspace, tools, self.notice)
        self.sandbox = self.ctx.sandbox = Sandbox(config.sandbox.shell, config.sandbox.network,
                                                  room.workspace)  # fmt: skip
        self.supervisor = TurnSupervisor(
            self.ctx, coordinator, store, self.scheduler, config,
            changed=lambda: self.summary_file.changed(self.supervisor.tg), notice=self.notice,
            instructions=self.instructions,
        )  # fmt: skip
        self.live = self.supervisor.live  # turns whose loop runs (or is about to)
        self._requests = RecentRequests(self.live)  # this run's requests, by id
        self._keys = RecentRequests(self.live)  # this run's requests, by idempotency key
        self.output = self.ctx.output  # running calls' output, paced (its task: lifetime's)
        self.api: dict[str, str] = {}  # where the server loop serves (agent.run says so)
        self.channels: Any = None  # engine.loops.channels.ChannelSet, once its loops start
        self.serves_queue = True  # False: a one-off that starts only what it submits
        self._toml_rules: list[Rule] = []  # agentdeck.toml's, as read at start
        self.started_at = time.time()  # wall time, for uptime (not the clock tests fix)

    # -- opening and closing ----------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        room: Room | str | Path | None = None,
        *,
        kind: str = "console",
        provider: Provider | None = None,
        tools: list[Tool] | None = None,
        plugins: list[Plugin] | None = None,
        config: Config | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,  # for approval deadlines
        ids: Callable[[str], str] | None = None,
        resume: Literal["all", "none"] = "all",
    ) -> AsyncIterator[Runtime]:
        """Own the room, repair what a crash left, and serve until the block exits
        (engine/runtime/lifetime.py)."""
        async with serving(cls, room, kind=kind, provider=provider, tools=tools, plugins=plugins,
                           config=config, clock=clock, sleep=sleep, ids=ids,
                           resume=resume) as rt:  # fmt: skip
            yield rt

    async def _start(self) -> None:
        toml = toml_rules(self.config, self.room.config, self.tools.names())  # before a write
        # channels.toml, hooks.toml (a malformed one stops the start, before a write): every
        # process records what a channel's turn owes, whoever delivers it
        self.ctx.delivering = delivering(self.room.path)
        mcp = [v for m in self.config.mcp for v in (*m.env, *m.headers.values())]
        self.ctx.secret_env = (*self.config.runtime.secret_env, *secret_names(self.room.path),
                               *mcp)  # what [[mcp]] servers are given is masked too  # fmt: skip
        groups = {*self.scheduler.groups, *self.config.groups}
        check_approvals(self.config, self.room.config, self.tools.names(), groups)
        now, coordinator = self.clock(), self.coordinator
        await self.store.write(coordinator.run_started(self.run_id, self.kind, os.getpid(), now))
        await coordinator.restore(self.decisions)
        self._toml_rules = toml
        await self.reload_rules()
        await self.budgets.load(now)  # (the start's clock read: tests count them)
        self.sandbox.start()  # the kernel asked once: a missing sandbox makes shell calls ask
        if self.sandbox.missing:
            self.notice("warning", f"no shell sandbox: {self.sandbox.state}; every shell call "
                        "asks ([sandbox] shell = \"off\" in agentdeck.toml says this is meant)")  # fmt: skip
        read = await restore_schedule(self.store, self.scheduler, self.config)
        interrupted, queued = coordinator.take_up(self.scheduler, *read)
        self.supervisor.interrupted = interrupted
        if not self.serves_queue:  # a one-off leaves what others queued to the next runtime
            for req in queued:
                self.scheduler.withdraw(req)
            queued = []
        for req in queued:
            self._requests[req.id] = req
            self.live[req.id] = TurnHandle(req.id, req.thread_id)
        self.summary_file.write()

    async def _stop(self) -> None:
        await self.store.write([rows.run_ended(self.run_id, self.clock())])
        self.summary_file.write(stopped=True)
        self.sandbox.stop()

    # -- ids --------------------------------------------------------------------------------

    def new_id(self, prefix: str) -> str:
        # 64 random bits (40 collided within a room's first million calls with odds near
        # one half); a seeded PRNG, since the OS's random source costs a syscall per id.
        return self._ids(prefix) if self._ids else f"{prefix}_{_RANDOM.getrandbits(64):016x}"

    async def conversation(self, thread_id: str) -> Conversation:
        """A thread's conversation as it is now (kept current while a turn holds the thread;
        an idle one may leave memory: ask again rather than keep it)."""
        return await self.supervisor.conversation(thread_id)

    # -- turns ------------------------------------------------------------------------------

    async def submit(
        self,
        message: Message,
        *,
        strategy: str | None = None,
        key: str | None = None,
        overflow: bool = True,
    ) -> TurnHandle:
        """Offer a turn request to the scheduler; return once its admission is durable.

        The request starts now, queues, or is coalesced into another (the handle then
        names that one); a refused request raises `Rejected` with the recorded reason.
        `key` and `overflow` are described at `offer`.
        """
        return (await self.offer(message, strategy=strategy, key=key, overflow=overflow))[1]

    async def offer(
        self,
        message: Message,
        *,
        strategy: str | None = None,
        key: str | None = None,
        overflow: bool = True,
    ) -> tuple[Request, TurnHandle]:
        """`submit`, also returning the request as the scheduler left it.

        `key` (an idempotency key) names what the request stands for, such as one revision
        of a task: it commits in the request's own transaction, and an offer whose key was
        used before, in this run or an earlier one, gets that first request back (or its
        `Rejected`) and makes none. With `overflow=False` a full group queue raises
        `QueueFull` and changes nothing, where the group's overflow policy would refuse
        the request or drop one already queued.
        """
        storable_message(message)  # before the scheduler sees it: one SQLite takes
        strategy = strategy or message.meta.get("strategy")
        if strategy is not None:
            strategy_for(strategy)  # an unknown name is refused now, not when the turn runs
        if key is not None and (first := await self._keys.offered(key, self.store,
                                                                  self._requests)):  # fmt: skip
            return first
        group = group_for(message)
        if not overflow:
            queued = self.scheduler.queued_in(group)
            if queued >= (limit := self.scheduler.group(group).max_queued_turns):
                raise QueueFull(f"group {group} queue is full ({queued} of {limit} queued)")
        req = Request(self.new_id("t"), message, group, self.clock(), strategy)
        held = self.coordinator.holds(req.thread_id)
        changed = self.scheduler.offer(req) if held else [req]  # else its holder's to order
        announce = self.coordinator.announce(req.thread_id)  # (then its own transaction)
        ops = [request_row(r, self.clock()) for r in changed] + announce
        if key is not None:
            self._keys[key] = req
            ops.append(key_row(key, req.id, self.clock()))
        try:  # admission never waits behind steps; one admitted now rides its turn's first
            alone = not announce and changed == [req]  # commit (one trip)
            carried = Carried(req.id, ops) if alone else None
            if carried is None or not self.supervisor.pump(carried):
                await self.store.write(ops, urgent=True)
            else:
                await carried.durable()
        except BaseException as exc:
            if key is not None:
                self._keys.pop(key, None)  # whether it committed, execution.db now says
            if isinstance(exc, DiskFull):  # not in the store: not in line either
                if carried is None and req.status is RequestStatus.QUEUED:
                    self.scheduler.withdraw(req)
                self.notice("error", "The disk holding the room is full: a new request was "
                                     "refused. Free space; reads and decisions go on.")  # fmt: skip
            raise
        for r in changed:
            if held or r.id not in self._requests:  # else a claim may have adopted it since
                self._requests[r.id] = r
            gone = r.status in (RequestStatus.COALESCED, RequestStatus.REJECTED)
            if gone and (old := self.live.pop(r.id, None)):
                old.done.set()  # its waiters follow the request to where it went
            if r is not req and r.status is RequestStatus.REJECTED:  # overflow dropped it
                self.notice("warning", f"{r.thread_id}: queued request {r.id} {r.reason}")
        if req.status is RequestStatus.REJECTED:
            raise Rejected(req.reason or "rejected")
        target = req.turn_id
        if not held:  # another runtime's thread: whoever holds it runs it (this one, if free)
            await self.coordinator.claim([req.thread_id], req.group)
            return req, self.live.get(target) or TurnHandle(target, message.thread_id)
        handle = self.live.setdefault(target, TurnHandle(target, message.thread_id))
        holder = self.scheduler.holder(message.thread_id)
        sv = self.supervisor
        if holder is not None and holder[0] in sv.interrupted and holder[0] not in self.live:
            sv.spawn_resume(holder[0])  # finish what a stopped run left, then ours
        sv.pump()
        return req, handle

    def adopt(self, req: Request) -> None:
        """A queued request read from the store (a cluster's worker leased its thread)."""
        self._requests[req.id] = req
        self.live.setdefault(req.id, TurnHandle(req.id, req.thread_id))

    def drop_request(self, request_id: str) -> None:
        """Forget this run's copy of a request (a cluster's: its start failed here)."""
        self._requests.pop(request_id, None)

    def request(self, request_id: str) -> Request | None:
        """A turn request of this run (or restored by it), as the scheduler left it."""
        return self._requests.get(request_id)

    def why_queued(self, request_id: str) -> str | None:
        """Why a request of this run still waits in the queue (None once it has left it)."""
        req = self._requests.get(request_id)
        if req is None or req.status is not RequestStatus.QUEUED:
            return None
        if not self.scheduler.knows(req.id):  # a cluster's, for another worker: the store says
            return None
        return self.scheduler.why_waiting(req)

    def statistics(self) -> Statistics:
        """Groups, threads and queued requests, with why each request waits, and what
        each group and the room spent today against their budgets."""
        return self.budgets.annotate(self.scheduler.statistics())

    async def configure_group(self, name: str, **changes: Any) -> GroupConfig:
        """Change a thread group while running (pause, budget, priority...); it persists."""
        group = self.scheduler.configure(name, **changes)
        await self.store.write([group_row(group)], urgent=True)
        self.supervisor.pump()
        return group

    async def set_budget(self, scope: Scope, limit: Limit | None, by: str) -> None:
        """Set, raise or clear a budget; turns it held start if it lets them."""
        await self.budgets.set(scope, limit, by)
        self.supervisor.pump()

    async def reload_rules(self) -> None:
        """Read the rules again (agentdeck.toml's as read at start, the store's), and the
        breakpoints (whose changes are announced as the rules' are)."""
        self.rules.load(await ruled.load(self.store, self._toml_rules),
                        await ruled.last_id(self.store))  # fmt: skip
        self.breakpoints.load(await pointed.load(self.store))

    def notice(self, level: str, text: str) -> None:
        """Tell the operator something that is not a state change (a bad file, a retry)."""
        text = one_line(text)
        log = {"error": self.log.error, "warning": self.log.warning}.get(level, self.log.info)
        log("%s", text)
        self.publish(Notice(at=self.clock(), level=level, text=text))  # type: ignore[arg-type]

    def listen(self, loop: TurnLoop) -> None:
        """Route decisions for `loop`'s calls to it (a loop driven outside the scheduler)."""
        self.supervisor.loops[loop.turn.id] = loop

    def unlisten(self, loop: TurnLoop) -> None:
        self.supervisor.loops.pop(loop.turn.id, None)

    def tool_runner(self, messages: list[ConvMessage], **kw: Any) -> ToolRunner:
        """An iterator over assistant messages for programs that embed agentdeck."""
        return ToolRunner(self, messages, **kw)

    async def open_turn(
        self, req: Request, strategy: str, *, user_message: bool = True
    ) -> TurnLoop:
        """Record a new turn (checkpoint user_message) and return its loop, not yet run."""
        return await self.supervisor.open_turn(req, strategy, user_message=user_message)

    async def settle_thread(self, thread_id: str) -> None:
        """Finish first what a stopped run left on `thread_id`: its interrupted turn runs
        until it is done or waits (a call it left running goes up for review). Then the
        thread is free, or held by a turn that waits for a decision."""
        holder = self.scheduler.holder(thread_id)
        sv = self.supervisor
        if holder is not None and holder[0] in sv.interrupted and holder[0] not in self.live:
            sv.spawn_resume(holder[0], thread_id)
            await self.wait_turn(holder[0])

    def waiting_turn(self, thread_id: str) -> str | None:
        """The turn that holds `thread_id` while it waits for a decision, if any."""
        holder = self.scheduler.holder(thread_id)
        return holder[0] if holder is not None and holder[1] == "waiting" else None

    async def run_turn(self, message: Message) -> TurnOutcome:
        """Submit a message and wait until its turn is done or waiting."""
        handle = await self.submit(message)
        return await self.wait_turn(handle.turn_id)

    async def wait_turn(self, turn_id: str) -> TurnOutcome:
        """Wait until the turn's loop stops (done or waiting); return where it stands.
        A request that was coalesced is followed to the request it went into."""
        return await self.coordinator.wait_turn(turn_id, self._wait_here)

    async def _wait_here(self, turn_id: str) -> TurnOutcome:
        while True:
            handle = self.live.get(turn_id)
            if handle is not None:
                await handle.done.wait()
                if self.live.get(turn_id) not in (None, handle):
                    continue  # it went on at once (a decision was already queued)
            req = self._requests.get(turn_id)  # (not kept: an old one, or another run's)
            into = req.turn_id if req is not None else await coalesced_into(self.store, turn_id)
            if into is None or into == turn_id:  # not coalesced into another
                if handle is not None and handle.outcome is not None:
                    return handle.outcome  # done here: as its last commit wrote it
                return await self.outcome(turn_id)
            turn_id = into

    async def cancel_turn(self, turn_id: str, reason: str = "cancelled by operator") -> bool:
        """Cancel a running or waiting turn: it ends `done/cancelled`. False if already done."""
        return await self.coordinator.cancel_turn(turn_id, reason, self.supervisor.cancel_turn)

    # -- decisions --------------------------------------------------------------------------

    async def decide(self, decision: Decision, *, need_hash: bool = False) -> str:
        """Record a decision; it is applied now if its call waits, else when it can be.

        Returns `queued` (accepted; applied as soon as the call is suspended),
        `duplicate` (this decision, or another for the same call, was already applied) or
        `refused` (its `args_hash` is not that of the arguments it would run; with
        `need_hash`, as the room's client asks, an approval without one too).
        """
        return (await self.record(decision, need_hash=need_hash)).status

    async def record(self, decision: Decision, *, need_hash: bool = False) -> Recorded:
        """`decide`, answering with why a decision was not queued (`Recorded.note`)."""
        return await self.supervisor.decide(decision, need_hash=need_hash)

    async def call_state(self, call_id: str) -> CallState | None:
        """A tool call as it stands now (in a running turn, else as committed)."""
        return await self.supervisor.call_state(call_id)

    async def pending(self) -> list[PendingCall]:
        """Every suspended call in the room, oldest first, with its deadline."""
        return await pending_calls(self.store, self.config.approvals)

    async def outcome(self, turn_id: str) -> TurnOutcome:
        """Where a turn stands, from execution.db."""
        return await read_outcome(self.store, turn_id)
