"""Decisions reaching a turn's calls: RESUME_TOOL_CALL, the replay of a decided call, and
the repair of calls a crash left open.

Before a decided call is replayed, `resuming` and the decision are committed, so a crash
between decision and replay is repaired at the next start; a call that committed its
result is never run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import anyio

from engine.decisions import Decision, Rule
from engine.events import DecisionRecorded
from engine.lifecycle import CallStatus
from engine.plugins import Gate, Phase
from engine.store import Op
from engine.store import decisions as recorded
from engine.turn import gate as gates
from engine.turn.call import ANSWERED, CallState
from engine.turn.context import TurnContext
from engine.turn.state import TurnState, as_json, calls_summary


class _Loop(Protocol):
    """What the replay needs of the turn's loop."""

    ctx: TurnContext
    turn: TurnState
    ops: list[Op]
    events: list[Any]
    consecutive_errors: int
    step_tools: list[str] | None

    async def phase(self, phase: Phase, **kw: Any) -> list[Gate | None]: ...
    def answer(self, call: CallState) -> None: ...
    async def commit(self, checkpoint: str | None, touched: Sequence[CallState] = ...) -> None: ...
    def step_start(self, kind: str) -> int: ...
    def step_end(self, status: str, summary: str, **usage: int) -> None: ...
    def _count_errors(self, calls: list[CallState]) -> None: ...
    async def _take_decisions(self: _Loop) -> list[tuple[Decision, CallState]]: ...
    def _duplicates(
        self: _Loop, call: CallState, late: list[Decision], note: str, now: float
    ) -> None: ...
    async def _replay(self: _Loop, decision: Decision, call: CallState) -> None: ...


class Replay:
    """The decision half of `TurnLoop` (a mixin: `self` is the loop)."""

    async def resume_tool_calls(self: _Loop) -> None:
        """RESUME_TOOL_CALL: apply queued decisions to suspended calls and replay them."""
        taken = await self._take_decisions()
        if not taken:
            return
        self.step_start("replay")
        async with anyio.create_task_group() as tg:
            for decision, call in taken:
                tg.start_soon(self._replay, decision, call)
        calls = [call for _, call in taken]
        for call in calls:
            if call.status.terminal:
                self.answer(call)
        self._count_errors(calls)
        self.step_end("succeeded", calls_summary(calls))
        await self.commit("tool_results_committed", calls)

    async def _take_decisions(self: _Loop) -> list[tuple[Decision, CallState]]:
        """Match queued decisions to our suspended calls; commit `resuming` + the decision."""
        taken = self.ctx.decisions.take(self.turn.suspended())
        if not taken:
            return []
        now = self.ctx.clock()
        for decision, call in taken:
            call.move(CallStatus.RESUMING, now, decision_id=decision.id)
            self.ops.append(recorded.applied(decision.id, now))
            self.events.append(
                DecisionRecorded(at=now, thread_id=call.thread_id, turn_id=call.turn_id,
                                 decision_id=decision.id, call_id=call.id,
                                 action=decision.action, status="applied", reason=decision.reason)
            )  # fmt: skip
            rest = self.ctx.decisions.drop_rest(call.id)
            self._duplicates(call, rest, f"call already decided by {decision.id}", now)
            if decision.remember:
                rule = Rule(
                    tool=call.tool, effect="allow" if decision.action == "resume" else "deny",
                    scope=decision.remember, thread_id=call.thread_id,
                )  # fmt: skip
                self.ctx.rules.append(rule)
                self.ops.append(recorded.rule_made(rule, decision.id, now))
        await self.commit(None, [call for _, call in taken])  # `resuming` is durable first
        return taken

    def _duplicates(
        self: _Loop, call: CallState, late: list[Decision], note: str, now: float
    ) -> None:
        """Record decisions that came too late for `call` as duplicates."""
        for dup in late:
            self.ops.append(recorded.duplicate(dup.id, note))
            self.events.append(  # its operator learns which decision won
                DecisionRecorded(at=now, thread_id=call.thread_id, turn_id=call.turn_id,
                                 decision_id=dup.id, call_id=call.id, action=dup.action,
                                 status="duplicate", reason=dup.reason, note=note)
            )  # fmt: skip

    async def _replay(self: _Loop, decision: Decision, call: CallState) -> None:
        """Carry out a committed decision on a `resuming` call."""
        now = self.ctx.clock()
        if decision.action == "cancel":
            call.move(CallStatus.CANCELLED, now, error=decision.denial_text())
            return
        if decision.use_result:  # the operator's text goes where a tool's would: masked, cut
            text = decision.result if isinstance(decision.result, str) else as_json(decision.result)
            call.move(CallStatus.SUCCEEDED, now, result=gates.cleaner(self)(text), error=None)
            return
        if decision.args is not None:
            call.args = decision.args
        kwargs = await gates.admit(self, call, approved=True)
        if kwargs is not None:
            call.move(CallStatus.RUNNING, self.ctx.clock())
            await self.commit(None, [call])  # durably `running` first: never run twice
            await gates.execute(self, call, kwargs)

    async def recover(self: _Loop) -> None:
        """After a crash: settle calls the last run left `new`, `running` or `resuming`.

        A `new` call was never gated (its turn stopped, or the run died, first): the gate
        decides now, and one it admits is committed `running` before its tool starts. A
        `running` one ran with its outcome lost: run again only if its tool is idempotent.
        A `resuming` one has a committed decision: replayed.
        """
        orphans = [
            c for c in self.turn.calls.values()
            if c.status in (CallStatus.NEW, CallStatus.RUNNING, CallStatus.RESUMING)
        ]  # fmt: skip
        if not orphans:
            return
        self.step_start("replay")
        now = self.ctx.clock()
        runs: list[tuple[CallState, dict[str, Any]]] = []
        admitted = False
        for call in orphans:
            tool = self.ctx.tools.get(call.tool)
            if call.status is CallStatus.NEW:
                if (kwargs := await gates.admit(self, call)) is not None:
                    call.move(CallStatus.RUNNING, now)
                    runs.append((call, kwargs))
                    admitted = True
            elif call.status is CallStatus.RUNNING and tool is not None and tool.idempotent:
                runs.append((call, tool.validate(call.args)))
            elif call.status is CallStatus.RUNNING:
                call.move(CallStatus.FAILED, now, error=(
                    "outcome unknown: agentdeck stopped while this call was running; "
                    "it was not run again because it is not idempotent"))  # fmt: skip
                await self.phase(Phase.AFTER_TOOL_EXECUTE, tool=call.tool, args=call.args,
                                 outcome=call.status.value)  # fmt: skip
        if admitted:  # durably `running` before its tool starts: never run twice
            await self.commit(None, orphans)
        async with anyio.create_task_group() as tg:
            for call in orphans:
                if call.status is CallStatus.RESUMING:
                    decision = await self.ctx.decisions.load(call.decision_id)
                    tg.start_soon(self._replay, decision, call)
            for call, kwargs in runs:
                tg.start_soon(gates.execute, self, call, kwargs)
        for call in orphans:
            if call.status.terminal and call.has_message != ANSWERED:
                self.answer(call)
        self.step_end("succeeded", "recovered " + calls_summary(orphans))
        await self.commit("tool_results_committed", orphans)
