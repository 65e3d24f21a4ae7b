"""The turn supervisor: which turns run in this process, and how each gets to an end.

It starts the requests the scheduler admits, resumes waiting and interrupted turns from
execution.db (each takes a slot of its group like a new turn: `_slot`), drives each turn's
loop to `waiting` or `done` in the runtime's task group, cancels turns, and routes
decisions to the loop of their call. The runtime in front of it decides what is offered
and answers the operator; the supervisor only runs turns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from engine.config import Config
from engine.decisions.record import Recorded, record_decision
from engine.domain.decisions import Decision
from engine.domain.events import TurnStarted
from engine.domain.instructions import message_context
from engine.domain.messages import ConvMessage
from engine.lifecycle import TurnStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.services import opening
from engine.services.conversations import Conversations
from engine.services.coordinator import Coordinator
from engine.services.handles import Carried, TurnHandle
from engine.services.instructions import InstructionsBook
from engine.services.scheduler import Request, Resumed, Scheduler
from engine.store import DiskFull, LeaseLost, Store
from engine.store import turns as rows
from engine.strategies import OPERATIONS, initial_record, strategy_of_turn
from engine.turn.call import CallState
from engine.turn.context import TurnContext
from engine.turn.conversation import Conversation
from engine.turn.loop import TurnLoop
from engine.turn.models import model_over
from engine.turn.state import TurnState, reply_of


class TurnSupervisor:
    """The turns of one run, from admission (or resumption) to their end."""

    def __init__(self, ctx: TurnContext, coordinator: Coordinator, store: Store,
                 scheduler: Scheduler, config: Config, changed: Callable[[], None],
                 notice: Callable[[str, str], None] | None = None,
                 instructions: InstructionsBook | None = None) -> None:  # fmt: skip
        self.ctx, self.store, self.scheduler, self.config = ctx, store, scheduler, config
        self.instructions = instructions  # where each turn's instructions come from
        self._changed = changed  # a turn started or settled (agent.run is rewritten)
        self._notice = notice  # (level, text): told to the operator
        self.live: dict[str, TurnHandle] = {}  # turns whose loop runs (or is about to)
        self.loops: dict[str, TurnLoop] = {}  # loops that take decisions now
        self.interrupted: set[str] = set()  # left `running` by a run that stopped
        self.tg: TaskGroup | None = None
        # threads' conversations, idle ones within [runtime] conversation_cache_bytes
        self.conversations = Conversations(store, config.runtime.conversation_cache_bytes,
                                           self._in_use)  # fmt: skip
        self.coordinator = coordinator  # one room alone, or one worker of a cluster

    # -- starting ---------------------------------------------------------------------------

    def spawn(self, fn: Callable[..., Any], *args: Any) -> None:
        assert self.tg is not None, "the runtime is not open"
        self.tg.start_soon(fn, *args)

    def pump(self, carried: Carried | None = None) -> bool:
        """Start every request the scheduler admits now. True if `carried`'s request is
        one of them: its rows are then written by its turn's first commit."""
        if self.tg is None:
            return False
        taken = False
        for req in self.scheduler.admissions():
            if isinstance(req, Resumed):  # its resumption waits for this (`_slot`)
                resumed = self.live.get(req.turn_id)
                if resumed is None or resumed.lost:  # (not expected: one is under way)
                    resumed = self.live[req.turn_id] = TurnHandle(req.turn_id, req.thread_id)
                    self.spawn(self._resume, resumed)
                resumed.admitted.set()
                continue
            handle = self.live.setdefault(req.id, TurnHandle(req.id, req.thread_id))
            if carried is not None and req.id == carried.request_id:
                taken = True
                self.spawn(self._start_turn, req, handle, carried)
            else:
                self.spawn(self._start_turn, req, handle)
        return taken

    def _unlive(self, handle: TurnHandle) -> None:
        """The handle's loop stopped: it no longer stands for its turn here (unless a newer
        one does already: a turn resumed while a stopped loop of it was still ending)."""
        if self.live.get(handle.turn_id) is handle:
            del self.live[handle.turn_id]

    def forget(self, thread_id: str) -> None:
        """Another worker may run the thread's turns: its conversation is read again."""
        self.conversations.forget(thread_id)

    def _in_use(self, thread_id: str) -> bool:
        """Whether a turn holds the thread here (running, waiting for a decision or in line
        to resume), or a loop driven outside the scheduler (a ToolRunner's) runs on it."""
        if self.scheduler.holder(thread_id) is not None:
            return True
        return any(loop.turn.thread_id == thread_id for loop in self.loops.values())

    def spawn_resume(self, turn_id: str, thread_id: str = "") -> TurnHandle:
        """Continue a waiting or interrupted turn (in the task group) once it has a slot of
        its group; one whose loop runs here already is not run a second time. It is in
        line for the slot from now on (ahead of requests a pump admits meanwhile)."""
        if (running := self.live.get(turn_id)) is not None and not running.lost:
            return running
        handle = TurnHandle(turn_id, thread_id)
        self.live[turn_id] = handle
        thread = self.scheduler.thread_of(turn_id)
        holder = self.scheduler.holders.get(thread) if thread else None
        if thread and holder is not None and holder.state != "resumed":
            self.scheduler.resume(thread, turn_id, holder.group)
        self.spawn(self._resume, handle)
        return handle

    async def conversation(self, thread_id: str) -> Conversation:
        """A thread's conversation, kept current in memory while a turn holds the thread and
        after, until idle ones pass the runtime's bound (engine/services/conversations.py);
        on a cluster, read afresh for each turn that starts or resumes here: other workers
        append to it between, and a copy kept across a lost lease was behind."""
        return await self.conversations.get(thread_id,
                                            fresh=not self.coordinator.keeps_conversations)  # fmt: skip

    async def _start_turn(
        self, req: Request, handle: TurnHandle, carried: Carried | None = None
    ) -> None:
        thread = self.config.threads.get(req.thread_id)
        strategy = (
            req.strategy
            or (thread.strategy if thread else None)
            or self.scheduler.group(req.group).strategy
            or "react"
        )
        if not await self.coordinator.admit(req.id, req.thread_id, req.group):
            # the group's budget is full across the cluster: the request stays queued
            self.coordinator.refused(req)
            handle.done.set()
            return
        try:
            says = strategy not in OPERATIONS and not req.message.meta.get("continues")  # a fork's
            loop = await self.open_turn(req, strategy, carried=carried, user_message=says)
        except LeaseLost as exc:  # a cluster's: the lease went before the turn was recorded
            self.ctx.log.warning("turn %s does not start here: %s", req.id, exc)
            self._unlive(handle)
            self.coordinator.unstarted(req)  # its request is still queued, for the next holder
            handle.done.set()
            return
        except DiskFull as exc:  # nothing of the turn was written: its thread is free again
            self.scheduler.release(req.thread_id, req.id)
            self._unlive(handle)
            if carried is not None:
                carried.settle(exc)  # its offer fails: the sender is told, nothing is kept
            else:  # queued in the store still: the next start offers it again
                self.disk_full(f"request {req.id} waits in the queue until the next start")
            handle.done.set()
            self._changed()
            return
        except BaseException as exc:
            if carried is not None:
                carried.settle(exc)
            raise
        if carried is not None:
            carried.settle(None)
        await self._drive(loop, handle)

    def disk_full(self, what: str) -> None:
        """Say that the disk holding the room is full, and what waits because of it."""
        text = f"The disk holding the room is full: {what}. New work is refused until it fits."
        if self._notice is not None:
            self._notice("error", text)
        else:
            self.ctx.log.error("%s", text)

    async def open_turn(
        self,
        req: Request,
        strategy: str,
        *,
        user_message: bool = True,
        carried: Carried | None = None,
    ) -> TurnLoop:
        """Record a new turn (RunStart, then checkpoint user_message, the seed's order) and
        return its loop, not yet run."""
        now, message = self.ctx.clock(), req.message
        conv = await opening.conversation(self.store, self.conversations, self.instructions,
                                          message.thread_id,
                                          fresh=not self.coordinator.keeps_conversations)  # fmt: skip
        turn = TurnState(req.id, message.thread_id, TurnStatus.RUNNING, now, strategy,
                         group=req.group, record=initial_record(strategy, message.meta),
                         channel=message.channel, reply=reply_of(message.meta))  # fmt: skip
        turn.model = self.ctx.models.choose(turn.thread_id, req.group, model_over(turn.record))
        loop = TurnLoop(self.ctx, turn, conv, strategy_of_turn(strategy))
        if carried is not None:  # the request's own rows, first
            loop.ops += carried.ops
        if self.instructions is not None:  # what it is told, kept once per distinct text
            told = turn.instructions = await self.instructions.for_thread(turn.thread_id, req.group)
            if told.parts:
                loop.ops.append(
                    rows.instructions_kept(told.hash, told.text, told.parts_json(), now)
                )
        loop.ops += rows.turn_opened(turn.id, message, req.group, strategy, self.ctx.run_id, now,
                                     turn.instructions.hash, turn.model)  # fmt: skip
        loop.events.append(
            TurnStarted(at=now, thread_id=turn.thread_id, turn_id=turn.id, origin=message.origin,
                        sender=message.sender, text=message.text, strategy=strategy,
                        group=req.group, channel=message.channel, model=turn.model,
                        window=loop.window.tokens)
        )  # fmt: skip
        await loop.run_start()
        if user_message:
            loop.append(ConvMessage(role="user", text=message.text,
                                    context=message_context(now, message.channel, message.sender)))  # fmt: skip
        await loop.commit("user_message", urgent=True)  # the admission: never behind steps
        return loop

    async def _resume(self, handle: TurnHandle) -> None:
        """Continue a waiting or interrupted turn from execution.db."""
        loop = await self.load(handle.turn_id)
        if handle.turn_id in self.interrupted:
            # A turn stopped in this run (a full disk) may have taken decisions whose
            # applying was never written: the store's queued ones are its again.
            for decision in await self.coordinator.left_decisions(self.store):
                if decision.call_id in loop.turn.calls:
                    self.ctx.decisions.add_new(decision)
        self.interrupted.discard(handle.turn_id)
        turn = loop.turn
        handle.thread_id = turn.thread_id
        if turn.status is not TurnStatus.DONE and handle.cancel_reason is None:
            # a cancel recorded by a run that died, or by another worker, before it applied
            handle.cancel_reason = await rows.asked_cancel(self.store, turn.id)
        if turn.status is TurnStatus.DONE:
            if self.scheduler.holder(turn.thread_id) == (turn.id, "resumed"):
                self.scheduler.release(turn.thread_id, turn.id)  # it ended meanwhile
                self.pump()
            handle.done.set()
            self._unlive(handle)
            return
        if not await self._slot(loop, handle):
            return
        # turn_timeout bounds a stretch of running: the time the turn waited for a decision
        # (or for a runtime, after a crash) does not count, or an approval given after
        # turn_timeout would run its call and then stop the turn before it could answer
        loop.turn.started_at = self.ctx.clock()
        await self._drive(loop, handle, reopen=loop.turn.status is TurnStatus.WAITING)

    async def _slot(self, loop: TurnLoop, handle: TurnHandle) -> bool:
        """Wait for a slot of the turn's group, as a new turn would (the scheduler's, ahead
        of the group's queued requests; on a cluster, the database's count too), holding
        its thread meanwhile. False: it does not run here, being cancelled meanwhile (it
        ends so, its call never run) or, on a cluster, without the lease any more."""
        turn, sched = loop.turn, self.scheduler
        while True:
            if sched.holder(turn.thread_id) != (turn.id, "running"):
                if sched.holder(turn.thread_id) != (turn.id, "resumed"):
                    sched.resume(turn.thread_id, turn.id, turn.group)
                handle.admitted = anyio.Event()
                self.pump()
                with anyio.CancelScope() as scope:  # (cancel_turn and a lost lease cancel it)
                    handle.scope = scope
                    if handle.cancel_reason is not None:
                        scope.cancel()
                    await handle.admitted.wait()
                handle.scope = None
                if scope.cancelled_caught:
                    await self._unslotted(loop, handle)
                    return False
            if await self.coordinator.admit(turn.id, turn.thread_id, turn.group):
                return True
            if not self.coordinator.holds(turn.thread_id):  # the lease went: its holder resumes it
                handle.lost = True
                await self._unslotted(loop, handle)
                return False
            sched.resume(turn.thread_id, turn.id, turn.group)  # the budget is full across
            self.coordinator.full(turn.group)  # the cluster: in line again, for the next slot

    async def _unslotted(self, loop: TurnLoop, handle: TurnHandle) -> None:
        """A turn that waited for a slot does not run: cancelled, it ends so (its thread is
        free); on a cluster that lost the thread, nothing is written."""
        parked = False
        try:
            if not handle.lost:
                with anyio.CancelScope(shield=True):
                    await loop.finish(turn_lifecycle.CANCELLED, handle.cancel_reason)
        except LeaseLost:
            handle.lost = True
        except DiskFull:  # the cancel was not written: it stays waiting, as a crash leaves it
            parked = True
            self.disk_full(f"turn {handle.turn_id} could not be cancelled: it still waits "
                           "as it did; cancel it again once there is space")  # fmt: skip
        finally:
            self._unlive(handle)
            if parked:
                self._park(loop)
            else:
                self._settle(loop.turn, lost=handle.lost)
            handle.done.set()

    def _park(self, loop: TurnLoop) -> None:
        """A turn a full disk stopped: its thread stays held, as by a turn a stopped run left."""
        self.interrupted.add(loop.turn.id)
        self.conversations.forget(loop.turn.thread_id)  # ahead of the store
        self.scheduler.hold(loop.turn.thread_id, loop.turn.id, loop.turn.group, "waiting")
        self._changed()

    async def load(self, turn_id: str) -> TurnLoop:
        """A turn's loop as execution.db has it (LookupError: no such turn)."""
        row = await rows.turn_row(self.store, turn_id)
        if row is None:
            raise LookupError(f"no turn {turn_id} in {self.store.path}")
        turn = TurnState.from_row(row, reply_of(json.loads(row["meta"] or "{}")))
        turn.add_calls([CallState.from_row(r) for r in await rows.call_rows(self.store, turn_id)])
        if (over := model_over(turn.record)) is not None:  # a replay's own model, again
            turn.model = self.ctx.models.choose(turn.thread_id, turn.group, over)
        if self.instructions is not None:  # resumed, it is told what it started with
            turn.instructions = await self.instructions.of_turn(row["instructions"])
        conv = await self.conversation(turn.thread_id)
        return TurnLoop(self.ctx, turn, conv, strategy_of_turn(turn.strategy))

    # -- driving ----------------------------------------------------------------------------

    async def _drive(self, loop: TurnLoop, handle: TurnHandle, *, reopen: bool = False) -> None:
        """Run the loop (`reopen`: a waiting turn's, which runs again first); an operator's
        cancel ends the turn `done/cancelled`, a full disk or a lost lease stops it at its
        last checkpoint, whichever of its writes met it (the reopening one too)."""
        self.loops[handle.turn_id] = loop
        self.scheduler.hold(loop.turn.thread_id, loop.turn.id, loop.turn.group, "running")
        self._changed()
        parked = False
        try:
            if reopen:  # `waiting -> running`, committed
                await loop.reopen()
            with anyio.CancelScope() as scope:
                handle.scope = scope
                if handle.cancel_reason is not None:
                    scope.cancel()
                await loop.run()
            if scope.cancelled_caught and not handle.lost:
                with anyio.CancelScope(shield=True):
                    await loop.finish(turn_lifecycle.CANCELLED, handle.cancel_reason)
        except LeaseLost as exc:  # a cluster's: another worker took the thread over
            self.ctx.log.warning("turn %s stops here: %s", handle.turn_id, exc)
            handle.lost = True
        except DiskFull:  # stopped at its last checkpoint, as a crash would leave it
            parked = True
            self.disk_full(f"turn {handle.turn_id} stopped at its last checkpoint; it goes on "
                           "when a message comes on its thread, or at the next start")  # fmt: skip
        finally:
            if self.loops.get(handle.turn_id) is loop:
                del self.loops[handle.turn_id]
            self._unlive(handle)
            if parked:
                self._park(loop)
            else:
                self._settle(loop.turn, lost=handle.lost)
                if not handle.lost:
                    handle.outcome = loop.turn.outcome()
            handle.done.set()

    def _settle(self, turn: TurnState, *, lost: bool = False) -> None:
        """A turn's loop stopped: free or hold its thread, then start what may start."""
        if lost:  # what the loop holds is not the truth any more; the cluster forgets it
            self.coordinator.settled(turn, lost=True)
            self._changed()
            return
        if turn.status is TurnStatus.DONE:
            self.scheduler.release(turn.thread_id, turn.id)
        elif turn.status is TurnStatus.WAITING:
            self.scheduler.hold(turn.thread_id, turn.id, turn.group, "waiting")
        self.coordinator.settled(turn, lost=False)  # (its slot, before it takes one again)
        if turn.status is TurnStatus.WAITING and any(
            self.ctx.decisions.queued_for(c.id) for c in turn.suspended()
        ):  # a decision arrived while it was deciding to wait: first in line for the slot
            self.spawn_resume(turn.id, turn.thread_id)
        self._changed()
        self.conversations.settled(turn.thread_id)  # (its thread may be idle now)
        if self.tg is not None and not self.tg.cancel_scope.cancel_called:
            self.pump()

    async def cancel_turn(self, turn_id: str, reason: str) -> bool:
        """Cancel a running or waiting turn: it ends `done/cancelled`. False if already done.
        The cancel of a running turn is recorded first, so a crash before the turn ends
        does not let it go on where it is recovered (`_resume`)."""
        handle = self.live.get(turn_id)
        if handle is not None:
            await self.store.write([rows.cancel_asked(turn_id, reason, self.ctx.clock())],
                                   urgent=True)  # fmt: skip
            handle.cancel_reason = handle.cancel_reason or reason
            if handle.scope is not None:
                handle.scope.cancel()
            return True
        loop = await self.load(turn_id)
        if loop.turn.status is TurnStatus.DONE:
            return False
        await loop.finish(turn_lifecycle.CANCELLED, reason)
        self._settle(loop.turn)
        return True

    # -- decisions --------------------------------------------------------------------------

    async def review_left(self) -> None:
        """A one-off runtime resumes no interrupted turn, but the calls their dead run left
        running wait for a review all the same (engine.decisions.review), so that `agentdeck review`
        and `decide` see them whether or not the room has an owner."""
        for turn_id in sorted(self.interrupted):
            await (await self.load(turn_id)).review_left()

    def wake(self, turn_id: str, thread_id: str) -> None:
        """A decision for one of the turn's calls is queued: its loop takes it now, or the
        turn is resumed to take it (by this worker of a cluster only if it holds the
        thread; the decision's notice wakes the others)."""
        loop = self.loops.get(turn_id)
        if loop is not None:
            loop.decided.set()
        elif turn_id not in self.live and self.coordinator.holds(thread_id):
            self.spawn_resume(turn_id, thread_id)

    def live_call(self, call_id: str) -> CallState | None:
        """A call of a turn whose loop runs now, as that loop holds it."""
        for loop in self.loops.values():
            if call_id in loop.turn.calls:
                return loop.turn.calls[call_id]
        return None

    async def decide(self, decision: Decision, *, need_hash: bool = False) -> Recorded:
        """Record a decision; it is applied now if its call waits, else when it can be.

        Returns `queued` (accepted; applied as soon as the call is suspended),
        `duplicate` (this decision, or another for the same call, was already applied) or
        `refused` (not bound to the call's arguments, or with `need_hash` bound to none:
        engine.decisions.binding; recorded so, with why, and the call goes on waiting).
        """
        with self.ctx.decisions.recording(decision.call_id):  # from before the call is read
            return await record_decision(self, decision, need_hash)

    async def call_state(self, call_id: str) -> CallState | None:
        """A tool call as it stands now (in a running turn, else as committed)."""
        call = self.live_call(call_id)
        if call is None:
            row = await rows.call_row(self.store, call_id)
            call = CallState.from_row(row) if row is not None else None
        return call
