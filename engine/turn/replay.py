"""Decisions reaching a turn's calls: RESUME_TOOL_CALL, the replay of a decided call, and
the repair of calls a crash left open.

Before a decided call is replayed, `resuming` and the decision are committed, so a crash
between decision and replay is repaired at the next start; a call that committed its
result is never run again. An approval runs its call only with the arguments it is bound
to (engine/decisions/binding.py): one that is not is refused, and the call goes on waiting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import anyio

from engine.decisions import Decision, apply
from engine.decisions.review import notice_text, put_up_for_review
from engine.domain.events import Notice
from engine.lifecycle import CallStatus
from engine.store import Op
from engine.store import rules as ruled
from engine.turn import gate as gates
from engine.turn.call import ANSWERED, CallState
from engine.turn.context import TurnContext
from engine.turn.plugins import Gate, Phase
from engine.turn.state import TurnState, calls_summary


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
        taken, refused = self.ctx.decisions.take(self.turn.suspended(), apply.unbound)
        now = self.ctx.clock()
        for decision, call, why in refused:
            _record(self, [apply.refused(decision, call, why, now)])
        if not taken:
            if refused:
                await self.commit(None)
            return []
        rule_ids = [await self.ctx.new_rule_id() for decision, _ in taken if decision.remember]
        for decision, call in taken:
            _record(self, [apply.applied(decision, call, now)])
            rest = self.ctx.decisions.drop_rest(call.id)
            self._duplicates(call, rest, f"call already decided by {decision.id}", now)
            if decision.remember:  # a rule for the arguments it decided (edited or not)
                args = call.args if decision.args is None else decision.args
                rule = self.ctx.rules.remembered(decision, call.tool, args, call.thread_id, now,
                                                 rule_ids.pop(0))  # fmt: skip
                self.ops += [ruled.made(rule), *self.ctx.coordinator.rules_changed()]
        await self.commit(None, [call for _, call in taken])  # `resuming` is durable first
        return taken

    def _duplicates(
        self: _Loop, call: CallState, late: list[Decision], note: str, now: float
    ) -> None:
        """Record decisions that came too late for `call` as duplicates."""
        _record(self, apply.duplicates(call, late, note, now))

    async def _replay(self: _Loop, decision: Decision, call: CallState) -> None:
        """Carry out a committed decision on a `resuming` call."""
        carried = apply.carry_out(decision, call, self.ctx.clock(), gates.cleaner(self))
        if carried != "run":
            if carried != "ended":  # refused: nothing ran, the call waits again
                _record(self, [carried])
            return
        kwargs = await gates.admit(self, call, approved=True)
        if kwargs is not None:
            call.move(CallStatus.RUNNING, self.ctx.clock())
            await self.commit(None, [call])  # durably `running` first: never run twice
            await gates.execute(self, call, kwargs)

    async def recover(self: _Loop) -> None:
        """After a crash: settle calls the last run left `new`, `running` or `resuming`.

        A `new` call was never gated (its turn stopped, or the run died, first): the gate
        decides now, and one it admits is committed `running` before its tool starts. A
        `running` one ran with its outcome lost: run again if its tool is idempotent, else
        suspended for an operator's review (engine.decisions.review): never run again unasked. A
        `resuming` one has a committed decision: replayed.
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
                _put_up(self, call, now)
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

    async def review_left(self: _Loop) -> int:
        """A one-off runtime's part of `recover` (`agentdeck review`, `decide`, opening a
        room nobody owns): the calls the last run left `running` whose tool is not
        idempotent wait for a review now, and nothing runs; the rest of the recovery is
        left to the runtime that resumes the turn. Returns how many were put up."""
        now = self.ctx.clock()
        left = [
            c for c in self.turn.calls.values()
            if c.status is CallStatus.RUNNING
            and not ((tool := self.ctx.tools.get(c.tool)) is not None and tool.idempotent)
        ]  # fmt: skip
        for call in left:
            _put_up(self, call, now)
        if left:
            await self.commit(None, left)
        return len(left)


def _record(loop: _Loop, records: list[apply.Record]) -> None:
    for op, event in records:
        loop.ops.append(op)
        loop.events.append(event)


def _put_up(loop: _Loop, call: CallState, now: float) -> None:
    """A call the last run left `running`, its tool not idempotent, waits for a review."""
    loop.ops.append(put_up_for_review(call, now))
    text = notice_text(call.id, call.tool, call.args, call.meta.get("process"))
    loop.ctx.log.warning("%s", text)
    loop.ctx.publish(Notice(at=now, level="warning", text=text))
