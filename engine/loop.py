"""The canonical turn loop (react): inference, tool rounds, RESUME_TOOL_CALL, checkpoints.

    RunStart, [commit user_message]
    loop: RESUME_TOOL_CALL
          StepStart, BeforeInference, LLM_CALL, AfterInference, StepEnd,
          BeforeToolExecute (per call), commit assistant_turn_committed
          tool round (decisions applied as they arrive), AfterToolExecute,
          commit tool_results_committed
    RunEnd, commit run_finished

Each call's gate answer is committed with the assistant turn, so a call is durably
`running` before its tool starts: a crash then leaves an unknown outcome, never a
silent double execution.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from engine import calls as callmod
from engine.calls import ANSWERED, NO_MESSAGE, PLACEHOLDER, CallState
from engine.decisions import Decision, Rule
from engine.events import DecisionRecorded, StepFinished, StepStarted, TextDelta, TurnChanged
from engine.inbox import already
from engine.lifecycle import CallStatus, TurnStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.messages import ConvMessage
from engine.plugins import Gate, Phase, PhaseContext, StopRequest
from engine.providers.base import AssistantAccumulator, ModelRequest, ProviderError
from engine.providers.base import TextDelta as ModelTextDelta
from engine.store import Op

if TYPE_CHECKING:
    from engine.conversation import Conversation
    from engine.runtime import Runtime

SUMMARY_NAMES = 3  # calls a round's step summary names one by one; more are counted


@dataclass
class TurnState:
    """One turn as the loop drives it."""

    id: str
    thread_id: str
    status: TurnStatus
    started_at: float
    strategy: str = "react"
    reason: str | None = None
    detail: str | None = None
    rounds: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    final_text: str | None = None
    group: str = "chat"
    record: dict[str, Any] = field(default_factory=dict)  # strategy data, e.g. tool_logs
    calls: dict[str, CallState] = field(default_factory=dict)
    # Calls not yet seen settled, so that suspended() costs the same late in a long turn.
    _open: dict[str, CallState] = field(default_factory=dict, repr=False)
    written: tuple[Any, ...] | None = field(default=None, repr=False)  # the row as last written

    def add_calls(self, calls: list[CallState]) -> None:
        for call in calls:
            self.calls[call.id] = call
            if not call.status.terminal:
                self._open[call.id] = call

    def suspended(self) -> list[CallState]:
        settled = [i for i, c in self._open.items() if c.status.terminal]
        for call_id in settled:
            del self._open[call_id]
        return [c for c in self._open.values() if c.status is CallStatus.SUSPENDED]

    def row_update(self, at: float) -> Op | None:
        """The turn's row, when it changed since it was last written (a tool round's
        checkpoint changes nothing in it)."""
        fields = (
            self.status.value, self.reason, self.detail, self.rounds, self.input_tokens,
            self.output_tokens, self.final_text, json.dumps(self.record),
        )  # fmt: skip
        if fields == self.written:
            return None
        self.written = fields
        return (
            "UPDATE turns SET status=?, reason=?, detail=?, rounds=?, input_tokens=?,"
            " output_tokens=?, final_text=?, record=?, updated_at=?, ended_at=? WHERE id=?",
            (*fields, at, at if self.status is TurnStatus.DONE else None, self.id),
        )


class TurnStopped(Exception):
    """A plugin's deadline passed while the model was answering: the turn ends as asked."""

    def __init__(self, stop: StopRequest) -> None:
        super().__init__(stop.detail)
        self.stop = stop


@dataclass
class Inference:
    """One model call's outcome, before its answer is committed."""

    acc: AssistantAccumulator
    step_id: int  # the step it opened, which committing the answer ends
    closed_early: bool = False


