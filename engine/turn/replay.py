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

from engine.decisions import apply
from engine.decisions.binding import refusal
from engine.decisions.review import notice_text, put_up_for_review
from engine.domain.decisions import Decision
from engine.domain.events import Notice
from engine.lifecycle import CallStatus
from engine.store import rules as ruled
from engine.turn import breaks
from engine.turn import gate as gates
from engine.turn.call import CallState
from engine.turn.plugins import Phase
from engine.turn.state import TurnState, calls_summary


class Site(gates.Site, breaks.Site, Protocol):
    """What the replay needs of the turn's loop (engine/turn/loop.py): a gate's site, and
    the turn, its events, its conversation, its commits and its steps."""

    turn: TurnState
    events: list[Any]

    def answer(self, call: CallState) -> None: ...
    async def commit(self, checkpoint: str | None, touched: Sequence[CallState] = ...) -> None: ...
    def step_start(self, kind: str) -> int: ...
    def step_end(self, status: str, summary: str) -> None: ...
    def count_errors(self, calls: list[CallState]) -> None: ...


async def resume_tool_calls(loop: Site) -> None:
    """RESUME_TOOL_CALL: apply queued decisions to suspended calls and replay them."""
    taken = await take_decisions(loop)
    if not taken:
        return
    loop.step_start("replay")
    async with anyio.create_task_group() as tg:
        for decision, call in taken:
            tg.start_soon(replay_call, loop, decision, call)
    calls = [call for _, call in taken]
    calls += breaks.released(loop.turn, calls)  # what a breakpoint's pause held, gone on
    if (pause := breaks.answer(loop, calls)) is not None:
        calls.append(pause)
    loop.count_errors(calls)
    loop.step_end("succeeded", calls_summary(calls))
    await loop.commit("tool_results_committed", calls)


async def take_decisions(loop: Site) -> list[tuple[Decision, CallState]]:
    """Match queued decisions to our suspended calls; commit `resuming` + the decision."""
    taken, refused = loop.ctx.decisions.take(loop.turn.suspended(), apply.unbound)
    now = loop.ctx.clock()
    for decision, call, why in refused:
        _record(loop, [apply.refused(decision, call, why, now)])
    if not taken:
        if refused:
            await loop.commit(None)
        return []
    rule_ids = [await loop.ctx.new_rule_id() for decision, _ in taken if decision.remember]
    for decision, call in taken:
        _record(loop, [apply.applied(decision, call, now)])
        rest = loop.ctx.decisions.drop_rest(call.id)
        duplicates(loop, call, rest, f"call already decided by {decision.id}", now)
        if decision.remember:  # a rule for the arguments it decided (edited or not)
            args = call.args if decision.args is None else decision.args
            rule = loop.ctx.rules.remembered(decision, call.tool, args, call.thread_id, now,
                                             rule_ids.pop(0))  # fmt: skip
            loop.ops += [ruled.made(rule), *loop.ctx.coordinator.rules_changed()]
    await loop.commit(None, [call for _, call in taken])  # `resuming` is durable first
    return taken


def duplicates(loop: Site, call: CallState, late: list[Decision], note: str, now: float) -> None:
    """Record decisions that came too late for `call` as duplicates."""
    _record(loop, apply.duplicates(call, late, note, now))


async def replay_call(loop: Site, decision: Decision, call: CallState) -> None:
    """Carry out a committed decision on a `resuming` call."""
    if breaks.is_pause(call):
        return await _go_on(loop, decision, call)
    carried = apply.carry_out(decision, call, loop.ctx.clock(), gates.cleaner(loop))
    if carried != "run":
        if carried != "ended":  # refused: nothing ran, the call waits again
            _record(loop, [carried])
        return
    kwargs = await gates.admit(loop, call, approved=True)
    if kwargs is not None:
        call.move(CallStatus.RUNNING, loop.ctx.clock())
        await loop.commit(None, [call])  # durably `running` first: never run twice
        await gates.execute(loop, call, kwargs)


