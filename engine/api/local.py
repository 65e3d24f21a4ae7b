"""The client interface over a `Runtime` in this process: what the owner's console uses,
and what the API's routes call, so both forms answer alike."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Literal

import anyio
from anyio.abc import TaskStatus

from engine import __version__
from engine.api import breakbook, channelbook, forkbook, rulebook, tool_models
from engine.api import usage_models as spending
from engine.api.audit import read_page
from engine.api.break_models import NewBreakpoint, Removed
from engine.api.client import Conflict, Invalid, NotFound, Receive, Refused, Resync, RoomClient
from engine.api.diffs import read_diff
from engine.api.fork_models import ForkBody, ReplayBody
from engine.api.models import (
    Cancelled,
    ChannelsView,
    Decided,
    DeliveryRow,
    GroupChange,
    Info,
    InstructionsPart,
    RoomOverview,
    SubmitBody,
    Submitted,
    ThreadInstructions,
)
from engine.api.rule_models import NewRule, Revoked
from engine.api.tool_models import ToolsView
from engine.api.usage_models import BudgetsView, By, UsageReport
from engine.api.watch import Lanes, Watch
from engine.decisions import review
from engine.domain.audit import AuditPage
from engine.domain.breakpoints import Breakpoint
from engine.domain.cluster_view import ClusterView, across
from engine.domain.decisions import Decision, PendingCall
from engine.domain.events import Event
from engine.domain.forks import Forked
from engine.domain.messages import InvalidMessage, Message
from engine.domain.outcome import TurnOutcome
from engine.domain.retention import GcReport
from engine.domain.review import Killed, Review
from engine.domain.rules import Rule
from engine.domain.turn_diff import TurnDiff
from engine.domain.usage import Limit, parse_scope
from engine.runtime import Runtime
from engine.services.scheduler import GroupConfig, Rejected, Request, Statistics
from engine.strategies import UnknownStrategy

MAX_WAIT = 60.0  # seconds one `outcome(wait=...)` may wait


class LocalClient(RoomClient):
    """The room's runtime, in this process."""

    hosted = True

    def __init__(self, runtime: Runtime, seq: Callable[[], int] | None = None) -> None:
        self.runtime, self.room = runtime, runtime.room
        self._seq = seq or (lambda: 0)

    async def info(self) -> Info:
        rt = self.runtime
        return Info(version=__version__, pid=os.getpid(), kind=rt.kind, run_id=rt.run_id,
                    room=str(rt.room.path), model=f"{rt.provider.name}:{rt.provider.model}",
                    started_at=rt.started_at, uptime=max(0.0, time.time() - rt.started_at),
                    seq=self._seq(), streams=0)  # fmt: skip

    async def submit(self, body: SubmitBody) -> Submitted:
        rt = self.runtime
        meta = dict(body.meta)
        try:
            message = Message.parse(
                {"origin": body.origin, "sender": body.sender, "thread_id": body.thread_id,
                 "text": body.text, "channel": body.channel, "meta": meta}
            )  # fmt: skip
        except InvalidMessage as exc:
            raise Invalid(str(exc)) from None
        if body.refuse_if_waiting:  # (a turn a stopped run left is finished first)
            await rt.settle_thread(message.thread_id)
        if body.refuse_if_waiting and (waiting := rt.waiting_turn(message.thread_id)):
            raise Conflict(
                f"thread {message.thread_id} has a turn waiting for a decision ({waiting}); "
                "decide its calls with `agentdeck decide`, or use --thread"
            )
        try:
            req, handle = await rt.offer(message, strategy=body.strategy)
        except UnknownStrategy as exc:
            raise Invalid(str(exc)) from None
        except Rejected as exc:
            raise Refused(str(exc)) from None
        why = rt.why_queued(handle.turn_id)
        status: Literal["queued", "admitted", "coalesced"] = (
            "coalesced" if req.status == "coalesced" else "queued" if why else "admitted"
        )
        return Submitted(request_id=req.id, turn_id=handle.turn_id, thread_id=req.thread_id,
                         status=status, why_queued=why)  # fmt: skip

    async def outcome(self, turn_id: str, wait: float = 0.0) -> TurnOutcome:
        rt = self.runtime
        if wait > 0:
            with anyio.move_on_after(min(wait, MAX_WAIT)):
                try:
                    await rt.wait_turn(turn_id)
                except LookupError:
                    raise NotFound(f"no turn {turn_id} in {rt.room.db}") from None
        why = rt.why_queued(turn_id)
        if why is not None:
            return queued_outcome(turn_id, rt, why, "queued")
        try:
            outcome = await rt.outcome(turn_id)
        except LookupError:
            req = rt.request(turn_id) or await rt.coordinator.stored_request(turn_id)
            if req is not None and req.status == "queued":  # another runtime's to start
                return queued_outcome(turn_id, rt, None, "queued", req)  # no reason known here
            if req is not None:  # admitted, its turn not yet recorded
                return queued_outcome(turn_id, rt, None, "running")
            raise NotFound(f"no turn {turn_id} in {rt.room.db}") from None
        if outcome.status == "waiting" and (
            turn_id in rt.live or await rt.coordinator.going_on(turn_id)
        ):
            # A decision woke it a moment ago (here, or at the cluster's worker that takes
            # its thread) and its loop has not yet said so in the room: read as waiting,
            # `decide` stopped there and left the decision unapplied. Until it has a slot of
            # its group, it reads queued, with why (as a request would).
            if (why := rt.scheduler.why_turn_resumed(turn_id)) is not None:
                return dataclasses.replace(outcome, status="queued", reason=why)
            return dataclasses.replace(outcome, status="running", reason=None)
        return outcome

    async def decide(self, decision: Decision) -> Decided:
        rt = self.runtime
        call = await rt.call_state(decision.call_id)
        if call is None:
            raise NotFound(f"no tool call {decision.call_id} in {rt.room.db}")
        recorded = await rt.record(decision, need_hash=True)  # bound to what was shown
        call = await rt.call_state(decision.call_id) or call
        winner = call.decision_id if recorded.status == "duplicate" else None
        note = recorded.note if recorded.status == "refused" else None
        return Decided(decision_id=decision.id, call_id=call.id, status=recorded.status,
                       turn_id=call.turn_id, thread_id=call.thread_id,
                       call_status=call.status.value, winner=winner, note=note)  # fmt: skip

    async def cancel(self, turn_id: str, reason: str = "cancelled by operator") -> Cancelled:
        try:
            done = await self.runtime.cancel_turn(turn_id, reason)
        except LookupError:
            raise NotFound(f"no turn {turn_id} in {self.room.db}") from None
        return Cancelled(turn_id=turn_id, cancelled=done)

    async def pending(self) -> list[PendingCall]:
        return await self.runtime.pending()

    async def reviews(self) -> list[Review]:
        rt = self.runtime
        return await review.reviews(rt.store, rt.room.workspace, rt.tools)

    async def kill_orphan(self, call_id: str) -> Killed:
        rt = self.runtime
        try:
            killed = await review.kill_orphan(rt.store, call_id, rt.run_id, rt.clock())
        except LookupError:
            raise NotFound(f"no tool call {call_id} in {rt.room.db}") from None
        except review.OrphanRefused as exc:
            raise Conflict(str(exc)) from None
        rt.notice("info", f"process group {killed.pgid} of call {call_id}: {killed.result}")
        return killed

    async def rules(self) -> list[Rule]:
        return rulebook.listed(self.runtime)

    async def add_rule(self, rule: NewRule) -> Rule:
        return await rulebook.add(self.runtime, rule)

    async def revoke_rule(self, rule_id: str, by: str = "operator") -> Revoked:
        return await rulebook.revoke(self.runtime, rule_id, by)

    async def breakpoints(self) -> list[Breakpoint]:
        return breakbook.listed(self.runtime)

    async def add_breakpoint(self, point: NewBreakpoint) -> Breakpoint:
        return await breakbook.add(self.runtime, point)

    async def remove_breakpoint(self, point_id: str, by: str = "operator") -> Removed:
        return await breakbook.remove(self.runtime, point_id, by)

    async def fork(self, fork: ForkBody) -> Forked:
        return await forkbook.fork(self.runtime, fork)

    async def replay(self, replay: ReplayBody) -> Forked:
        return await forkbook.replay(self.runtime, replay)

    async def channels(self) -> ChannelsView:
        return await channelbook.channels(self.runtime)

    async def deliveries(self, state: str | None = None, limit: int = 100) -> list[DeliveryRow]:
        return await channelbook.deliveries(self.runtime, state, limit)

    async def retry_delivery(self, outbox_id: int) -> DeliveryRow:
        return await channelbook.retry(self.runtime, outbox_id)

    async def drop_delivery(self, outbox_id: int) -> DeliveryRow:
        return await channelbook.drop(self.runtime, outbox_id)

    async def rooms(self) -> list[RoomOverview]:
        return await channelbook.rooms(self.runtime)

    async def statistics(self) -> Statistics:
        rt = self.runtime
        local = rt.statistics()  # taken first: the database's view is then the newer one
        return across(local, await rt.coordinator.view())

    async def cluster(self) -> ClusterView | None:
        return await self.runtime.coordinator.view()

    async def configure_group(self, name: str, change: GroupChange) -> GroupConfig:
        known = sorted(self.runtime.scheduler.groups)
        if name not in known:  # a typo must not make a group; agentdeck.toml makes them
            raise NotFound(f"no thread group {name!r} (groups: {', '.join(known)})")
        changes = change.model_dump(exclude_none=True)
        return await self.runtime.configure_group(name, **changes)

    async def instructions(self, thread_id: str) -> ThreadInstructions:
        group, told, own = await self.runtime.instructions.describe(thread_id)
        parts = [InstructionsPart(source=source, text=text) for source, text in told.parts]
        return ThreadInstructions(thread_id=thread_id, group=group, hash=told.hash,
                                  text=told.text, parts=parts, own=own)  # fmt: skip

    async def set_instructions(self, thread_id: str, text: str | None = None) -> ThreadInstructions:
        group, _, _ = await self.runtime.instructions.describe(thread_id)
        await self.runtime.instructions.set_thread(thread_id, group, text, self.runtime.clock())
        return await self.instructions(thread_id)

    async def tools(self) -> ToolsView:
        rt = self.runtime
        return tool_models.view(rt.tools, rt.mcp, rt.rules.listed(), rt.sandbox.describe())

    async def usage(
        self,
        by: By | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 1000,
    ) -> UsageReport:
        rt = self.runtime
        return await spending.report(rt.store, by, since, until, rt.clock(), limit)

    async def gc(self, dry_run: bool = False, vacuum: bool = False, days: float | None = None,
                 gb: float | None = None) -> GcReport:  # fmt: skip
        from engine.services.retention import Retention

        rt = self.runtime
        retention = Retention.of(rt.store, rt.room.path, rt.config, rt.clock)
        return await retention.gc(dry_run=dry_run, vacuum=vacuum, days=days, gb=gb)

    async def audit(
        self,
        since: float | None = None,
        thread: str | None = None,
        decided_by: str | None = None,
        kind: str | None = None,
        limit: int = 1000,
        after: str | None = None,
    ) -> AuditPage:
        return await read_page(self.runtime.store, since=since, thread=thread,
                               decided_by=decided_by, kind=kind, limit=limit, after=after)  # fmt: skip

    async def diff(self, turn_a: str, turn_b: str) -> TurnDiff:
        return await read_diff(self.room, turn_a, turn_b)

    async def budgets(self) -> BudgetsView:
        rt = self.runtime
        return spending.view(rt.budgets, spending.holds(rt.scheduler))

    async def set_budget(
        self,
        scope: str,
        tokens: int | None = None,
        cost: float | None = None,
        clear: bool = False,
        by: str = "operator",
    ) -> BudgetsView:
        where = parse_scope(scope)
        known = sorted(self.runtime.scheduler.groups)
        if where.kind == "group" and where.name not in known:
            raise NotFound(f"no thread group {where.name!r} (groups: {', '.join(known)})")
        await self.runtime.set_budget(where, None if clear else Limit(tokens, cost), by)
        return await self.budgets()

    async def follow(
        self, receive: Receive, resync: Resync, *, watch: Watch | None = None,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:  # fmt: skip
        if watch is None:
            unsubscribe = self.runtime.subscribe(receive)
        else:
            lanes = Lanes()

            def watched(event: Event) -> None:
                if watch.wants(lanes.of(event)):
                    receive(event)

            unsubscribe = self.runtime.subscribe(watched)
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            unsubscribe()

    def new_id(self, prefix: str) -> str:
        return self.runtime.new_id(prefix)


def queued_outcome(request_id: str, rt: Runtime, why: str | None, status: str,
                   req: Request | None = None) -> TurnOutcome:  # fmt: skip
    """A request with no turn recorded yet, shaped as an outcome: `queued` (`reason` why),
    or `running` (admitted a moment ago)."""
    req = req or rt.request(request_id)
    return TurnOutcome(turn_id=request_id, thread_id=req.thread_id if req else "",
                       status=status, reason=why, detail=None, text="", pending=[],
                       calls=[])  # fmt: skip


def as_dict(value: object) -> object:
    """A dataclass answer as plain data (the API's JSON)."""
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value  # type: ignore[arg-type]
