"""Plugins hook the phases of a turn; gates decide whether a tool call runs.

Phases: RunStart, StepStart, BeforeInference, AfterInference, StepEnd, BeforeToolExecute,
AfterToolExecute, RunEnd. A plugin may ask the turn to terminate (`request_stop`), and its
BeforeToolExecute answer is a `Gate`: allow, block (a failed result the model sees) or
suspend (wait for a decision). Every call that passes BeforeToolExecute reaches
AfterToolExecute with its `outcome`, whether the gate or its tool ended it. At StepStart
and BeforeInference a plugin may narrow the tools the step offers the model (`tools`),
the seed's step-local control.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Literal

import anyio

from engine.config import RuntimeConfig


class Phase(StrEnum):
    RUN_START = "RunStart"
    STEP_START = "StepStart"
    BEFORE_INFERENCE = "BeforeInference"
    AFTER_INFERENCE = "AfterInference"
    STEP_END = "StepEnd"
    BEFORE_TOOL_EXECUTE = "BeforeToolExecute"
    AFTER_TOOL_EXECUTE = "AfterToolExecute"
    RUN_END = "RunEnd"


@dataclass(frozen=True)
class Gate:
    """The answer of BeforeToolExecute for one call."""

    action: Literal["allow", "block", "suspend"]
    reason: str = ""

    @classmethod
    def allow(cls) -> Gate:
        return cls("allow")

    @classmethod
    def block(cls, reason: str) -> Gate:
        return cls("block", reason)

    @classmethod
    def suspend(cls, reason: str) -> Gate:
        return cls("suspend", reason)


@dataclass(frozen=True)
class StopRequest:
    """A plugin's request to end the turn: `stopped:<code>` or `behavior_requested`."""

    reason: str
    detail: str = ""


@dataclass
class PhaseContext:
    """What a plugin sees at a phase. Plugins read it; they change the turn through
    their return value (a Gate) or `stop`."""

    phase: Phase
    turn_id: str
    thread_id: str
    round_index: int
    started_at: float
    now: float
    consecutive_errors: int = 0
    tool: str | None = None
    args: dict[str, Any] | str | None = None  # the model's text when it is not an object
    approved: bool = False  # the call was approved by a decision (replay)
    outcome: str | None = None  # AfterToolExecute: succeeded | failed | suspended
    # StepStart, BeforeInference: the names of the tools this step offers the model. A
    # plugin may narrow it (remove names, or assign a list) for this step only; a call the
    # model makes to a tool the step did not offer fails, out of scope. None elsewhere.
    tools: list[str] | None = None
    stop: StopRequest | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def request_stop(self, reason: str, detail: str = "") -> None:
        self.stop = StopRequest(reason, detail)


class Plugin:
    """Base class: override the phases you need. Each returns None unless noted.

    `phases` names the phases a plugin listens at (None: all of them); a phase no plugin
    listens at costs a turn nothing.
    """

    phases: ClassVar[frozenset[Phase] | None] = None

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        """Called at every phase; at BeforeToolExecute a returned Gate decides the call."""
        return None

    def turn_deadline(self, started_at: float) -> tuple[float, StopRequest] | None:
        """When (on the runtime's clock) the turn must end even mid-inference, and how.

        Phases come between steps; a model stream still in flight at the earliest
        deadline is cut, and the turn ends with that stop request.
        """
        return None


@dataclass
class MaxRounds(Plugin):
    """Stop the turn with `stopped:max_rounds` after this many inference rounds."""

    phases = frozenset({Phase.BEFORE_INFERENCE})
    limit: int = 25

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        if ctx.phase is Phase.BEFORE_INFERENCE and ctx.round_index >= self.limit:
            ctx.request_stop("stopped:max_rounds", f"reached {self.limit} rounds")
        return None


@dataclass
class Timeout(Plugin):
    """Stop the turn with `stopped:timeout` once it has run this many seconds."""

    phases = frozenset({Phase.BEFORE_INFERENCE})
    seconds: float = 600.0

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        if ctx.phase is Phase.BEFORE_INFERENCE and ctx.now - ctx.started_at >= self.seconds:
            ctx.stop = self._stop()
        return None

    def turn_deadline(self, started_at: float) -> tuple[float, StopRequest] | None:
        return started_at + self.seconds, self._stop()

    def _stop(self) -> StopRequest:
        return StopRequest("stopped:timeout", f"ran longer than {self.seconds:g}s")


@dataclass
class ConsecutiveErrors(Plugin):
    """Stop the turn with `stopped:consecutive_errors` after N failed calls in a row."""

    phases = frozenset({Phase.BEFORE_INFERENCE})
    limit: int = 5

    async def on_phase(self, ctx: PhaseContext) -> Gate | None:
        if ctx.phase is Phase.BEFORE_INFERENCE and ctx.consecutive_errors >= self.limit:
            ctx.request_stop(
                "stopped:consecutive_errors", f"{ctx.consecutive_errors} failed calls in a row"
            )
        return None


def default_stop_policies(config: RuntimeConfig | None = None) -> list[Plugin]:
    """The stop policies every turn gets unless a runtime is given its own plugins, with
    the limits of `[runtime]` in agentdeck.toml (its defaults when None)."""
    config = config or RuntimeConfig()
    return [
        MaxRounds(config.max_rounds),
        Timeout(config.turn_timeout),
        ConsecutiveErrors(config.max_consecutive_errors),
    ]


def earliest_deadline(plugins: list[Plugin], started_at: float,
                      clock: Callable[[], float]) -> tuple[float, StopRequest | None]:  # fmt: skip
    """The earliest deadline the plugins give a turn started at `started_at`, on anyio's
    clock (inf: none), and how the turn ends then."""
    found = [d for p in plugins if (d := p.turn_deadline(started_at))]
    if not found:
        return math.inf, None
    at, stop = min(found, key=lambda d: d[0])
    return anyio.current_time() + (at - clock()), stop
