"""ToolRunner: the iterator API for programs that embed agentdeck.

    runner = rt.tool_runner([ConvMessage(role="user", text="what time is it?")])
    async for message in runner:          # each iteration: one request, one message
        print(message.text)
    print(runner.status, runner.messages[-1].text)

The lifecycle is the seed's tool runner: each iteration sends a request and yields the
assistant message. When the consumer resumes, the message is appended to the state unless
the consumer changed the state during the iteration (`push_messages`,
`set_messages_params`); tool calls in the state's last message are always handled and
their results appended; the runner ends when there is nothing left to do. The state is the
SDK's message parameters (`RunnerParams`: messages, system, tools, max_tokens, model), and
`set_messages_params` replaces them whole, as the SDK's does.

Unlike the seed's runner, reaching `max_iterations` never leaves tool results executed but
unsent: the runner makes one last request without tools and records that it stopped.
Its turn and steps are recorded in execution.db like any turn, and its calls pass the same
gates: a suspended call shows in `pending` and is decided with `decide`. Its plugin phases
are a turn's too (RunStart when it opens, StepStart and BeforeInference before each
request, ...), so the room's stop policies apply: a plugin's stop ends the runner
`stopped`, with the plugin's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from engine.domain.decisions import Decision, PendingCall
from engine.domain.messages import ConvMessage, Message
from engine.domain.requests import Request
from engine.lifecycle import CallStatus, RunnerStatus, TurnStatus
from engine.lifecycle import runner as runner_lifecycle
from engine.lifecycle import turn as turn_lifecycle
from engine.providers.base import AssistantAccumulator, ModelRequest
from engine.tools import ToolRegistry
from engine.turn.context import TurnContext
from engine.turn.loop import TurnLoop
from engine.turn.state import Inference

if TYPE_CHECKING:
    from engine.turn.call import CallState


@dataclass
class RunnerParams:
    """What each of a runner's requests sends: the SDK's message parameters.

    `tools` chooses the room's tools to offer, each by name or as the schema the model is
    to see for it (its calls still run the room's tool of that name); None offers them all.
    A plugin may narrow them further for a step, and a call to a tool the step did not
    offer fails at the gate. `max_tokens` and `model` apply to these requests only (None:
    the provider's settings); the offline model ignores both.
    """

    messages: list[ConvMessage] = field(default_factory=list)
    system: str | None = None
    tools: list[str | dict[str, Any]] | None = None
    max_tokens: int | None = None
    model: str | None = None

    def check(self, registry: ToolRegistry) -> RunnerParams:
        """These parameters, if every tool they name is one of the room's (ValueError)."""
        for entry in self.tools or ():
            name = entry if isinstance(entry, str) else entry.get("name")
            if not isinstance(name, str) or registry.get(name) is None:
                raise ValueError(f"no tool {name!r} in this room; its tools: "
                                 f"{', '.join(registry.names())}")  # fmt: skip
        return self


class RunnerHost(Protocol):
    """What a runner needs of the runtime that made it: its turns' context, a new turn,
    decisions, and the routing of decisions to a loop it drives itself."""

    ctx: TurnContext

    async def open_turn(
        self, req: Request, strategy: str, *, user_message: bool = True
    ) -> TurnLoop: ...
    async def decide(self, decision: Decision) -> str: ...
    def listen(self, loop: TurnLoop) -> None: ...
    def unlisten(self, loop: TurnLoop) -> None: ...


class ToolRunner:
    """Async iterator over assistant messages, with the runtime's gates and truth layer."""

    def __init__(
        self,
        rt: RunnerHost,
        messages: list[ConvMessage],
        *,
        thread_id: str | None = None,
        system: str | None = None,
        max_iterations: int = 10,
        tools: list[str | dict[str, Any]] | None = None,
        max_tokens: int | None = None,
        model: str | None = None,
    ) -> None:
        self.rt = rt
        self.params = RunnerParams(list(messages), system, tools, max_tokens, model).check(
            rt.ctx.tools
        )
        self.max_iterations = max_iterations
        self.thread_id = thread_id or rt.ctx.new_id("runner")
        self.iterations = 0
        self.status = RunnerStatus.READY  # moved by `_move` only (engine/lifecycle/runner.py)
        self.stopped_reason: str | None = None
        self._loop: TurnLoop | None = None
        self._last: ConvMessage | None = None  # the message yielded this iteration
        self._mutated = False
        self._tool_response: list[ConvMessage] | None = None
        self._calls: list[CallState] = []

    @property
    def messages(self) -> list[ConvMessage]:
        """The state's messages (`params.messages`)."""
        return self.params.messages

    @messages.setter
    def messages(self, messages: list[ConvMessage]) -> None:
        self.params.messages = messages

    @property
    def system(self) -> str | None:
        return self.params.system

    # -- changing the state during an iteration ---------------------------------------------

    def push_messages(self, *messages: ConvMessage) -> None:
        """Append messages to the state; the yielded message will not be appended."""
        self.messages.extend(messages)
        self._changed()

    def set_messages_params(
        self,
        params: RunnerParams | list[ConvMessage] | Callable[[list[ConvMessage]], list[ConvMessage]],
    ) -> None:
        """Replace the parameters whole (`RunnerParams`; to change a part of them:
        `dataclasses.replace(runner.params, system=...)`), or only the messages: a list,
        or a function of the messages."""
        if isinstance(params, RunnerParams):
            checked = params.check(self.rt.ctx.tools)
            self.params = replace(checked, messages=list(checked.messages))
        else:
            self.messages = list(params(self.messages) if callable(params) else params)
        self._changed()

    def _changed(self) -> None:
        self._mutated = True
        self._tool_response = None  # computed from the old state: recompute when asked

    # -- tools --------------------------------------------------------------------------------

    async def generate_tool_response(self) -> list[ConvMessage] | None:
        """Run the tool calls of the state's last message (through the gates) and return
        their results, without changing the state. Computed once per iteration."""
        if self._tool_response is not None:
            return self._tool_response
        last = self._last if self._last is not None and not self._mutated else self._current()
        if last is None or last.role != "assistant" or not last.tool_calls or last.refusal:
            return None
        loop = await self._turn()
        if last is self._last and self._calls:
            calls = self._calls  # the calls of the message this iteration committed
        else:  # the consumer put this message in the state: record and gate its calls
            inf = Inference(AssistantAccumulator(), loop.step_start("pushed"))
            calls = await loop.commit_assistant(inf, last)
        await loop.tool_round(calls)
        self._tool_response = [c.message() for c in calls]
        return self._tool_response

    @property
    def pending(self) -> list[PendingCall]:
        """The runner's suspended calls, waiting for `decide`."""
        if self._loop is None:
            return []
        return [
            PendingCall(call_id=c.id, turn_id=c.turn_id, thread_id=c.thread_id, tool=c.tool,
                        args=c.args, reason=c.suspend_reason or "", since=c.updated_at,
                        awaiting=c.awaiting or "decision")
            for c in self._loop.turn.suspended()
        ]  # fmt: skip

    async def decide(self, decision: Decision) -> str:
        """Decide one of `pending`: the call is replayed now and its result joins the state.
        A runner that stopped `waiting` goes on when iterated again."""
        status = await self.rt.decide(decision)
        loop = await self._turn()
        if loop.turn.status is TurnStatus.WAITING:
            await loop.reopen()
            await loop.run_start()  # a new run of the turn, as a resumed turn's
            self.rt.listen(loop)  # decisions reach us again
            self._move(RunnerStatus.RUNNING)
            self._last = None
        before = {c.id: c.status for c in loop.turn.calls.values()}
        await loop.resume_tool_calls()
        if self._last is not None and self._last.tool_calls:
            self._tool_response = None  # mid-iteration: the tool response now has the result
            return status
        for call in loop.turn.calls.values():
            if before.get(call.id) is CallStatus.SUSPENDED and call.status.terminal:
                self.messages.append(call.message())
        return status

    # -- iterating ----------------------------------------------------------------------------

    def __aiter__(self) -> ToolRunner:
        return self

    async def __anext__(self) -> ConvMessage:
        if self.status not in (RunnerStatus.READY, RunnerStatus.RUNNING):  # ended, or waits
            raise StopAsyncIteration
        if self._last is not None:
            if not self._mutated:
                self.messages.append(self._last)
            last = self._current()
            if last is None or (last.role == "assistant" and (not last.tool_calls or last.refusal)):
                await self._end()  # nothing left to do
                raise StopAsyncIteration
            if last.role == "assistant":
                self.messages.extend(await self.generate_tool_response() or [])
        self._last, self._mutated, self._tool_response, self._calls = None, False, None, []
        with_tools = True
        if self.iterations >= self.max_iterations:
            if self._last_was_request():
                await self._end("max_iterations")
                raise StopAsyncIteration
            with_tools = False  # results are waiting: send them, then stop
            self.stopped_reason = "max_iterations"
        self._last = await self._request(with_tools)
        if self._last is None:  # a plugin stopped the turn before the request
            await self._end()
            raise StopAsyncIteration
        self.iterations += 1
        if not with_tools or self._stopping():
            self.messages.append(self._last)
            await self._end(None if self._stopping() else "max_iterations")
        return self._last

    async def until_done(self) -> ConvMessage | None:
        """Run to the end; return the last assistant message."""
        last = None
        async for message in self:
            last = message
        return last

    # -- internals ----------------------------------------------------------------------------

    def _current(self) -> ConvMessage | None:
        return self.messages[-1] if self.messages else None

    def _last_was_request(self) -> bool:
        last = self._current()
        return last is None or last.role == "assistant"

    async def _turn(self) -> TurnLoop:
        if self._loop is None:
            first_user = next((m.text for m in self.messages if m.role == "user"), "")
            message = Message(origin="invoke", sender="runner", thread_id=self.thread_id,
                              text=first_user)  # fmt: skip
            ctx = self.rt.ctx
            req = Request(ctx.new_id("t"), message, "chat", ctx.clock(), "runner")
            self._loop = await self.rt.open_turn(req, "runner", user_message=False)
            self._loop.breakable = False  # the program iterating it is where it pauses
            self.rt.listen(self._loop)  # decisions for our calls reach us
            for msg in self.messages:
                self._loop.append(msg)  # what the runner starts from is recorded too
            await self._loop.commit(None)
            self._move(RunnerStatus.RUNNING)
        return self._loop

    def _stopping(self) -> bool:
        return self._loop is not None and self._loop.stop is not None

    async def _request(self, with_tools: bool) -> ConvMessage | None:
        """One request and its answer, committed; None when a plugin asked the turn to stop
        at StepStart or BeforeInference, before it was sent."""
        loop = await self._turn()
        if not await loop.before_inference():
            return None
        p = self.params
        tools = self._step_tools(loop) if with_tools else []
        request = ModelRequest(messages=list(p.messages), tools=tools, system=p.system,
                               max_tokens=p.max_tokens, model=p.model)  # fmt: skip
        inf = await loop.infer(request)
        message = inf.acc.message()
        if not with_tools or message.refusal:  # a refusal stops without running tools
            message = message.model_copy(update={"tool_calls": []})
        self._calls = await loop.commit_assistant(inf, message)
        return message

    def _step_tools(self, loop: TurnLoop) -> list[dict[str, Any]]:
        """The tools this request offers: `params.tools` among those plugins left the step
        (all of them when None). They become the step's, so a call to another fails."""
        offered = loop.step_schemas()
        if self.params.tools is None:
            return offered
        left = {s["name"]: s for s in offered}
        chosen = [left.get(t) if isinstance(t, str) else t for t in self.params.tools]
        schemas = [s for s in chosen if s is not None and s["name"] in left]
        loop.step_tools = [loop.ctx.tools.canonical(s["name"]) for s in schemas]
        return schemas

    async def _end(self, stopped: str | None = None) -> None:
        loop = await self._turn()
        last = self._current()
        loop.turn.final_text = last.text if last is not None and last.role == "assistant" else None
        if loop.turn.status is not TurnStatus.RUNNING:
            return
        if loop.stop is not None:  # a plugin asked the turn to stop: it ends as asked
            self.rt.unlisten(loop)
            self._move(RunnerStatus.STOPPED, loop.stop.reason)
            await loop.finish_stopped()
            return
        if loop.turn.suspended():
            self._move(RunnerStatus.WAITING)
            await loop.finish_waiting()
            return  # stays registered: a decision wakes this runner, not a resume of its turn
        self.rt.unlisten(loop)
        if stopped:
            self._move(RunnerStatus.STOPPED, stopped)
            loop.turn.record["stopped"] = stopped
            await loop.finish(
                turn_lifecycle.stopped(stopped), f"reached {self.max_iterations} iterations"
            )
        else:
            self._move(RunnerStatus.DONE)
            await loop.finish(turn_lifecycle.NATURAL)

    async def aclose(self) -> None:
        """End the runner's turn where it stands (cancelled if it was still running)."""
        if self._loop is not None and self._loop.turn.status is TurnStatus.RUNNING:
            await self._loop.finish(turn_lifecycle.CANCELLED, "runner closed")
            self._move(RunnerStatus.STOPPED)

    def _move(self, dst: RunnerStatus, stopped_reason: str | None = None) -> None:
        """Take one legal step of the runner's lifecycle (IllegalTransition otherwise)."""
        self.status = runner_lifecycle.check(self.status, dst)
        if stopped_reason is not None:
            self.stopped_reason = stopped_reason

    def __repr__(self) -> str:
        return f"<ToolRunner {self.thread_id} {self.status} iterations={self.iterations}>"
