"""Turn lifecycle: `running`, `waiting`, `done` (with a termination reason).

A turn is `waiting` only when every outcome of its tool round is suspended; the loop
then exits with reason `suspended`. A decision moves it back to `running`. A waiting turn
ends only as the seed allows: cancelled, or failed (`error`); anything else it does, it
does running again (`check`'s `reason`).
"""

from __future__ import annotations

from enum import StrEnum

from engine.lifecycle.errors import IllegalTransition, checked


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
BUDGET = "budget"  # a spending budget would be passed (engine/services/budgets.py)
STOPPED_PREFIX = "stopped:"
REASONS = (NATURAL, BEHAVIOR_REQUESTED, CANCELLED, SUSPENDED, ERROR, BUDGET)


def stopped(code: str) -> str:
    """The termination reason of a turn a stop policy ended."""
    return f"{STOPPED_PREFIX}{code}"


def is_valid_reason(reason: str) -> bool:
    return reason in REASONS or (reason.startswith(STOPPED_PREFIX) and len(reason) > 8)


# The reasons a waiting turn may end with (`waiting -> done`).
WAITING_ENDS = frozenset({CANCELLED, ERROR})


def check(src: TurnStatus | str, dst: TurnStatus | str, reason: str | None = None) -> TurnStatus:
    """Return `dst` if `src -> dst` is legal (for `-> done`, with termination `reason`),
    else raise IllegalTransition naming both."""
    status = checked("turn", TRANSITIONS, TurnStatus, src, dst)
    if src == TurnStatus.WAITING and status is TurnStatus.DONE and reason not in WAITING_ENDS:
        raise IllegalTransition("turn", "waiting", f"done ({reason}): a waiting turn ends only "
                                "cancelled or with an error")  # fmt: skip
    return status
