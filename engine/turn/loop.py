"""The canonical turn loop (react): inference, tool rounds, RESUME_TOOL_CALL, checkpoints.

    RunStart, [commit user_message] (a new turn; a resumed one: its replay, if any)
    loop: RESUME_TOOL_CALL
          StepStart, BeforeInference, LLM_CALL, AfterInference, StepEnd,
          BeforeToolExecute (per call; AfterToolExecute at once for a call the gate
          ends), commit assistant_turn_committed
          tool round (decisions applied as they arrive), AfterToolExecute,
          commit tool_results_committed
    RunEnd, commit run_finished (the turn ends, or waits: a decision starts a new run)

The phases are the seed's, in its order (tests/test_loop_seed.py records them). One
departure, on purpose: the gate runs before assistant_turn_committed, not after it, so
each call's gate answer, `running` included, is committed with the assistant turn, in
one transaction: a call is durably `running` before its tool starts, and a crash then
leaves an unknown outcome, never a silent double execution. How decisions reach the
calls is in `engine.turn.replay`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any

import anyio

from engine.decisions.deadline import stamp
from engine.decisions.inbox import already
from engine.domain.events import StepFinished, StepStarted, TextDelta
from engine.domain.messages import ConvMessage
from engine.domain.usage import Usage
from engine.lifecycle import CallStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.providers.base import AssistantAccumulator, ContextTooLong, ModelRequest, ProviderError
from engine.providers.base import TextDelta as ModelTextDelta
from engine.store import DiskFull, LeaseLost, Op
from engine.store import turns as rows
from engine.turn import breaks, compaction, endings, replay, spent
from engine.turn import gate as gates
from engine.turn.call import ANSWERED, NO_MESSAGE, PLACEHOLDER, CallState
from engine.turn.context import TurnContext
from engine.turn.conversation import HUGE, Conversation
from engine.turn.plugins import Gate, Phase, PhaseContext, StopRequest, earliest_deadline
from engine.turn.state import (
    Inference,
    TurnState,
    TurnStopped,
    calls_summary,
    message_summary,
    one_line,
)

Strategy = Callable[["TurnLoop"], Awaitable[None]]


class TurnLoop:
    """Drives one turn from its loop top to `waiting` or `done`."""

    def __init__(
        self, ctx: TurnContext, turn: TurnState, conv: Conversation, strategy: Strategy
    ) -> None:
        self.ctx, self.turn, self.conv, self.strategy = ctx, turn, conv, strategy
        self.ops: list[Op] = []
        self.events: list[Any] = []
        self.stop: StopRequest | None = None
        self.consecutive_errors = 0
        self.decided = anyio.Event()  # set by the runtime when a decision for us arrives
        self.pending_kwargs: dict[str, dict[str, Any]] = {}  # admitted calls of this round
        self.open_step: tuple[int, str, float] | None = None  # (id, kind, started) until it ends
        self.step_used = Usage()  # what the open step spent (its inference's tokens, cost)
        self.in_run = False  # between RunStart and RunEnd
        self.step_tools: list[str] | None = None  # what plugins left of the tools (None: all)
        self.breakable = True  # breakpoints pause it (not an embedding program's ToolRunner)
        self.provider = ctx.models.provider(turn.model)  # the model that answers the turn
        self.window = ctx.models.window(turn.model)  # and its context window

    # -- plumbing ---------------------------------------------------------------------------

    async def phase(self, phase: Phase, **kw: Any) -> list[Gate | None]:
        """Run every plugin listening at `phase`; remember a stop request, and the step's
        tools as the plugins left them (StepStart, BeforeInference)."""
        plugins = self.ctx.plugins_at(phase)
        if not plugins:
            return []
        offered = None
        if phase in (Phase.STEP_START, Phase.BEFORE_INFERENCE):
            offered = [t["name"] for t in self.step_schemas()]
            kw["tools"] = list(offered)  # the plugins' copy, to narrow
        ctx = PhaseContext(
            phase=phase,
            turn_id=self.turn.id,
            thread_id=self.turn.thread_id,
            round_index=self.turn.rounds,
            started_at=self.turn.started_at,
            now=self.ctx.clock(),
            consecutive_errors=self.consecutive_errors,
            **kw,
        )
        answers = [await p.on_phase(ctx) for p in plugins]
        if ctx.stop is not None and self.stop is None:
            self.stop = ctx.stop
        if offered is not None and ctx.tools != offered:
            self.step_tools = list(ctx.tools or ())
        return answers

    def append(self, msg: ConvMessage) -> None:
        op, event = self.conv.append(msg, self.turn.id, self.ctx.clock())
        self.ops.append(op)
        self.events.append(event)

    def answer(self, call: CallState) -> None:
        """Put a call's outcome (or its pending placeholder) into the conversation (a
        breakpoint's pause never goes there: it is made answered, engine/turn/breaks.py)."""
        self.append(call.message())
        call.has_message = PLACEHOLDER if call.status is CallStatus.SUSPENDED else ANSWERED

    async def commit(
        self, checkpoint: str | None, touched: Sequence[CallState] = (), *, urgent: bool = False
    ) -> None:
        """Write everything gathered since the last commit as one transaction (`urgent`:
        first in the writer's next batch, for a turn's admission)."""
        now = self.ctx.clock()
        before = [(call, call.written) for call in touched]
        for call in touched:
            if (row := call.row()) is not None:
                self.ops.append(row)
            self.events.extend(stamp(e, self.ctx.config.approvals, self.turn.group)
                               for e in call.events)  # fmt: skip
            call.events.clear()
            if call.status.terminal:  # a decision that arrived while it ran never applies
                replay.duplicates(self, call, self.ctx.decisions.ended(call), already(call), now)
                self.ops += self.ctx.coordinator.call_ended(call.id, already(call))
        if (row := self.turn.row_update(now)) is not None:
            self.ops.append(row)
        ops, events, self.ops, self.events = self.ops, self.events, [], []
        ops[:0] = self.ctx.coordinator.fence(self.turn.thread_id, self.turn.id)  # still ours
        try:  # handed to the writer, a checkpoint commits whole even if the turn is cancelled
            await self.ctx.commit(ops, events, checkpoint=checkpoint, turn_id=self.turn.id,
                                  urgent=urgent)  # fmt: skip
        except Exception:  # it failed: nothing was written, the next commit writes it all again
            for call, written in before:
                call.written = written
            self.turn.written = None
            raise

    def step_start(self, kind: str) -> int:
        """Open a step (one at a time: `step_end` closes it); returns its id."""
        step_id, at = self.ctx.coordinator.next_step_id(), self.ctx.clock()
        self.ctx.publish(
            StepStarted(
                at=at, thread_id=self.turn.thread_id, turn_id=self.turn.id, step_id=step_id,
                step_kind=kind,
            )
        )  # fmt: skip
        self.open_step, self.step_used = (step_id, kind, at), Usage()
        return step_id

    def step_end(self, status: str, summary: str) -> None:
        """Close the open step: its row goes into the next commit, its event with it, and
        what it spent into its day's usage."""
        if self.open_step is None:
            raise RuntimeError("step_end without an open step")
        (step_id, kind, started), self.open_step = self.open_step, None
        now, used, turn, upto = self.ctx.clock(), self.step_used, self.turn, self.conv.next_seq
        self.ops.append(rows.step_ended(step_id, turn.id, self.ctx.run_id, turn.rounds, kind,
                                        status, summary, started, now, used, upto))  # fmt: skip
        self.ops += spent.written(self.ctx, turn, used, now)
        self.events.append(
            StepFinished(
                at=now, thread_id=turn.thread_id, turn_id=turn.id, step_id=step_id,
                step_kind=kind, status=status, summary=summary, duration=now - started,
                input_tokens=used.input_tokens, output_tokens=used.output_tokens,
                cached_tokens=used.cached_tokens, cost=used.known_cost,
            )
        )  # fmt: skip

    async def count(self, acc: AssistantAccumulator) -> Usage:
        """What the open step's inference spent, priced by its model: the turn's totals and
        the step's row count it."""
        self.step_used = used = await spent.priced(self.ctx, self.turn.model, acc)
        self.turn.count(used)
        return used

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """From the loop top to waiting or done. Cancellation is handled by the caller."""
        try:
            await self.run_start()
            await replay.recover(self)
            await self.strategy(self)
        except anyio.get_cancelled_exc_class():
            raise
        except TurnStopped as cut:
            await self.finish(cut.stop.reason, cut.stop.detail)
        except (LeaseLost, DiskFull):  # another worker has the thread now, or the disk
            raise  # is full: write nothing more (the supervisor parks the turn)
        except Exception as exc:  # a failure ends the turn with `error`
            if isinstance(exc, ProviderError):  # the model's side: its message says how
                self.ctx.log.error("turn %s failed: %s", self.turn.id, exc)
                detail = str(exc)
            else:
                self.ctx.log.exception("turn %s failed", self.turn.id)
                detail = f"{type(exc).__name__}: {exc}"
            await self.finish(turn_lifecycle.ERROR, detail)

    async def run_start(self) -> None:
        """RunStart, once per run of the loop: a new turn's comes before its user message
        is committed (`open_turn`), a resumed turn's when it runs again."""
        if not self.in_run:
            self.in_run = True
            await self.phase(Phase.RUN_START)

    async def run_end(self) -> None:
        """RunEnd, closing the run's RunStart (one that ends a turn nothing was running,
        a cancel of a waiting turn, opens and closes a run of its own)."""
        await self.run_start()
        self.in_run = False
        await self.phase(Phase.RUN_END)

    async def before_inference(self) -> bool:
        """StepStart and BeforeInference, where plugins may narrow the step's tools; False
        when a plugin asked the turn to stop, or it pauses at a breakpoint (engine/turn/
        breaks.py: `finish_stopped` then makes it wait)."""
        if await breaks.before_inference(self):
            return False
        self.step_tools = None  # a new step offers every tool until a plugin says otherwise
        await self.phase(Phase.STEP_START)
        await self.phase(Phase.BEFORE_INFERENCE)
        if self.stop is None:  # a budget the next inference would pass stops the turn
            self.stop = await self.ctx.budgets.stop_before(self.turn, self.turn.last)
        return self.stop is None

    def step_schemas(self) -> list[dict[str, Any]]:
        """The tools this step offers the model: the registry's, less what plugins took
        out (a name the registry does not have adds nothing)."""
        schemas = self.ctx.tools.schemas()
        if self.step_tools is None:
            return schemas
        own = self.ctx.tools.canonical  # (the model sees wire names; plugins, tools' own)
        return [s for s in schemas if own(s["name"]) in self.step_tools]

    def conversation_request(self, with_tools: bool = True) -> ModelRequest:
        """The request react and direct send: the thread's conversation (and the tools),
        with the turn's instructions."""
        tools = self.step_schemas() if with_tools else []
        return ModelRequest(messages=self.view(), tools=tools, system=self.system())

    def view(self) -> list[ConvMessage]:
        """The thread's conversation as the model reads it (engine/turn/view.py)."""
        tokens = self.window.tokens  # (a window so small that half of it is under HUGE: every
        large = self.conv.huge if tokens and tokens // 2 >= HUGE else None  # entry is looked at)
        return self.conv.view(tokens, large)

    def system(self, more: str | None = None) -> str | None:
        """The system prompt: the turn's instructions, then `more` (a strategy's own)."""
        told = self.turn.instructions.text
        return "\n\n".join(p for p in (told, more) if p) or None

    async def infer(
        self,
        request: ModelRequest | None = None,
        *,
        tools: bool = True,
        kind: str = "inference",
        publish_text: bool = True,
        stop_when: Callable[[AssistantAccumulator], bool] | None = None,
    ) -> Inference:
        """LLM_CALL, AfterInference, StepEnd. `stop_when` may close the stream early.

        Without a `request`, the thread's conversation (`tools`: with the step's tools) is
        sent, compacted first when it would pass the model's window (engine/turn/
        compaction.py), and once more if the provider still says it is too long."""
        for call in self.turn.suspended():
            if call.has_message == NO_MESSAGE:
                self.answer(call)  # a pending placeholder, so the model knows it waits
        if request is not None:
            return await self._infer(request, kind, publish_text, stop_when)
        await compaction.fit(self)
        try:
            return await self._infer(self.conversation_request(tools), kind, publish_text,
                                     stop_when, conversation=True)  # fmt: skip
        except ContextTooLong as exc:  # its count, not our estimate: compact, then once more
            self.step_end("failed", one_line(str(exc), 200))
            await compaction.fit(self, force=True)
            return await self._infer(self.conversation_request(tools), kind, publish_text,
                                     stop_when, conversation=True)  # fmt: skip

    async def _infer(self, request: ModelRequest, kind: str, publish_text: bool,
                     stop_when: Callable[[AssistantAccumulator], bool] | None,
                     conversation: bool = False) -> Inference:  # fmt: skip
        window = self.window  # (no window known: nothing is measured)
        if window.tokens is None:
            estimated = 0
        elif conversation:  # from the sums the conversation keeps
            estimated = self.conv.request_tokens(window, request.system, request.tools)
        else:
            estimated = window.estimate(request.messages, request.system, request.tools)
        step_id = self.step_start(kind)
        acc, closed_early = AssistantAccumulator(), False
        deadline, stop = earliest_deadline(self.ctx.plugins, self.turn.started_at, self.ctx.clock)
        async with aclosing(self.provider.stream(request)) as stream:
            with anyio.CancelScope(deadline=deadline) as cut:  # the stream closes uncancelled
                async for event in stream:
                    acc.add(event)
                    if publish_text and isinstance(event, ModelTextDelta):
                        self.ctx.publish(
                            TextDelta(at=self.ctx.clock(), thread_id=self.turn.thread_id,
                                      turn_id=self.turn.id, text=event.text)
                        )  # fmt: skip
                    if stop_when is not None and stop_when(acc):
                        closed_early = True
                        break  # aclosing closes the provider's stream (and its HTTP response)
        if cut.cancelled_caught and stop is not None:
            raise TurnStopped(stop)
        window.learn(estimated, acc.input_tokens)  # the provider's count corrects ours
        self.turn.rounds += 1
        await self.count(acc)
        await self.phase(Phase.AFTER_INFERENCE)
        await self.phase(Phase.STEP_END)
        return Inference(acc, step_id, closed_early)

    async def commit_assistant(
        self, inf: Inference, assistant: ConvMessage, metas: list[dict[str, Any]] | None = None
    ) -> list[CallState]:
        """Append the answer, gate its calls (BeforeToolExecute), commit
        assistant_turn_committed; return the calls.

        A plugin's stop request (at AfterInference or StepEnd, or by a gate) ends the turn
        before any call starts, as the seed's post-inference terminate does: the calls left
        ungated and the admitted ones stay `new`, and the turn's end cancels them from there.
        """
        self.append(assistant)
        now = self.ctx.clock()
        new_calls = CallState.made(assistant, self.turn.id, self.turn.thread_id, inf.step_id,
                                   self.ctx.new_id, self.ctx.tools.canonical, metas, now)  # fmt: skip
        self.turn.add_calls(new_calls)
        self.step_end("succeeded", message_summary(assistant))
        pause = breaks.hold_calls(self, new_calls, inf.step_id)  # those held wait, ungated
        holds = {e["call_id"] for e in pause.args["calls"]} if pause is not None else set()
        admitted = []
        for call in new_calls:
            if self.stop is not None:
                break
            if call.id in holds:
                continue
            if (kwargs := await gates.admit(self, call)) is not None:
                admitted.append((call, kwargs))
        for call, kwargs in admitted if self.stop is None else ():
            call.move(CallStatus.RUNNING, self.ctx.clock())  # committed before the tool starts
            self.pending_kwargs[call.id] = kwargs
        await self.commit("assistant_turn_committed", [*new_calls, *([pause] if pause else [])])
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
        limiter: anyio.CapacityLimiter | None = None  # (made only where calls run side by side)
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
            assert limiter is not None
            async with limiter:
                await gates.execute(self, call, kwargs)
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
                for decision, call in await replay.take_decisions(self):
                    if call not in touched:
                        touched.append(call)
                    outstanding += 1
                    tg.start_soon(track, replay.replay_call, self, decision, call)

        runnable = [
            (c, self.pending_kwargs.pop(c.id)) for c in new_calls if c.id in self.pending_kwargs
        ]
        if len(runnable) == 1 and not self.turn.suspended():
            # One call and no suspended call a decision could be for: nothing runs beside
            # it, so it runs here, without a task group, a limiter or a decision watcher.
            await gates.execute(self, *runnable[0])
        elif runnable:
            limiter = anyio.CapacityLimiter(self.ctx.config.runtime.tool_concurrency)
            async with anyio.create_task_group() as tg:
                for call, kwargs in runnable:
                    outstanding += 1
                    tg.start_soon(track, run_one, call, kwargs)
                tg.start_soon(watch_decisions, tg)
        if (pause := breaks.answer(self, touched)) is not None:
            touched.append(pause)
        self.count_errors(touched)
        self.step_end("succeeded", calls_summary(new_calls))
        await self.commit("tool_results_committed", touched)

    def count_errors(self, calls: list[CallState]) -> None:
        for call in calls:
            if call.status is CallStatus.FAILED:
                self.consecutive_errors += 1
            elif call.status is CallStatus.SUCCEEDED:
                self.consecutive_errors = 0

    async def resume_tool_calls(self) -> None:
        """RESUME_TOOL_CALL, at the top of every strategy's loop (engine/turn/replay.py);
        a breakpoint's pause cancelled there ends the turn."""
        await replay.resume_tool_calls(self)
        if self.stop is not None and self.stop.reason == turn_lifecycle.CANCELLED:
            raise TurnStopped(self.stop)

    async def review_left(self) -> int:
        """What a one-off runtime does of a crash's leftovers (engine/turn/replay.py)."""
        return await replay.review_left(self)

    # -- endings (engine/turn/endings.py) ----------------------------------------------------

    async def reopen(self) -> None:
        await endings.reopen(self)

    async def finish_stopped(self) -> None:
        await endings.finish_stopped(self)

    async def finish_waiting(self) -> None:
        await endings.finish_waiting(self)

    async def finish(self, reason: str, detail: str | None = None) -> None:
        await endings.finish(self, reason, detail)