async def _go_on(loop: Site, decision: Decision, pause: CallState) -> None:
    """Carry out a committed decision on a breakpoint's pause (engine/turn/breaks.py): the
    calls it held pass the gate now, as any new call does, and run; refused (not bound to
    what was shown, or an edit of what cannot change), it waits again."""
    now = loop.ctx.clock()
    why = refusal(decision, pause.args) or breaks.carry_out(
        loop, decision, pause, gates.cleaner(loop)
    )
    if why is not None:
        pause.move(CallStatus.SUSPENDED, now, decision_id=None, awaiting="breakpoint")
        _record(loop, [apply.refused(decision, pause, why, now)])
        return
    held = [c for c in breaks.released(loop.turn, [pause]) if c.status is CallStatus.NEW]
    if not held or pause.status is CallStatus.CANCELLED:  # (a cancel: the turn's end cancels them)
        return
    loop.step_tools = None  # (the step that offered them is over: every tool is offered)
    runs = [(c, kwargs) for c in held if (kwargs := await gates.admit(loop, c)) is not None]
    for call, _ in runs:
        call.move(CallStatus.RUNNING, now)
    await loop.commit(None, [pause, *held])  # durably `running` first: never run twice
    async with anyio.create_task_group() as tg:
        for call, kwargs in runs:
            tg.start_soon(gates.execute, loop, call, kwargs)


async def recover(loop: Site) -> None:
    """After a crash: settle calls the last run left `new`, `running` or `resuming`.

    A `new` call was never gated (its turn stopped, or the run died, first): the gate
    decides now, and one it admits is committed `running` before its tool starts. A
    `running` one ran with its outcome lost: run again if its tool is idempotent, else
    suspended for an operator's review (engine.decisions.review): never run again unasked. A
    `resuming` one has a committed decision: replayed.
    """
    holds = breaks.held(loop.turn)  # a breakpoint's pause holds these: they wait for it
    orphans = [
        c for c in loop.turn.calls.values()
        if c.status in (CallStatus.NEW, CallStatus.RUNNING, CallStatus.RESUMING)
        and c.id not in holds
    ]  # fmt: skip
    if not orphans:
        return
    loop.step_start("replay")
    now = loop.ctx.clock()
    runs: list[tuple[CallState, dict[str, Any]]] = []
    admitted = False
    for call in orphans:
        tool = loop.ctx.tools.get(call.tool)
        if call.status is CallStatus.NEW:
            if (kwargs := await gates.admit(loop, call)) is not None:
                call.move(CallStatus.RUNNING, now)
                runs.append((call, kwargs))
                admitted = True
        elif call.status is CallStatus.RUNNING and tool is not None and tool.idempotent:
            runs.append((call, tool.validate(call.args)))
        elif call.status is CallStatus.RUNNING:
            _put_up(loop, call, now)
            await loop.phase(Phase.AFTER_TOOL_EXECUTE, tool=call.tool, args=call.args,
                             outcome=call.status.value)  # fmt: skip
    if admitted:  # durably `running` before its tool starts: never run twice
        await loop.commit(None, orphans)
    async with anyio.create_task_group() as tg:
        for call in orphans:
            if call.status is CallStatus.RESUMING:
                decision = await loop.ctx.decisions.load(call.decision_id)
                tg.start_soon(replay_call, loop, decision, call)
        for call, kwargs in runs:
            tg.start_soon(gates.execute, loop, call, kwargs)
    orphans += [c for c in breaks.released(loop.turn, orphans) if c not in orphans]
    if (pause := breaks.answer(loop, orphans)) is not None:
        orphans.append(pause)
    loop.step_end("succeeded", "recovered " + calls_summary(orphans))
    await loop.commit("tool_results_committed", orphans)


async def review_left(loop: Site) -> int:
    """A one-off runtime's part of `recover` (`agentdeck review`, `decide`, opening a
    room nobody owns): the calls the last run left `running` whose tool is not
    idempotent wait for a review now, and nothing runs; the rest of the recovery is
    left to the runtime that resumes the turn. Returns how many were put up."""
    now = loop.ctx.clock()
    left = [
        c for c in loop.turn.calls.values()
        if c.status is CallStatus.RUNNING
        and not ((tool := loop.ctx.tools.get(c.tool)) is not None and tool.idempotent)
    ]  # fmt: skip
    for call in left:
        _put_up(loop, call, now)
    if left:
        await loop.commit(None, left)
    return len(left)


def _record(loop: Site, records: list[apply.Record]) -> None:
    for op, event in records:
        loop.ops.append(op)
        loop.events.append(event)


def _put_up(loop: Site, call: CallState, now: float) -> None:
    """A call the last run left `running`, its tool not idempotent, waits for a review."""
    loop.ops.append(put_up_for_review(call, now))
    text = notice_text(call.id, call.tool, call.args, call.meta.get("process"))
    loop.ctx.log.warning("%s", text)
    loop.ctx.publish(Notice(at=now, level="warning", text=text))
