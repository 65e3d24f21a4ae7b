"""What a turn needs from whoever runs it, and nothing more.

The runtime builds one `TurnContext` for its run and hands it to every turn's loop; the
loop, its calls and the strategies reach the model, the tools, the truth layer and the
event bus only through it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from engine.config import Config
from engine.decisions.inbox import DecisionInbox
from engine.domain.breakpoints import BreakBook
from engine.domain.events import Event
from engine.domain.rules import RuleBook
from engine.providers.base import Provider
from engine.shell.sandbox import Sandbox
from engine.store import Op
from engine.tools import ToolRegistry
from engine.turn.models import Models
from engine.turn.output import OutputPump
from engine.turn.plugins import Phase, Plugin, StopRequest

if TYPE_CHECKING:
    from engine.domain.usage import Usage
    from engine.turn.state import TurnState


class Commit(Protocol):
    """Write `ops` and the events as one transaction (with a checkpoint row), then
    publish the events."""

    def __call__(
        self,
        ops: list[Op],
        events: list[Event],
        *,
        checkpoint: str | None,
        turn_id: str,
        urgent: bool = False,
    ) -> Awaitable[None]: ...


class Coordinating(Protocol):
    """What turns get of the run's coordinator (engine/services/coordinator.py, which extends it):
    step ids, the fence a checkpoint carries, what wakes the cluster, rule ids."""

    def next_step_id(self) -> int: ...

    def fence(self, thread_id: str, turn_id: str) -> list[Op]: ...

    def announce(self, thread_id: str) -> list[Op]: ...

    def call_ended(self, call_id: str, note: str) -> list[Op]: ...

    async def new_rule_id(self) -> str | None: ...

    def rules_changed(self) -> list[Op]: ...


class Spending(Protocol):
    """What turns ask of the room's budgets (engine/services/budgets.py): whether a turn
    may go on to its next inference, and what each step spent."""

    async def stop_before(self, turn: TurnState, coming: Usage) -> StopRequest | None: ...

    def spend(self, group: str, thread_id: str, used: Usage, at: float) -> None: ...


class NoBudgets:
    """No budget: turns spend as they will (a context made without the runtime's)."""

    async def stop_before(self, turn: TurnState, coming: Usage) -> StopRequest | None:
        return None

    def spend(self, group: str, thread_id: str, used: Usage, at: float) -> None:
        return None


@dataclass
class TurnContext:
    """The services of one run that its turns use."""

    run_id: str
    clock: Callable[[], float]
    new_id: Callable[[str], str]
    # One room alone, or one worker of a cluster (engine/services/coordinator.py): step ids, the
    # fence a checkpoint carries, what wakes the cluster, rule ids.
    coordinator: Coordinating
    publish: Callable[[Event], None]
    commit: Commit
    provider: Provider
    tools: ToolRegistry
    plugins: list[Plugin]
    decisions: DecisionInbox
    rules: RuleBook
    config: Config
    workspace: Path
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("agentdeck"))
    # Channels whose answers go back out (issue 17): a turn from one of them that ends
    # with an answer records its delivery in its final checkpoint. Empty: none does.
    delivering: frozenset[str] = frozenset()
    # The variables tools must not see and results must not hold, besides the provider
    # keys: `[runtime] secret_env` and every `*_env` a channel names (engine/tools/redact.py).
    secret_env: tuple[str, ...] = ()
    # Running calls' output on its way to those who watch (engine/turn/output.py); its
    # `run` is one of the runtime's tasks.
    output: OutputPump = field(default_factory=OutputPump)
    # The room's budgets: a turn stops with `budget` before an inference that would pass one.
    budgets: Spending = field(default_factory=NoBudgets)
    # The shell's sandbox (engine/shell/sandbox.py; None: commands run as they are)
    sandbox: Sandbox | None = None
    # The models turns are answered by (`provider` is the room's), each with its context
    # window (engine/turn/models.py); the runtime sets its own, which can make more.
    models: Models = field(init=False)
    # Where turns pause for an operator (engine/turn/breaks.py); the runtime loads them.
    breakpoints: BreakBook = field(default_factory=BreakBook)

    def __post_init__(self) -> None:
        self.models = Models(self.config, self.provider)
        self._at = {  # the plugins listening at each phase, in order
            phase: [p for p in self.plugins if p.phases is None or phase in p.phases]
            for phase in Phase
        }

    async def new_rule_id(self) -> str:
        """The id of the next rule made in the store (a cluster's: the database's sequence;
        alone: the RuleBook's own count)."""
        return await self.coordinator.new_rule_id() or self.rules.new_id()

    def plugins_at(self, phase: Phase) -> list[Plugin]:
        """The plugins listening at `phase`, in order."""
        return self._at[phase]
