"""Recording an operator's decision: checked against the call it is for (bound to the
arguments the operator saw: engine/decisions/binding.py), recorded with its status, and handed to
the call's turn when it is queued (engine/services/supervisor.py's `decide`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from engine.decisions.binding import why_not
from engine.decisions.inbox import already
from engine.domain.decisions import Decision
from engine.domain.events import DecisionRecorded, Event
from engine.lifecycle import CallStatus, DecisionStatus
from engine.store import Op, Store
from engine.store import decisions as recorded
from engine.turn.call import CallState
from engine.turn.context import TurnContext


class Desk(Protocol):
    """What recording a decision needs of the turn supervisor (no import of it: it calls
    this module)."""

    ctx: TurnContext
    store: Store
    interrupted: set[str]
    live: dict[str, Any]

    async def call_state(self, call_id: str) -> CallState | None: ...

    def spawn_resume(self, turn_id: str, thread_id: str = "") -> Any: ...

    def wake(self, turn_id: str, thread_id: str) -> None: ...


@dataclass(frozen=True)
class Recorded:
    """How a decision was recorded: `queued` (it applies when its call's turn takes it),
    `duplicate` (its call was decided or ended already) or `refused` (it does not fit its
    call, or runs other arguments than it approved); `note` says why when not queued."""

    status: Literal["queued", "duplicate", "refused"]
    note: str | None = None


async def record_decision(sv: Desk, decision: Decision, need_hash: bool = False) -> Recorded:
    """What `TurnSupervisor.decide` does: check the decision against its call, record it
    with its status, and hand a queued one to the call's turn."""
    now = sv.ctx.clock()
    if await recorded.exists(sv.store, decision.id):
        return Recorded("duplicate", f"decision {decision.id} was recorded already")
    call = await sv.call_state(decision.call_id)
    decided = call is not None and (call.status.terminal or call.status is CallStatus.RESUMING)
    status: Literal["queued", "duplicate", "refused"] = "duplicate" if decided else "queued"
    note = already(call) if decided and call else None
    if not decided and call is not None:  # bound to what the operator saw, or refused
        if (note := why_not(decision, call.args, call.awaiting, need_hash=need_hash)) is not None:
            status = "refused"
    event = DecisionRecorded(
        at=now, thread_id=call.thread_id if call else "", turn_id=call.turn_id if call else "",
        decision_id=decision.id, call_id=decision.call_id, action=decision.action,
        status=status, reason=decision.reason, note=note,
    )  # fmt: skip
    ops: list[Op] = [recorded.recorded(decision, status, now, note)]
    if status == "queued" and call is not None:  # wakes a cluster's worker holding it
        ops += sv.ctx.coordinator.announce(call.thread_id)
    events: list[Event] = [event]
    if status == "queued":  # a decision a dead run left unapplied gives way to this one
        for old, op in sv.ctx.decisions.supersede(decision, now):
            ops.append(op)
            events.append(DecisionRecorded(
                at=now, thread_id=event.thread_id, turn_id=event.turn_id,
                decision_id=old.id, call_id=old.call_id, action=old.action,
                status="superseded", reason=old.reason, note=f"superseded by {decision.id}",
            ))  # fmt: skip
    await sv.ctx.commit(ops, events, checkpoint=None, turn_id=event.turn_id, urgent=True)
    if status == "refused":
        return Recorded(status, note)
    if decided:
        if call and call.turn_id in sv.interrupted and call.turn_id not in sv.live:
            # a one-off's: its caller waits for the turn, which nothing else resumes
            sv.spawn_resume(call.turn_id)
        return Recorded(status, note)
    if (note := sv.ctx.decisions.settled_meanwhile(decision.call_id)) is not None:
        # another decision took the call, or it ended, while this one was written
        lost = event.model_copy(update={"at": sv.ctx.clock(), "note": note,
                                        "status": DecisionStatus.DUPLICATE})  # fmt: skip
        await sv.ctx.commit([recorded.duplicate(decision.id, note)], [lost], checkpoint=None,
                              turn_id=event.turn_id, urgent=True)  # fmt: skip
        return Recorded("duplicate", note)
    sv.ctx.decisions.add(decision)
    if call is not None:
        sv.wake(call.turn_id, call.thread_id)
    return Recorded(status)
