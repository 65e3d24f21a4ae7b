"""A call at the gate and in execution: BeforeToolExecute, the tool run, AfterToolExecute.

`admit` decides whether a `new` or `resuming` call runs, waits for a decision or fails
(unknown tool, unusable arguments, a block); `execute` runs an admitted call within its
time limit and applies its result. Every call passes both phases, whichever ends it.
Both work on a `Site`: the turn the call belongs to, as far as they need it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol

import anyio

from engine.lifecycle import CallStatus
from engine.providers.base import parse_arguments
from engine.shell.read import prepare, read_ahead
from engine.store import Op
from engine.store import rules as ruled
from engine.store import turns as rows
from engine.tools import ToolArgsError, ToolContext, cut_to
from engine.tools.redact import Secrets
from engine.turn.call import CallState
from engine.turn.context import TurnContext
from engine.turn.output import OutputTap
from engine.turn.plugins import Gate, Phase
from engine.turn.recorded import is_replay, match
from engine.turn.recorded import result as recorded_result
from engine.turn.state import TurnState


class Site(Protocol):
    """Where a call is admitted and run: its turn's context, plugin phases, the tools
    its step offered (None: all), and the ops its next commit writes."""

    ctx: TurnContext
    turn: TurnState
    step_tools: list[str] | None
    ops: list[Op]

    async def phase(self, phase: Phase, **kw: Any) -> list[Gate | None]: ...


async def admit(loop: Site, call: CallState, *, approved: bool = False) -> dict[str, Any] | None:
    """BeforeToolExecute for a `new` or `resuming` call: the gate ends it (failed or
    suspended, then AfterToolExecute with that outcome) or lets it run (AfterToolExecute
    follows its tool, in `execute`).

    Returns the validated keyword arguments when the call may run; the call stays where it
    is until its caller moves it to `running`, right before committing that and starting
    the tool. Unknown tools, invalid arguments and blocks become failed calls the model sees.

    The plugins run before the tool's existence and the arguments are checked, as in the
    seed's TOOL_CALL sub-state machine (tool-missing and arg-invalid are outcomes of
    BeforeToolExecute): they see every call the model made, one that cannot run too (its
    arguments as the model wrote them, text when they were not an object), and a block is
    what the model reads even of such a call. The checks win over a suspension: nobody is
    asked to approve a call that cannot run. Rules (engine.domain.rules) and approval policies are
    asked only of calls that can run; a rule's deny stands whatever the plugins answer, its
    ask suspends a call its tool would run unasked, and the rule is recorded with the call.
    """
    rt = loop.ctx
    tool = rt.tools.get(call.tool)
    kwargs, problem = _checked(loop, call, approved)
    gate = Gate.allow()
    if kwargs is not None and tool is not None and not approved:
        if read_ahead(call.tool, call.args):  # a long command is read off the event loop
            await anyio.to_thread.run_sync(prepare, call.tool, call.args)
        rule = rt.rules.decide(call.tool, call.args, call.thread_id, rt.clock)
        if rule is not None:
            loop.ops.append(ruled.used(rule, call.id))  # with the call's row
            if rule.scope == "once":  # spent: every runtime on the store reads so
                loop.ops += rt.coordinator.rules_changed()
        if rule is not None and rule.effect == "allow" and rule.network:
            call.sandbox = "network"  # the rule lets what it allows reach the network
        if rule is not None and rule.effect == "deny":
            gate = Gate.block(f"denied by {rule.describe()}")
        elif tool.meta.get("sandboxed") and rt.sandbox is not None and rt.sandbox.missing:
            gate = Gate.suspend(f"{call.tool} needs approval: no sandbox here "
                                f"({rt.sandbox.state}), so every {call.tool} call asks")  # fmt: skip
        elif rule is not None and rule.effect == "ask":
            gate = Gate.suspend(f"{call.tool} needs approval: {rule.describe()} asks")
        elif rule is None and tool.needs_approval(call.args):
            gate = Gate.suspend(f"{call.tool} needs approval")
        if is_replay(loop.turn) and (why := match(loop.turn, call)) is not None:
            gate = (
                gate if gate.action == "block" else Gate.suspend(why)
            )  # (engine/turn/recorded.py)
    for answer in await loop.phase(
        Phase.BEFORE_TOOL_EXECUTE, tool=call.tool, args=call.args, approved=approved
    ):
        if answer is not None and answer.action != "allow" and gate.action != "block":
            gate = answer  # a block wins over a suspension; the first block stands
    if gate.action == "block":
        call.fail(f"blocked: {gate.reason}", rt.clock())
    elif problem is not None:
        call.fail(problem, rt.clock())
    elif gate.action == "suspend":
        call.move(CallStatus.SUSPENDED, rt.clock(), suspend_reason=gate.reason)
    else:
        return kwargs  # the clock is read when the call starts, not here
    await loop.phase(
        Phase.AFTER_TOOL_EXECUTE, tool=call.tool, args=call.args, outcome=call.status.value
    )
    return None


def _checked(
    loop: Site, call: CallState, approved: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """The call's validated keyword arguments, or why it cannot run (no such tool, a tool
    its step did not offer, arguments that are not an object or do not validate).

    Out of scope is the seed's: a plugin narrowed the step's tools, and the model called
    one it was not offered. A call an operator approved is replayed in a later step, so
    that step's tools do not apply to it.
    """
    tools = loop.ctx.tools
    tool = tools.get(call.tool)
    if tool is None:
        return None, f"unknown tool {call.tool!r}; available: {', '.join(tools.names())}"
    if not approved and loop.step_tools is not None and call.tool not in loop.step_tools:
        offered = ", ".join(loop.step_tools) or "none"
        return None, f"tool {call.tool!r} is not offered in this step; offered: {offered}"
    if isinstance(call.args, str):  # the model's text, kept because it is not usable
        _, problem = parse_arguments(call.args)
        return None, f"invalid arguments for {call.tool}: {problem or 'not a JSON object'}"
    try:
        return tool.validate(call.args), None
    except ToolArgsError as exc:
        return None, str(exc)


async def execute(loop: Site, call: CallState, kwargs: dict[str, Any]) -> None:
    """Run a `running` call's tool within its time limit, without the secret variables in
    its processes' environment, and apply its result, secrets masked and cut to the result
    cap, then AfterToolExecute."""
    rt, limits = loop.ctx, loop.ctx.config.runtime
    tool = rt.tools.get(call.tool)
    assert tool is not None
    secrets = Secrets.from_env(rt.secret_env)
    tap = OutputTap(
        call.id, call.thread_id, call.turn_id, rt.publish, rt.clock, rt.output
    )  # what it prints
    ctx = ToolContext(
        rt.workspace, call.id, call.thread_id, call.turn_id,
        time_limit=limits.tool_timeouts.get(call.tool, limits.tool_timeout),
        shell_timeout=limits.shell_timeout,
        max_result_bytes=limits.max_result_bytes, env=ToolEnv(secrets),
        started=_recorder(loop, call), output=tap.write if tap else None,
        sandbox=rt.sandbox, sandbox_choice=call.sandbox,
    )  # fmt: skip
    try:  # a replay's call matched with the record gets the recorded outcome, running nothing
        result = recorded_result(loop.turn, call) or await tool.call(kwargs, ctx)
    finally:
        if tap is not None:
            tap.close()  # (cancelled too: what it printed last is sent, not kept)
    call.finish(result, rt.clock(), cleaner(loop, secrets))
    rt.tools.ended(call.tool, call.error if call.status is CallStatus.FAILED else None)
    await loop.phase(
        Phase.AFTER_TOOL_EXECUTE, tool=call.tool, args=call.args, outcome=call.status.value
    )


class ToolEnv(Mapping[str, str]):
    """This process's environment without the secret variables, copied when a tool first
    reads it (most tools start no process, and the copy cost more than their call)."""

    def __init__(self, secrets: Secrets) -> None:
        self._secrets = secrets
        self._env: dict[str, str] | None = None

    def _copy(self) -> dict[str, str]:
        if self._env is None:
            self._env = self._secrets.tool_env()
        return self._env

    def __getitem__(self, key: str) -> str:
        return self._copy()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._copy())

    def __len__(self) -> int:
        return len(self._copy())


def _recorder(loop: Site, call: CallState) -> Callable[[dict[str, Any]], Awaitable[None]]:
    """The call's `ToolContext.started`: what its tool started goes into the call's meta
    (`process`, with this run's id and the time) in a commit of its own, before the tool
    lets it run (the call's own row is `running` already)."""

    async def started(facts: dict[str, Any]) -> None:
        record = {**facts, "run_id": loop.ctx.run_id, "at": loop.ctx.clock()}
        call.meta["process"] = record
        with anyio.CancelScope(shield=True):  # written whole, or the tool does not go on
            ops = [
                *loop.ctx.coordinator.fence(call.thread_id, call.turn_id),
                rows.call_meta_set(call.id, "process", record),
            ]
            await loop.ctx.commit(ops, [],
                                  checkpoint=None, turn_id=call.turn_id)  # fmt: skip

    return started


def cleaner(loop: Site, secrets: Secrets | None = None) -> Callable[[str], str]:
    """What a result's text goes through before it is committed: the configured secrets'
    values masked, then cut to the result cap (with a note the model reads)."""
    limits = loop.ctx.config.runtime
    secrets = secrets or Secrets.from_env(loop.ctx.secret_env)
    return lambda text: cut_to(secrets.mask(text), limits.max_result_bytes)
