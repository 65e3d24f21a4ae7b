"""Turn lifecycle: `running`, `waiting`, `done` (with a termination reason).

A turn is `waiting` only when every outcome of its tool round is suspended; the loop
then exits with reason `suspended`. A decision moves it back to `running`.
"""

from __future__ import annotations

from enum import StrEnum

from engine.lifecycle.errors import checked


class TurnStatus(StrEnum):
    RUNNING = "running"  # inference or tools are executing
    WAITING = "waiting"  # paused until a decision resolves one of its suspended calls
    DONE = "done"  # terminal; see the termination reason


TRANSITIONS: dict[TurnStatus, frozenset[TurnStatus]] = {
    TurnStatus.RUNNING: frozenset({TurnStatus.WAITING, TurnStatus.DONE}),
    TurnStatus.WAITING: frozenset({TurnStatus.RUNNING, TurnStatus.DONE}),
    TurnStatus.DONE: frozenset(),
}

# Termination reasons. `stopped:<code>` carries a code (and a detail stored beside it).
NATURAL = "natural"
BEHAVIOR_REQUESTED = "behavior_requested"
CANCELLED = "cancelled"
SUSPENDED = "suspended"
ERROR = "error"
STOPPED_PREFIX = "stopped:"
REASONS = (NATURAL, BEHAVIOR_REQUESTED, CANCELLED, SUSPENDED, ERROR)


def stopped(code: str) -> str:
    """The termination reason of a turn a stop policy ended."""
    return f"{STOPPED_PREFIX}{code}"


def is_valid_reason(reason: str) -> bool:
    return reason in REASONS or (reason.startswith(STOPPED_PREFIX) and len(reason) > 8)


def check(src: TurnStatus | str, dst: TurnStatus | str) -> TurnStatus:
    """Return `dst` if `src -> dst` is legal, else raise IllegalTransition naming both."""
    return checked("turn", TRANSITIONS, TurnStatus, src, dst)