class TurnLoop:
    """Drives one turn from its loop top to `waiting` or `done`."""

    def __init__(self, rt: Runtime, turn: TurnState, conv: Conversation) -> None:
        self.rt, self.turn, self.conv = rt, turn, conv
        self.ops: list[Op] = []
        self.events: list[Any] = []
        self.stop: StopRequest | None = None
        self.consecutive_errors = 0
        self.decided = anyio.Event()  # set by the runtime when a decision for us arrives
        self.pending_kwargs: dict[str, dict[str, Any]] = {}  # admitted calls of this round
        self.open_step: tuple[int, str, float] | None = None  # (id, kind, started) until it ends

    # -- plumbing ---------------------------------------------------------------------------

    async def phase(self, phase: Phase, **kw: Any) -> list[Gate | None]:
        """Run every plugin listening at `phase`; remember a stop request."""
        plugins = self.rt.plugins_at(phase)
        if not plugins:
            return []
        ctx = PhaseContext(
            phase=phase,
            turn_id=self.turn.id,
            thread_id=self.turn.thread_id,
            round_index=self.turn.rounds,
            started_at=self.turn.started_at,
            now=self.rt.clock(),
            consecutive_errors=self.consecutive_errors,
            **kw,
        )
        answers = [await p.on_phase(ctx) for p in plugins]
        if ctx.stop is not None and self.stop is None:
            self.stop = ctx.stop
        return answers

    def append(self, msg: ConvMessage) -> None:
        op, event = self.conv.append(msg, self.turn.id, self.rt.clock())
        self.ops.append(op)
        self.events.append(event)

    def answer(self, call: CallState) -> None:
        """Put a call's outcome (or its pending placeholder) into the conversation."""
        self.append(call.message())
        call.has_message = PLACEHOLDER if call.status is CallStatus.SUSPENDED else ANSWERED

    async def commit(self, checkpoint: str | None, touched: list[CallState] = ()) -> None:
        """Write everything gathered since the last commit as one transaction."""
        now = self.rt.clock()
        before = [(call, call.written) for call in touched]
        for call in touched:
            if (row := call.row()) is not None:
                self.ops.append(row)
            self.events.extend(call.events)
            call.events.clear()
            if call.status.terminal:  # a decision that arrived while it ran never applies
                self._duplicates(call, self.rt.decisions.ended(call), already(call), now)
        if (row := self.turn.row_update(now)) is not None:
            self.ops.append(row)
        ops, events, self.ops, self.events = self.ops, self.events, [], []
        try:
            with anyio.CancelScope(shield=True):  # a checkpoint is written whole or not at all
                await self.rt.commit(ops, events, checkpoint=checkpoint, turn_id=self.turn.id)
        except BaseException:  # nothing was written: the next commit writes it all again
            for call, written in before:
                call.written = written
            self.turn.written = None
            raise

    def step_start(self, kind: str) -> int:
        """Open a step (one at a time: `step_end` closes it); returns its id."""
        step_id, at = self.rt.next_step_id(), self.rt.clock()
        self.rt.publish(
            StepStarted(
                at=at, thread_id=self.turn.thread_id, turn_id=self.turn.id, step_id=step_id,
                step_kind=kind,
            )
        )  # fmt: skip
        self.open_step = (step_id, kind, at)
        return step_id

    def step_end(self, status: str, summary: str, **usage: int) -> None:
        """Close the open step: its row goes into the next commit, its event with it."""
        if self.open_step is None:
            raise RuntimeError("step_end without an open step")
        (step_id, kind, started), self.open_step = self.open_step, None
        now = self.rt.clock()
        self.ops.append(
            (
                "INSERT INTO steps(id, turn_id, run_id, idx, kind, status, summary, started_at,"
                " ended_at) VALUES (?,?,?,?,?,?,?,?,?)",
                (step_id, self.turn.id, self.rt.run_id, self.turn.rounds, kind, status,
                 summary, started, now),
            )
        )  # fmt: skip
        self.events.append(
            StepFinished(
                at=now, thread_id=self.turn.thread_id, turn_id=self.turn.id, step_id=step_id,
                step_kind=kind, status=status, summary=summary, duration=now - started, **usage,
            )
        )  # fmt: skip

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """From the loop top to waiting or done. Cancellation is handled by the caller."""
        from engine.strategies import strategy_for

        try:
            run_strategy = strategy_for(self.turn.strategy)
            await self.phase(Phase.RUN_START)
            await self.recover()
            await run_strategy(self)
        except anyio.get_cancelled_exc_class():
            raise
        except TurnStopped as cut:
            await self.finish(cut.stop.reason, cut.stop.detail)
        except Exception as exc:  # a failure ends the turn with `error`
            if isinstance(exc, ProviderError):  # the model's side: its message says how
                self.rt.log.error("turn %s failed: %s", self.turn.id, exc)
                detail = str(exc)
            else:
                self.rt.log.exception("turn %s failed", self.turn.id)
                detail = f"{type(exc).__name__}: {exc}"
            await self.finish(turn_lifecycle.ERROR, detail)

    async def before_inference(self) -> bool:
        """StepStart and BeforeInference; False when a plugin asked the turn to stop."""
        await self.phase(Phase.STEP_START)
        await self.phase(Phase.BEFORE_INFERENCE)
        return self.stop is None

    def conversation_request(self, with_tools: bool = True) -> ModelRequest:
        """The request react and direct send: the thread's conversation (and the tools)."""
        tools = self.rt.tools.schemas() if with_tools else []
        return ModelRequest(messages=list(self.conv.messages), tools=tools)

    async def infer(
        self,
        request: ModelRequest | None = None,
        *,
        kind: str = "inference",
        publish_text: bool = True,
        stop_when: Callable[[AssistantAccumulator], bool] | None = None,
    ) -> Inference:
        """LLM_CALL, AfterInference, StepEnd. `stop_when` may close the stream early."""
        for call in self.turn.suspended():
            if call.has_message == NO_MESSAGE:
                self.answer(call)  # a pending placeholder, so the model knows it waits
        request = request or self.conversation_request()
        step_id = self.step_start(kind)
        acc, closed_early = AssistantAccumulator(), False
        deadline, stop = self.deadline()
        async with aclosing(self.rt.provider.stream(request)) as stream:
            with anyio.CancelScope(deadline=deadline) as cut:  # the stream closes uncancelled
                async for event in stream:
                    acc.add(event)
                    if publish_text and isinstance(event, ModelTextDelta):
                        self.rt.publish(
                            TextDelta(at=self.rt.clock(), thread_id=self.turn.thread_id,
                                      turn_id=self.turn.id, text=event.text)
                        )  # fmt: skip
                    if stop_when is not None and stop_when(acc):
                        closed_early = True
                        break  # aclosing closes the provider's stream (and its HTTP response)
        if cut.cancelled_caught and stop is not None:
            raise TurnStopped(stop)
        self.turn.rounds += 1
        self.turn.input_tokens += acc.input_tokens
        self.turn.output_tokens += acc.output_tokens
        await self.phase(Phase.AFTER_INFERENCE)
        await self.phase(Phase.STEP_END)
        return Inference(acc, step_id, closed_early)

    def deadline(self) -> tuple[float, StopRequest | None]:
        """The earliest deadline a plugin gives the turn, on anyio's clock (inf: none)."""
        found = [d for p in self.rt.plugins if (d := p.turn_deadline(self.turn.started_at))]
        if not found:
            return math.inf, None
        at, stop = min(found, key=lambda d: d[0])
        return anyio.current_time() + (at - self.rt.clock()), stop

    async def commit_assistant(
        self, inf: Inference, assistant: ConvMessage, metas: list[dict[str, Any]] | None = None
    ) -> list[CallState]:
        """Append the answer, gate its calls (BeforeToolExecute), commit
        assistant_turn_committed; return the calls."""
        self.append(assistant)
        now = self.rt.clock()
        new_calls = [
            CallState(
                id=self.rt.new_id("c"), model_call_id=tc.id or f"call_{i}", turn_id=self.turn.id,
                thread_id=self.turn.thread_id, step_id=inf.step_id, idx=i, tool=tc.name,
                args=tc.arguments, meta=metas[i] if metas else {}, created_at=now, updated_at=now,
            )
            for i, tc in enumerate(assistant.tool_calls)
        ]  # fmt: skip
        self.turn.add_calls(new_calls)
        self.step_end("succeeded", _summary(assistant), input_tokens=inf.acc.input_tokens,
                      output_tokens=inf.acc.output_tokens)  # fmt: skip
        for call in new_calls:
            kwargs = await callmod.admit(self, call)
            if kwargs is not None:
                self.pending_kwargs[call.id] = kwargs
        await self.commit("assistant_turn_committed", new_calls)
        return new_calls

    async def answered(self, assistant: ConvMessage) -> None:
        """The model answered without calls: the turn ends, or waits while a call does."""
        self.turn.final_text = assistant.text
        if self.turn.suspended():
            return await self.finish_waiting()
        await self.finish(turn_lifecycle.NATURAL, "refusal" if assistant.refusal else None)

    async def tool_round(self, new_calls: list[CallState]) -> None:
        """Run the round's admitted calls concurrently; apply decisions as they arrive."""
        self.step_start("tool_round")
        limiter = anyio.CapacityLimiter(self.rt.config.runtime.tool_concurrency)
        touched: list[CallState] = list(new_calls)
        outstanding = 0

        async def track(work: Any, *args: Any) -> None:
            nonlocal outstanding
            try:
                await work(*args)
            finally:
                outstanding -= 1
                if outstanding == 0:
                    self.decided.set()  # wake the watcher so it sees the round is over

        async def run_one(call: CallState, kwargs: dict[str, Any]) -> None:
            async with limiter:
                await callmod.execute(self, call, kwargs)
            if call.status is CallStatus.SUSPENDED:
                self.decided.set()  # a decision may already be queued for it

        async def watch_decisions(tg: Any) -> None:
            """Stream mode: a decision that arrives while tools run is applied at once."""
            nonlocal outstanding
            while True:
                await self.decided.wait()
                self.decided = anyio.Event()
                if outstanding == 0:
                    return
                for decision, call in await self._take_decisions():
                    if call not in touched:
                        touched.append(call)
                    outstanding += 1
                    tg.start_soon(track, self._replay, decision, call)

        runnable = [
            (c, self.pending_kwargs.pop(c.id)) for c in new_calls if c.id in self.pending_kwargs
        ]
        if len(runnable) == 1 and not self.turn.suspended():
            # One call and no suspended call a decision could be for: nothing runs beside
            # it, so it runs here, without a task group, a limiter or a decision watcher.
            await callmod.execute(self, *runnable[0])
        elif runnable:
            async with anyio.create_task_group() as tg:
                for call, kwargs in runnable:
                    outstanding += 1
                    tg.start_soon(track, run_one, call, kwargs)
                tg.start_soon(watch_decisions, tg)
        for call in touched:
            if call.status.terminal and call.has_message != ANSWERED:
                self.answer(call)
        self._count_errors(touched)
        self.step_end("succeeded", _calls_summary(new_calls))
        await self.commit("tool_results_committed", touched)

    async def resume_tool_calls(self) -> None:
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
        self.step_end("succeeded", _calls_summary(calls))
        await self.commit("tool_results_committed", calls)

    async def _take_decisions(self) -> list[tuple[Decision, CallState]]:
        """Match queued decisions to our suspended calls; commit `resuming` + the decision."""
        taken = self.rt.decisions.take(self.turn.suspended())
        if not taken:
            return []
        now = self.rt.clock()
        for decision, call in taken:
            call.move(CallStatus.RESUMING, now, decision_id=decision.id)
            self.ops.append(
                (
                    "UPDATE decisions SET status='applied', applied_at=? WHERE id=?",
                    (now, decision.id),
                )
            )
            self.events.append(
                DecisionRecorded(at=now, thread_id=call.thread_id, turn_id=call.turn_id,
                                 decision_id=decision.id, call_id=call.id,
                                 action=decision.action, status="applied", reason=decision.reason)
            )  # fmt: skip
            rest = self.rt.decisions.drop_rest(call.id)
            self._duplicates(call, rest, f"call already decided by {decision.id}", now)
            if decision.remember:
                rule = Rule(
                    tool=call.tool, effect="allow" if decision.action == "resume" else "deny",
                    scope=decision.remember, thread_id=call.thread_id,
                )  # fmt: skip
                self.rt.rules.append(rule)
                self.ops.append(
                    ("INSERT INTO rules(tool, effect, scope, thread_id, decision_id, created_at)"
                     " VALUES (?,?,?,?,?,?)",
                     (rule.tool, rule.effect, rule.scope, rule.thread_id, decision.id, now))
                )  # fmt: skip
        await self.commit(None, [call for _, call in taken])  # `resuming` is durable first
        return taken

    def _duplicates(self, call: CallState, late: list[Decision], note: str, now: float) -> None:
        """Record decisions that came too late for `call` as duplicates."""
        for dup in late:
            self.ops.append(
                ("UPDATE decisions SET status='duplicate', note=? WHERE id=?", (note, dup.id))
            )
            self.events.append(  # its operator learns which decision won
                DecisionRecorded(at=now, thread_id=call.thread_id, turn_id=call.turn_id,
                                 decision_id=dup.id, call_id=call.id, action=dup.action,
                                 status="duplicate", reason=dup.reason, note=note)
            )  # fmt: skip

    async def _replay(self, decision: Decision, call: CallState) -> None:
        """Carry out a committed decision on a `resuming` call."""
        now = self.rt.clock()
        if decision.action == "cancel":
            call.move(CallStatus.CANCELLED, now, error=decision.denial_text())
            return
        if decision.use_result:  # the operator's text goes where a tool's would: masked, cut
            text = decision.result if isinstance(decision.result, str) else _json(decision.result)
            call.move(CallStatus.SUCCEEDED, now, result=callmod.cleaner(self)(text), error=None)
            return
        if decision.args is not None:
            call.args = decision.args
        kwargs = await callmod.admit(self, call, approved=True)
        if kwargs is not None:
            await self.commit(None, [call])  # durably `running` first: never run twice
            await callmod.execute(self, call, kwargs)

    async def recover(self) -> None:
        """After a crash: settle calls the last run left `new`, `running` or `resuming`."""
        orphans = [
            c for c in self.turn.calls.values()
            if c.status in (CallStatus.NEW, CallStatus.RUNNING, CallStatus.RESUMING)
        ]  # fmt: skip
        if not orphans:
            return
        self.step_start("replay")
        now = self.rt.clock()
        async with anyio.create_task_group() as tg:
            for call in orphans:
                tool = self.rt.tools.get(call.tool)
                if call.status is CallStatus.RESUMING:
                    decision = await self.rt.decisions.load(call.decision_id)
                    tg.start_soon(self._replay, decision, call)
                elif call.status is CallStatus.NEW or (tool is not None and tool.idempotent):
                    kwargs = await callmod.admit(self, call) if call.status is CallStatus.NEW else (
                        tool.validate(call.args) if tool else None)  # fmt: skip
                    if kwargs is not None:
                        tg.start_soon(callmod.execute, self, call, kwargs)
                else:
                    call.move(CallStatus.FAILED, now, error=(
                        "outcome unknown: agentdeck stopped while this call was running; "
                        "it was not run again because it is not idempotent"))  # fmt: skip
        for call in orphans:
            if call.status.terminal and call.has_message != ANSWERED:
                self.answer(call)
        self.step_end("succeeded", "recovered " + _calls_summary(orphans))
        await self.commit("tool_results_committed", orphans)

    def _count_errors(self, calls: list[CallState]) -> None:
        for call in calls:
            if call.status is CallStatus.FAILED:
                self.consecutive_errors += 1
            elif call.status is CallStatus.SUCCEEDED:
                self.consecutive_errors = 0

    # -- endings ----------------------------------------------------------------------------

    async def reopen(self) -> None:
        """A waiting turn runs again (a decision arrived): `waiting -> running`, committed."""
        self._set(TurnStatus.RUNNING, None, None)
        await self.commit(None)

    async def finish_waiting(self) -> None:
        """Every outcome is suspended: the turn waits for a decision."""
        self._set(TurnStatus.WAITING, turn_lifecycle.SUSPENDED, None)
        await self.phase(Phase.RUN_END)
        await self.commit("run_finished")

    async def finish(self, reason: str, detail: str | None = None) -> None:
        """End the turn `done`; an open step ends with it, and open calls are cancelled
        and answered, so nothing dangles."""
        now = self.rt.clock()
        if self.open_step is not None:  # an error or a cancel cut the step short
            status = "cancelled" if reason == turn_lifecycle.CANCELLED else "failed"
            self.step_end(status, _one_line(detail or reason, 200))
        calls = list(self.turn.calls.values())
        for call in calls:
            if call.status is CallStatus.NEW:
                call.move(CallStatus.RUNNING, now)
            if not call.status.terminal:
                call.move(CallStatus.CANCELLED, now, error=f"turn ended: {reason}")
            if call.has_message != ANSWERED:
                self.answer(call)
        self._set(TurnStatus.DONE, reason, detail)
        await self.phase(Phase.RUN_END)
        await self.commit("run_finished", calls)

    def _set(self, status: TurnStatus, reason: str, detail: str | None) -> None:
        turn_lifecycle.check(self.turn.status, status)
        self.turn.status, self.turn.reason, self.turn.detail = status, reason, detail
        self.events.append(
            TurnChanged(at=self.rt.clock(), thread_id=self.turn.thread_id, turn_id=self.turn.id,
                        status=status.value, reason=reason, detail=detail)
        )  # fmt: skip


def _json(value: Any) -> str:
    return json.dumps(value, default=str)


def _calls_summary(calls: list[CallState]) -> str:
    """A round's calls for a one-line step summary: each named while there are few
    ("shell suspended, calc succeeded"), counted by state when there are many."""
    if len(calls) <= SUMMARY_NAMES:
        return ", ".join(f"{c.tool} {c.status.value}" for c in calls)
    counts = Counter(c.status.value for c in calls)
    return f"{len(calls)} calls: " + ", ".join(f"{n} {status}" for status, n in counts.items())


def _summary(msg: ConvMessage) -> str:
    if msg.tool_calls:
        return "calls " + ", ".join(c.name for c in msg.tool_calls)
    return _one_line(msg.text, 80)


def _one_line(text: str, limit: int) -> str:
    """`text` on one line, its first `limit` characters and "…" when it is longer."""
    text = " ".join(text.split())
    return text[:limit] + ("…" if len(text) > limit else "")
