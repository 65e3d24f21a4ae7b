"""Where a turn stands and what waits, read from execution.db."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.domain.decisions import PendingCall
from engine.domain.outcome import TurnOutcome
from engine.store.sqlite import Store, json_or_text

if TYPE_CHECKING:
    from engine.store.reader import Reads


async def read_outcome(store: Store, turn_id: str) -> TurnOutcome:
    """A turn's outcome as committed."""
    row = await store.fetchone("outcome.turn", (turn_id,))
    if row is None:
        raise LookupError(f"no turn {turn_id}")
    calls = await store.fetchall(
        "outcome.calls",
        (turn_id,),
    )
    return TurnOutcome(
        turn_id=turn_id, thread_id=row["thread_id"], status=row["status"],
        reason=row["reason"], detail=row["detail"], text=row["final_text"] or "",
        pending=[{"call_id": c["id"], "tool": c["tool"], "args": json_or_text(c["args"]),
                  "reason": c["suspend_reason"] or "", "awaiting": c["awaiting"] or "decision"}
                 for c in calls if c["status"] == "suspended"],
        calls=[{"call_id": c["id"], "tool": c["tool"], "status": c["status"]} for c in calls],
        input_tokens=row["input_tokens"], output_tokens=row["output_tokens"],
    )  # fmt: skip


async def read_pending(store: Reads) -> list[PendingCall]:
    """Every suspended call in the room, oldest first (engine.services.deadlines adds deadlines)."""
    rows = await store.fetchall("outcome.pending")
    return [
        PendingCall(call_id=r["id"], turn_id=r["turn_id"], thread_id=r["thread_id"],
                    tool=r["tool"], args=json_or_text(r["args"]), reason=r["suspend_reason"] or "",
                    since=r["updated_at"], group=r["group_name"],
                    awaiting=r["awaiting"] or "decision")
        for r in rows
    ]  # fmt: skip
