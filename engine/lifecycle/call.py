"""Tool-call lifecycle: the seed's diagram, and two edges out of `new` it leaves implicit.

new -> running | suspended | failed | cancelled
running -> suspended | succeeded | failed | cancelled
suspended -> resuming | cancelled
resuming -> running | suspended | succeeded | failed | cancelled

`new -> failed` is the seed's TOOL_CALL sub-state machine, where BeforeToolExecute ends a
call Failed (tool missing, arguments invalid, blocked) without executing it; `new ->
cancelled` is a call whose turn ended before its tool started. Without them such calls
went through `running`, and their events said "running" for calls that never ran.

`running -> suspended` is a tool that answers `pending`, and also the review after a
crash: a call a dead runtime left `running`, whose tool is not idempotent, is suspended
and waits for an operator to say what became of it (engine.decisions.review), as any suspended call
waits for a decision. No state of its own: its moves are exactly a suspended call's; what
it `awaits` says which decisions it takes (`decision`: approve or cancel; `review`: rerun,
a result, or fail).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from engine.lifecycle.errors import checked


class CallStatus(StrEnum):
    NEW = "new"  # observed in the model's answer, not started
    RUNNING = "running"  # executing
    SUSPENDED = "suspended"  # waiting for a decision
    RESUMING = "resuming"  # decision received and committed, replay in progress
    SUCCEEDED = "succeeded"  # terminal: success or warning
    FAILED = "failed"  # terminal: error, blocked, unknown tool, invalid arguments
    CANCELLED = "cancelled"  # terminal: cancel decision or turn cancelled

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({CallStatus.SUCCEEDED, CallStatus.FAILED, CallStatus.CANCELLED})

S = CallStatus
TRANSITIONS: dict[CallStatus, frozenset[CallStatus]] = {
    S.NEW: frozenset({S.RUNNING, S.SUSPENDED, S.FAILED, S.CANCELLED}),
    S.RUNNING: frozenset({S.SUSPENDED, S.SUCCEEDED, S.FAILED, S.CANCELLED}),
    S.SUSPENDED: frozenset({S.RESUMING, S.CANCELLED}),
    S.RESUMING: frozenset({S.RUNNING, S.SUSPENDED, S.SUCCEEDED, S.FAILED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
}


# What a suspended call waits for: a `decision` (approve or cancel), when a crash left its
# outcome unknown a `review` (rerun, a result, or fail), or, a breakpoint's pause (the
# pseudo-tool `breakpoint`: engine/domain/breakpoints.py), the operator going on from it
# (continue, step, or cancel the turn). None when not suspended.
Awaiting = Literal["decision", "review", "breakpoint"]

# The suspend reason (what the operator and the model read) of a call a crash left to review.
REVIEW_REASON = (
    "outcome unknown: agentdeck stopped while this call was running, so it may have run; "
    "an operator reviews it (mark it succeeded or failed, or run it again)"
)


def check(src: CallStatus | str, dst: CallStatus | str) -> CallStatus:
    """Return `dst` if `src -> dst` is legal, else raise IllegalTransition naming both."""
    return checked("tool call", TRANSITIONS, CallStatus, src, dst)
