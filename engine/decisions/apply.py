"""A decision reaching its call, as the call's turn takes it (engine/turn/replay.py runs
what this decides).

Each function changes the call and answers with the rows and events to commit in the
turn's next checkpoint: the decision `applied` (the call `resuming`, bound to it),
decisions that came too late (`duplicates`), one that may not apply (`refused`: the call
goes on waiting), and what the decision makes of the call (`carry_out`: it ends it, or its
tool runs with the arguments approved).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

from engine.decisions.binding import refusal, why_not
from engine.domain.decisions import Decision
from engine.domain.events import DecisionRecorded
from engine.lifecycle import CallStatus
from engine.store import Op
from engine.store import decisions as recorded
from engine.turn.call import CallState
from engine.turn.state import as_json

Record = tuple[Op, DecisionRecorded]  # a row to write and the event that says it


def unbound(decision: Decision, call: CallState) -> str | None:
    """Why `decision` may not apply to `call` now (engine.decisions.binding), or None."""
    return why_not(decision, call.args, call.awaiting)


def applied(decision: Decision, call: CallState, now: float) -> Record:
    """`decision` takes `call`: the call is `resuming`, bound to it."""
    call.move(CallStatus.RESUMING, now, decision_id=decision.id)
    return recorded.applied(decision.id, now), _event(decision, call, now, "applied")


def duplicates(call: CallState, late: Iterable[Decision], note: str, now: float) -> list[Record]:
    """Decisions that came too late for `call` (its operator learns which one won)."""
    return [(recorded.duplicate(d.id, note), _event(d, call, now, "duplicate", note)) for d in late]


def refused(decision: Decision, call: CallState, why: str, now: float) -> Record:
    """`decision` may not apply (`why`): its call was not run and still waits."""
    return recorded.refused(decision.id, why, now), _event(decision, call, now, "refused", why)


def carry_out(
    decision: Decision, call: CallState, now: float, clean: Callable[[str], str]
) -> Literal["ended", "run"] | Record:
    """What a decision applied to a `resuming` call makes of it: `ended` (cancelled,
    failed, or succeeded with the operator's result, `clean`ed as a tool's text is), `run`
    (its tool runs now, with the edited arguments if any), or, when it is not bound to
    what it would run, the refusal to record (the call waits again: fails closed)."""
    if decision.action == "cancel":
        call.move(CallStatus.CANCELLED, now, error=decision.denial_text())
        return "ended"
    if decision.action == "fail":
        call.move(CallStatus.FAILED, now, error=decision.failure_text())
        return "ended"
    if decision.use_result:  # the operator's text goes where a tool's would: masked, cut
        result = decision.result
        text = result if isinstance(result, str) else as_json(result)
        call.move(CallStatus.SUCCEEDED, now, result=clean(text), error=None)
        return "ended"
    if (why := refusal(decision, call.args)) is not None:  # nothing runs
        # it waits for what it waited for: a rerun is taken only by a call under review
        awaiting = "review" if decision.action == "rerun" else "decision"
        call.move(CallStatus.SUSPENDED, now, decision_id=None, awaiting=awaiting)
        return refused(decision, call, why, now)
    if decision.args is not None:
        call.args = decision.args
    call.sandbox = decision.sandbox  # outside the sandbox, or with the network: this run only
    return "run"


def _event(
    decision: Decision, call: CallState, now: float, status: str, note: str | None = None
) -> DecisionRecorded:
    return DecisionRecorded(at=now, thread_id=call.thread_id, turn_id=call.turn_id,
                            decision_id=decision.id, call_id=call.id, action=decision.action,
                            status=status, reason=decision.reason, note=note)  # type: ignore[arg-type]  # fmt: skip
