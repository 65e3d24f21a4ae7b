"""Where a turn stands and what waits, read from execution.db."""

from __future__ import annotations

from engine.decisions import PendingCall
from engine.outcome import TurnOutcome
from engine.store.sqlite import Store, json_or_text


async def read_outcome(store: Store, turn_id: str) -> TurnOutcome:
    """A turn's outcome as committed."""
    row = await store.fetchone("SELECT * FROM turns WHERE id=?", (turn_id,))
    if row is None:
        raise LookupError(f"no turn {turn_id}")
    calls = await store.fetchall(
        "SELECT id, tool, args, status FROM tool_calls WHERE turn_id=? ORDER BY step_id, idx",
        (turn_id,),
    )
    return TurnOutcome(
        turn_id=turn_id, thread_id=row["thread_id"], status=row["status"],
        reason=row["reason"], detail=row["detail"], text=row["final_text"] or "",
        pending=[{"call_id": c["id"], "tool": c["tool"], "args": json_or_text(c["args"])}
                 for c in calls if c["status"] == "suspended"],
        calls=[{"call_id": c["id"], "tool": c["tool"], "status": c["status"]} for c in calls],
        input_tokens=row["input_tokens"], output_tokens=row["output_tokens"],
    )  # fmt: skip


async def read_pending(store: Store) -> list[PendingCall]:
    """Every suspended call in the room, oldest first."""
    rows = await store.fetchall(
        "SELECT id, turn_id, thread_id, tool, args, suspend_reason, updated_at FROM tool_calls"
        " WHERE status='suspended' ORDER BY updated_at, id"
    )
    return [
        PendingCall(call_id=r["id"], turn_id=r["turn_id"], thread_id=r["thread_id"],
                    tool=r["tool"], args=json_or_text(r["args"]), reason=r["suspend_reason"] or "",
                    since=r["updated_at"])
        for r in rows
    ]  # fmt: skip
