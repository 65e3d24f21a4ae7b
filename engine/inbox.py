"""The decision inbox: queued decisions by call id, waiting for their call to suspend."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from typing import TYPE_CHECKING

from engine.decisions import Decision
from engine.lifecycle import CallStatus

if TYPE_CHECKING:
    from engine.calls import CallState
    from engine.store import Store


class DecisionInbox:
    """Decisions not yet applied, in arrival order per call."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._queued: dict[str, deque[Decision]] = defaultdict(deque)

    async def load(self, decision_id: str | None) -> Decision:
        """A decision as stored (for replaying a call left `resuming`)."""
        row = await self._store.fetchone("SELECT * FROM decisions WHERE id=?", (decision_id,))
        if row is None:
            raise LookupError(f"decision {decision_id} is not in execution.db")
        return from_row(row)

    async def restore(self) -> None:
        """Reload the decisions a previous run queued and did not apply."""
        rows = await self._store.fetchall(
            "SELECT * FROM decisions WHERE status='queued' ORDER BY created_at"
        )
        for row in rows:
            self.add(from_row(row))

    def add(self, decision: Decision) -> None:
        self._queued[decision.call_id].append(decision)

    def queued_for(self, call_id: str) -> bool:
        return bool(self._queued.get(call_id))

    def take(self, suspended: list[CallState]) -> list[tuple[Decision, CallState]]:
        """The first queued decision of each suspended call that has one."""
        taken = []
        for call in suspended:
            queue = self._queued.get(call.id)
            if queue and call.status is CallStatus.SUSPENDED:
                taken.append((queue.popleft(), call))
        return taken

    def drop_rest(self, call_id: str) -> list[Decision]:
        """Decisions that came after the applied one: they are duplicates now."""
        return list(self._queued.pop(call_id, ()))

    def __len__(self) -> int:
        return sum(len(q) for q in self._queued.values())


def from_row(row: object) -> Decision:
    return Decision(
        id=row["id"],
        call_id=row["call_id"],
        action=row["action"],
        args=json.loads(row["args"]) if row["args"] else None,
        result=json.loads(row["result"]) if row["result"] else None,
        use_result=bool(row["use_result"]),
        reason=row["reason"],
        remember=row["remember"],
        decided_by=row["decided_by"],
    )


def to_row(decision: Decision, status: str, at: float, note: str | None = None) -> tuple:
    """Parameters of an INSERT INTO decisions."""
    return (
        decision.id,
        decision.call_id,
        decision.action,
        json.dumps(decision.args) if decision.args is not None else None,
        json.dumps(decision.result) if decision.use_result else None,
        int(decision.use_result),
        decision.reason,
        decision.remember,
        decision.decided_by,
        status,
        note,
        at,
    )


INSERT = (
    "INSERT INTO decisions(id, call_id, action, args, result, use_result, reason, remember,"
    " decided_by, status, note, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
