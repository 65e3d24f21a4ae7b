"""Runtime: the one API over a room. It wires the store, the loop, decisions and events.

    async with Runtime.open(room) as rt:
        handle = await rt.submit(Message(origin="invoke", sender="cli", thread_id="t", text="hi"))
        outcome = await rt.wait_turn(handle.turn_id)

Long-lived tasks (turns, resumptions) live in the one task group the runtime owns.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.abc import TaskGroup

from engine.config import Config, load_config
from engine.conversation import Conversation
from engine.decisions import Decision, PendingCall, Rule, storable
from engine.events import (
    DecisionRecorded,
    Event,
    MessageAppended,
    Notice,
    StepStarted,
    TextDelta,
    TurnStarted,
)
from engine.inbox import INSERT as INSERT_DECISION
from engine.inbox import DecisionInbox, already, to_row
from engine.lifecycle import CallStatus, TurnStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.messages import ConvMessage, InvalidMessage, Message
from engine.outcome import TurnOutcome, read_outcome, read_pending
from engine.plugins import ConsecutiveErrors, MaxRounds, Plugin, Timeout
from engine.providers.base import Provider
from engine.room import Ownership, Room
from engine.runner import ToolRunner
from engine.scheduler import (
    GroupConfig,
    QueueFull,
    Rejected,
    Request,
    Scheduler,
    Statistics,
    group_for,
)
from engine.store import Op, Store
from engine.store.schedule import group_row, key_row, keyed_request, request_row, restore_schedule
from engine.strategies import strategy_for, strategy_of_turn
from engine.summary import SummaryFile
from engine.tools import Tool, ToolRegistry
from engine.turn.call import CallState
from engine.turn.context import TurnContext
from engine.turn.loop import TurnLoop
from engine.turn.state import TurnState

Subscriber = Callable[[Event], None]


@dataclass
class TurnHandle:
    """A turn the runtime is driving (or about to): wait on `done`, cancel via the runtime."""

    turn_id: str
    thread_id: str
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope | None = None
    cancel_reason: str | None = None


_RANDOM = random.Random()  # seeded from os.urandom
# A notice is one line whatever a file's name holds: line breaks and other control
# characters are shown escaped, so a name cannot forge a line of the log.
_ONE_LINE = {c: f"\\x{c:02x}" for c in [*range(32), 127, 0x85]} | {
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
INDEX_EVERY = 1.0  # seconds between two full-text batches (History.search lags this much)


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
    ) -> None:
        self.room, self.store, self.config = room, store, config
        self.provider, self.tools, self.plugins = provider, tools, plugins
        self.kind, self.clock = kind, clock
        self._ids = ids
        self.log = logging.getLogger("agentdeck")
        self.run_id = self.new_id("r")
        self.decisions = DecisionInbox(store)
        self.rules: list[Rule] = []
        self.live: dict[str, TurnHandle] = {}  # turns whose loop runs (or is about to)
        self._loops: dict[str, TurnLoop] = {}
        self.scheduler = Scheduler(max_running_turns=config.runtime.max_running_turns, clock=clock)
        self._requests: dict[str, Request] = {}  # this run's requests, by id
        self._keys: dict[str, Request] = {}  # this run's requests, by idempotency key
        self._interrupted: set[str] = set()  # left `running` by a run that stopped
        self._conversations: dict[str, Conversation] = {}
        self._subscribers: list[Subscriber] = []
        self._unstored: list[Event] = []
        self._step_id = 0
        self._tg: TaskGroup | None = None
        self.ctx = TurnContext(  # what its turns get of this run: never the runtime itself
            run_id=self.run_id, clock=clock, new_id=self.new_id, next_step_id=self.next_step_id,
            publish=self.publish, commit=self.commit, provider=provider, tools=tools,
            plugins=plugins, decisions=self.decisions, rules=self.rules, config=config,
            workspace=room.workspace, log=self.log,
        )  # fmt: skip
        self.summary_file = SummaryFile(room, self._summary)
        self.api: dict[str, str] = {}  # where the server loop serves (agent.run says so)
        self.serves_queue = True  # False: a one-off that starts only what it submits
        self.started_at = time.time()  # wall time, for uptime (not the clock tests fix)

    # -- opening and closing ----------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        room: Room | str | os.PathLike[str] | None = None,
        *,
        kind: str = "console",
        provider: Provider | None = None,
        tools: list[Tool] | None = None,
        plugins: list[Plugin] | None = None,
        config: Config | None = None,
        clock: Callable[[], float] = time.time,
        ids: Callable[[str], str] | None = None,
        resume: Literal["all", "none"] = "all",
    ) -> AsyncIterator[Runtime]:
        """Own the room, repair what a crash left, and serve until the block exits."""
        room = room if isinstance(room, Room) else Room.at(room)
        room.create()
        config = config or load_config(room.config)
        ownership = Ownership(room, kind)
        ownership.acquire()
        try:
            room.ensure()
            store = await Store.open(room.db, config.store.synchronous)
            try:
                if provider is None:
                    from engine.providers.select import make_provider

                    provider = make_provider(config).provider
                if tools is None:
                    from engine.builtin_tools import builtin_tools

                    tools = builtin_tools()
                if plugins is None:
                    rc = config.runtime
                    plugins = [
                        MaxRounds(rc.max_rounds),
                        Timeout(rc.turn_timeout),
                        ConsecutiveErrors(rc.max_consecutive_errors),
                    ]
                rt = cls(room, store, config, provider, ToolRegistry(tools), plugins, kind,
                         clock, ids)  # fmt: skip
                rt.serves_queue = resume == "all"
                await rt._start()
                try:
                    async with anyio.create_task_group() as tg:
                        rt._tg = tg
                        tg.start_soon(store.index_forever, INDEX_EVERY)
                        if resume == "all":
                            for turn_id in sorted(rt._interrupted):
                                rt._spawn_resume(turn_id)
                            for turn_id in await rt.decisions.stale_turns():  # decided, not
                                if turn_id not in rt.live:  # applied: a run died between
                                    rt._spawn_resume(turn_id)
                        rt._pump()  # requests a previous run accepted and did not start
                        yield rt
                        tg.cancel_scope.cancel()
                except BaseExceptionGroup as group:
                    # The caller's own error comes out as itself, not wrapped in a group.
                    if len(group.exceptions) == 1:
                        raise group.exceptions[0] from group
                    raise
                finally:
                    with anyio.CancelScope(shield=True):
                        await rt._stop()
                        if (aclose := getattr(rt.provider, "aclose", None)) is not None:
                            await aclose()
            finally:
                with anyio.CancelScope(shield=True):
                    await store.close()
        finally:
            ownership.release()

    async def _start(self) -> None:
        now = self.clock()
        self._step_id = int(await self.store.scalar("SELECT coalesce(max(id), 0) FROM steps"))
        await self.store.write(
            [
                ("UPDATE runs SET status='crashed', ended_at=? WHERE status='active'", (now,)),
                ("INSERT INTO runs(id, kind, pid, started_at, status) VALUES (?,?,?,?,'active')",
                 (self.run_id, self.kind, os.getpid(), now)),
            ]
        )  # fmt: skip
        await self.decisions.restore()
        for row in await self.store.fetchall("SELECT * FROM rules ORDER BY id"):
            self.rules.append(
                Rule(tool=row["tool"], effect=row["effect"], scope=row["scope"],
                     thread_id=row["thread_id"])
            )  # fmt: skip
        self._interrupted, queued = await restore_schedule(self.store, self.scheduler, self.config)
        if not self.serves_queue:  # a one-off leaves what others queued to the next runtime
            for req in queued:
                self.scheduler.withdraw(req)
            queued = []
        for req in queued:
            self._requests[req.id] = req
            self.live[req.id] = TurnHandle(req.id, req.thread_id)
        self.summary_file.write()

    async def _stop(self) -> None:
        await self.store.write(
            [("UPDATE runs SET status='ended', ended_at=? WHERE id=?", (self.clock(), self.run_id))]
        )
        self.summary_file.write(stopped=True)

    # -- plumbing for the loop --------------------------------------------------------------

    def new_id(self, prefix: str) -> str:
        # 64 random bits (40 collided within a room's first million calls with odds near
        # one half); a seeded PRNG, since the OS's random source costs a syscall per id.
        return self._ids(prefix) if self._ids else f"{prefix}_{_RANDOM.getrandbits(64):016x}"

    def next_step_id(self) -> int:
        self._step_id += 1
        return self._step_id

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback` (sync, quick) with every event; returns the unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def publish(self, event: Event) -> None:
        """Hand an event to subscribers now; it is stored with the next commit unless a
        table already holds it (text deltas, step starts)."""
        if not isinstance(event, TextDelta | StepStarted):
            self._unstored.append(event)
        for callback in list(self._subscribers):
            callback(event)

    async def commit(
        self, ops: list[Op], events: list[Event], *, checkpoint: str | None, turn_id: str
    ) -> None:
        """One transaction: the ops, the checkpoint row, the events; then publish them."""
        now = self.clock()
        if checkpoint:
            ops.append(
                ("INSERT INTO checkpoints(turn_id, run_id, kind, created_at) VALUES (?,?,?,?)",
                 (turn_id, self.run_id, checkpoint, now))
            )  # fmt: skip
        stored, self._unstored = [*self._unstored, *events], []
        for e in stored:
            if isinstance(e, MessageAppended):
                continue  # the messages table is the record
            ops.append(
                ("INSERT INTO events(at, run_id, thread_id, turn_id, kind, body) VALUES (?,?,?,?,?,?)",
                 (e.at, self.run_id, e.thread_id, e.turn_id, e.kind, e.model_dump_json()))
            )  # fmt: skip
        await self.store.write(ops)
        for event in events:
            for callback in list(self._subscribers):
                callback(event)

    async def conversation(self, thread_id: str) -> Conversation:
        """A thread's conversation, loaded once per run and kept current in memory."""
        conv = self._conversations.get(thread_id)
        if conv is None:
            rows = await self.store.fetchall(
                "SELECT body FROM messages WHERE thread_id=? ORDER BY seq", (thread_id,)
            )
            conv = Conversation(thread_id, [ConvMessage.model_validate_json(r[0]) for r in rows])
            self._conversations[thread_id] = conv
        return conv

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
        for name in ("thread_id", "text", "sender", "channel", "meta"):
            try:  # before the scheduler sees it: a request it holds must be one SQLite takes
                storable(getattr(message, name), name)
            except ValueError as exc:  # a lone surrogate (a task file named with a byte
                raise InvalidMessage(f"invalid message: {exc}") from None  # not UTF-8)
        strategy = strategy or message.meta.get("strategy")
        if strategy is not None:
            strategy_for(strategy)  # an unknown name is refused now, not when the turn runs
        if key is not None:
            first = self._keys.get(key) or await keyed_request(self.store, key)
            first = self._keys.get(key) or first  # an offer of the same key may have won
            if first is not None:
                first = self._requests.get(first.id, first)
                if first.status == "rejected":
                    raise Rejected(first.reason or "rejected")
                turn_id = (first.status == "coalesced" and first.coalesced_into) or first.id
                if (handle := self.live.get(turn_id)) is None:  # it ran, or waits: see outcome
                    handle = TurnHandle(turn_id, first.thread_id)
                    handle.done.set()
                return first, handle
        group = group_for(message)
        if not overflow:
            queued = self.scheduler.queued_in(group)
            if queued >= (limit := self.scheduler.group(group).max_queued_turns):
                raise QueueFull(f"group {group} queue is full ({queued} of {limit} queued)")
        req = Request(self.new_id("t"), message, group, self.clock(), strategy)
        changed = self.scheduler.offer(req)
        ops = [request_row(r, self.clock()) for r in changed]
        if key is not None:
            self._keys[key] = req
            ops.append(key_row(key, req.id, self.clock()))
        try:
            await self.store.write(ops)
        except BaseException:
            if key is not None:
                self._keys.pop(key, None)  # whether it committed, execution.db now says
            raise
        for r in changed:
            self._requests[r.id] = r
            if r.status in ("coalesced", "rejected") and (old := self.live.pop(r.id, None)):
                old.done.set()  # its waiters follow the request to where it went
            if r is not req and r.status == "rejected":  # the group's overflow dropped it
                self.notice("warning", f"{r.thread_id}: queued request {r.id} {r.reason}")
        if req.status == "rejected":
            raise Rejected(req.reason or "rejected")
        target = req.coalesced_into if req.status == "coalesced" else req.id
        handle = self.live.setdefault(target, TurnHandle(target, message.thread_id))
        holder = self.scheduler.holder(message.thread_id)
        if holder is not None and holder[0] in self._interrupted and holder[0] not in self.live:
            self._spawn_resume(holder[0])  # finish what a stopped run left, then ours
        self._pump()
        return req, handle

    def _pump(self) -> None:
        """Start every request the scheduler admits now."""
        if self._tg is None:
            return
        for req in self.scheduler.admissions():
            handle = self.live.setdefault(req.id, TurnHandle(req.id, req.thread_id))
            self._spawn(self._start_turn, req, handle)

    def request(self, request_id: str) -> Request | None:
        """A turn request of this run (or restored by it), as the scheduler left it."""
        return self._requests.get(request_id)

    def why_queued(self, request_id: str) -> str | None:
        """Why a request of this run still waits in the queue (None once it has left it)."""
        req = self._requests.get(request_id)
        if req is None or req.status != "queued":
            return None
        return self.scheduler.why_waiting(req)

    def statistics(self) -> Statistics:
        """Groups, threads and queued requests, with why each request waits."""
        return self.scheduler.statistics()

    async def configure_group(self, name: str, **changes: Any) -> GroupConfig:
        """Change a thread group while running (pause, budget, priority...); it persists."""
        group = self.scheduler.configure(name, **changes)
        await self.store.write([group_row(group)])
        self._pump()
        return group

    def start_loops(self) -> None:
        """Start the runtime loops (the pulse loop) in the runtime's task group. Loops only
        create turn requests; the scheduler decides when they run."""
        from engine.loops.pulse import PulseLoop
        from engine.loops.pulse_files import Limits

        pc = self.config.pulse
        pulse = PulseLoop(
            self.room,
            submit=lambda m, **kw: self.submit(m, strategy=m.meta.get("strategy"), **kw),
            notice=self.notice,
            clock=self.clock,
            interval=pc.interval,
            will_interval=pc.will_interval,
            agent=pc.agent,
            limits=Limits.of(pc),
        )
        self._spawn(pulse.run)

    def notice(self, level: str, text: str) -> None:
        """Tell the operator something that is not a state change (a bad file, a retry)."""
        # A file name's bytes that are not UTF-8 (lone surrogates in Python) become escapes:
        # stored with the next commit, they made it fail, and ended the runtime.
        text = text.encode("utf-8", "backslashreplace").decode("utf-8").translate(_ONE_LINE)
        log = {"error": self.log.error, "warning": self.log.warning}.get(level, self.log.info)
        log("%s", text)
        self.publish(Notice(at=self.clock(), level=level, text=text))  # type: ignore[arg-type]

    def listen(self, loop: TurnLoop) -> None:
        """Route decisions for `loop`'s calls to it (a loop driven outside the scheduler)."""
        self._loops[loop.turn.id] = loop

    def unlisten(self, loop: TurnLoop) -> None:
        self._loops.pop(loop.turn.id, None)

    def tool_runner(self, messages: list[ConvMessage], **kw: Any) -> ToolRunner:
        """An iterator over assistant messages for programs that embed agentdeck."""
        return ToolRunner(self, messages, **kw)

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
        while True:
            handle = self.live.get(turn_id)
            if handle is not None:
                await handle.done.wait()
                if self.live.get(turn_id) not in (None, handle):
                    continue  # it went on at once (a decision was already queued)
            req = self._requests.get(turn_id)
            if req is None or req.status != "coalesced" or req.coalesced_into is None:
                return await self.outcome(turn_id)
            turn_id = req.coalesced_into

    async def _start_turn(self, req: Request, handle: TurnHandle) -> None:
        thread = self.config.threads.get(req.thread_id)
        strategy = (
            req.strategy
            or (thread.strategy if thread else None)
            or self.scheduler.group(req.group).strategy
            or "react"
        )
        loop = await self.open_turn(req, strategy)
        await self._drive(loop, handle)

    async def open_turn(
        self, req: Request, strategy: str, *, user_message: bool = True
    ) -> TurnLoop:
        """Record a new turn (checkpoint user_message) and return its loop, not yet run."""
        now, message = self.clock(), req.message
        conv = await self.conversation(message.thread_id)
        turn = TurnState(req.id, message.thread_id, TurnStatus.RUNNING, now, strategy,
                         group=req.group)  # fmt: skip
        loop = TurnLoop(self.ctx, turn, conv, strategy_of_turn(strategy))
        loop.ops += [
            ("UPDATE turn_requests SET status='admitted', updated_at=? WHERE id=?", (now, req.id)),
            ("INSERT INTO threads(id, group_name, created_at, updated_at, last_turn_id, turn_count)"
             " VALUES (?,?,?,?,?,1) ON CONFLICT(id) DO UPDATE SET updated_at=excluded.updated_at,"
             " last_turn_id=excluded.last_turn_id, turn_count=threads.turn_count+1",
             (turn.thread_id, req.group, now, now, turn.id)),
            ("INSERT INTO turns(id, thread_id, run_id, origin, channel, sender, text, meta,"
             " strategy, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
             (turn.id, turn.thread_id, self.run_id, message.origin, message.channel,
              message.sender, message.text, json.dumps(message.meta), strategy, "running", now, now)),
        ]  # fmt: skip
        loop.events.append(
            TurnStarted(at=now, thread_id=turn.thread_id, turn_id=turn.id, origin=message.origin,
                        sender=message.sender, text=message.text, strategy=strategy)
        )  # fmt: skip
        if user_message:
            loop.append(ConvMessage(role="user", text=message.text))
        await loop.commit("user_message")
        return loop

    def _spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        assert self._tg is not None, "the runtime is not open"
        self._tg.start_soon(fn, *args)

    def _spawn_resume(self, turn_id: str, thread_id: str = "") -> TurnHandle:
        handle = TurnHandle(turn_id, thread_id)
        self.live[turn_id] = handle
        self._spawn(self._resume, handle)
        return handle

    async def _resume(self, handle: TurnHandle) -> None:
        """Continue a waiting or interrupted turn from execution.db."""
        loop = await self._load(handle.turn_id)
        self._interrupted.discard(handle.turn_id)
        handle.thread_id = loop.turn.thread_id
        if loop.turn.status is TurnStatus.DONE:
            handle.done.set()
            self.live.pop(handle.turn_id, None)
            return
        if loop.turn.status is TurnStatus.WAITING:
            await loop.reopen()
        # turn_timeout bounds a stretch of running: the time the turn waited for a decision
        # (or for a runtime, after a crash) does not count, or an approval given after
        # turn_timeout would run its call and then stop the turn before it could answer
        loop.turn.started_at = self.clock()
        await self._drive(loop, handle)

    async def _load(self, turn_id: str) -> TurnLoop:
        row = await self.store.fetchone(
            "SELECT t.*, h.group_name FROM turns t JOIN threads h ON h.id = t.thread_id"
            " WHERE t.id=?", (turn_id,)
        )  # fmt: skip
        if row is None:
            raise LookupError(f"no turn {turn_id} in {self.room.db}")
        turn = TurnState(
            row["id"], row["thread_id"], TurnStatus(row["status"]), row["created_at"],
            row["strategy"], row["reason"], row["detail"], row["rounds"], row["input_tokens"],
            row["output_tokens"], row["final_text"], group=row["group_name"],
        )  # fmt: skip
        turn.add_calls([
            CallState.from_row(crow) for crow in await self.store.fetchall(
                "SELECT * FROM tool_calls WHERE turn_id=? ORDER BY step_id, idx", (turn_id,))
        ])  # fmt: skip
        conv = await self.conversation(turn.thread_id)
        return TurnLoop(self.ctx, turn, conv, strategy_of_turn(turn.strategy))

    async def _drive(self, loop: TurnLoop, handle: TurnHandle) -> None:
        """Run the loop; an operator's cancel ends the turn `done/cancelled`."""
        self._loops[handle.turn_id] = loop
        self.scheduler.hold(loop.turn.thread_id, loop.turn.id, loop.turn.group, "running")
        self.summary_file.changed(self._tg)
        try:
            with anyio.CancelScope() as scope:
                handle.scope = scope
                if handle.cancel_reason is not None:
                    scope.cancel()
                await loop.run()
            if scope.cancelled_caught:
                with anyio.CancelScope(shield=True):
                    await loop.finish(turn_lifecycle.CANCELLED, handle.cancel_reason)
        finally:
            self._loops.pop(handle.turn_id, None)
            self.live.pop(handle.turn_id, None)
            self._settle(loop.turn)
            handle.done.set()

    def _settle(self, turn: TurnState) -> None:
        """A turn's loop stopped: free or hold its thread, then start what may start."""
        if turn.status is TurnStatus.DONE:
            self.scheduler.release(turn.thread_id, turn.id)
        elif turn.status is TurnStatus.WAITING:
            self.scheduler.hold(turn.thread_id, turn.id, turn.group, "waiting")
            if any(self.decisions.queued_for(c.id) for c in turn.suspended()):
                self._spawn_resume(turn.id)  # a decision arrived while it was deciding to wait
        self.summary_file.changed(self._tg)
        if self._tg is not None and not self._tg.cancel_scope.cancel_called:
            self._pump()

    async def cancel_turn(self, turn_id: str, reason: str = "cancelled by operator") -> bool:
        """Cancel a running or waiting turn: it ends `done/cancelled`. False if already done."""
        handle = self.live.get(turn_id)
        if handle is not None:
            handle.cancel_reason = reason
            if handle.scope is not None:
                handle.scope.cancel()
            return True
        loop = await self._load(turn_id)
        if loop.turn.status is TurnStatus.DONE:
            return False
        await loop.finish(turn_lifecycle.CANCELLED, reason)
        self._settle(loop.turn)
        return True

    # -- decisions --------------------------------------------------------------------------

    async def decide(self, decision: Decision) -> str:
        """Record a decision; it is applied now if its call waits, else when it can be.

        Returns `queued` (accepted; applied as soon as the call is suspended) or
        `duplicate` (this decision, or another for the same call, was already applied).
        """
        with self.decisions.recording(decision.call_id):  # from before the call is read
            return await self._decide(decision)

    async def _decide(self, decision: Decision) -> str:
        now = self.clock()
        if await self.store.scalar("SELECT 1 FROM decisions WHERE id=?", (decision.id,)):
            return "duplicate"
        call = await self.call_state(decision.call_id)
        decided = call is not None and (call.status.terminal or call.status is CallStatus.RESUMING)
        status = "duplicate" if decided else "queued"
        note = already(call) if decided and call else None
        event = DecisionRecorded(
            at=now, thread_id=call.thread_id if call else "", turn_id=call.turn_id if call else "",
            decision_id=decision.id, call_id=decision.call_id, action=decision.action,
            status=status, reason=decision.reason, note=note,
        )  # fmt: skip
        ops: list[Op] = [(INSERT_DECISION, to_row(decision, status, now, note))]
        events: list[Event] = [event]
        if not decided:  # a decision a dead run left unapplied gives way to this newer one
            for old, op in self.decisions.supersede(decision, now):
                ops.append(op)
                events.append(DecisionRecorded(
                    at=now, thread_id=event.thread_id, turn_id=event.turn_id,
                    decision_id=old.id, call_id=old.call_id, action=old.action,
                    status="superseded", reason=old.reason, note=f"superseded by {decision.id}",
                ))  # fmt: skip
        await self.commit(ops, events, checkpoint=None, turn_id=event.turn_id)
        if decided:
            if call and call.turn_id in self._interrupted and call.turn_id not in self.live:
                # a one-off's: its caller waits for the turn, which nothing else resumes
                self._spawn_resume(call.turn_id)
            return status
        if (note := self.decisions.settled_meanwhile(decision.call_id)) is not None:
            # another decision took the call, or it ended, while this one was written
            lost = event.model_copy(update={"at": self.clock(), "status": "duplicate",
                                            "note": note})  # fmt: skip
            await self.commit(
                [("UPDATE decisions SET status='duplicate', note=? WHERE id=?", (note, decision.id))],
                [lost], checkpoint=None, turn_id=event.turn_id,
            )  # fmt: skip
            return "duplicate"
        self.decisions.add(decision)
        if call is not None:
            self._wake(call.turn_id)
        return status

    def _wake(self, turn_id: str) -> None:
        loop = self._loops.get(turn_id)
        if loop is not None:
            loop.decided.set()
        elif turn_id not in self.live:
            self._spawn_resume(turn_id)

    def _live_call(self, call_id: str) -> CallState | None:
        for loop in self._loops.values():
            if call_id in loop.turn.calls:
                return loop.turn.calls[call_id]
        return None

    async def call_state(self, call_id: str) -> CallState | None:
        """A tool call as it stands now (in a running turn, else as committed)."""
        call = self._live_call(call_id)
        if call is None:
            row = await self.store.fetchone("SELECT * FROM tool_calls WHERE id=?", (call_id,))
            call = CallState.from_row(row) if row is not None else None
        return call

    async def pending(self) -> list[PendingCall]:
        """Every suspended call in the room, oldest first."""
        return await read_pending(self.store)

    async def outcome(self, turn_id: str) -> TurnOutcome:
        """Where a turn stands, from execution.db."""
        return await read_outcome(self.store, turn_id)

    # -- the summary ------------------------------------------------------------------------

    def _summary(self, stopped: bool) -> dict[str, Any]:
        """What agent.run says (see engine.summary)."""
        return {
            "run_id": self.run_id,
            "kind": self.kind,
            "pid": os.getpid(),
            "state": "stopped" if stopped else "active",
            "model": f"{self.provider.name}:{self.provider.model}",
            "running_turns": sorted(self._loops),
            "waiting_turns": sorted(
                h.turn_id for h in self.scheduler.holders.values() if h.state == "waiting"
            ),
            "updated_at": time.time(),  # wall time, not the runtime clock tests fix
            **self.api,
        }
