"""The review after a crash: calls whose outcome a dead runtime left unknown.

A call that was `running` when its runtime died may have run, in part or whole, or not at
all. An idempotent tool's call is simply run again; any other is suspended with the reason
`REVIEW_REASON` (engine/lifecycle/call.py: the `running -> suspended` move: the call
waits for an operator like any suspended call, and so does its turn) until an operator
says what became of it:

- mark it succeeded, with a result the operator types (`Decision.with_result`);
- mark it failed (`Decision.fail`, with a reason): the model reads it as the tool's error;
- run it again (`Decision.rerun`), knowing it may then have run twice.

Nothing else applies to such a call: a plain approve, an edit or a cancel are refused
(engine.decisions.binding.fits), so a script approving whatever waits can never run it a second time.

What is known of each call is gathered here for the operator (`reviews`): its arguments,
when it started, the process group its tool recorded (engine/tools/orphans.py) and whether it
is still alive, and the files it was writing (a tool's `meta["writes"]` names the
argument holding the path and the one holding the text). `kill_orphan` ends a surviving
group, only one this room recorded in a run that is not the current one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.domain.review import FileFacts, Killed, ProcessFacts, Review
from engine.lifecycle import CallStatus
from engine.lifecycle.call import REVIEW_REASON
from engine.store import Op, Store, json_or_text
from engine.store import turns as rows
from engine.tools import ToolError, ToolRegistry, orphans
from engine.tools.workspace import Workspace

if TYPE_CHECKING:
    from engine.store.reader import Reads
    from engine.turn.call import CallState


class OrphanRefused(Exception):
    """The call's process group may not be ended from here (the text says why)."""


async def reviews(store: Reads, workspace: Path, tools: ToolRegistry) -> list[Review]:
    """Every call waiting for a review, oldest first, with what is known of it now."""
    return [
        _review(r, workspace, tools)
        for r in await rows.awaiting(store, "review")
    ]  # fmt: skip


def _review(row: Any, workspace: Path, tools: ToolRegistry) -> Review:
    meta = json.loads(row["meta"] or "{}")
    args = json_or_text(row["args"])
    held = meta.get("review") or {}
    process = meta.get("process")
    tool = tools.get(row["tool"])
    writes = tool.meta.get("writes", {}) if tool is not None else {}
    return Review(
        call_id=row["id"], turn_id=row["turn_id"], thread_id=row["thread_id"], tool=row["tool"],
        args=args, started_at=held.get("started_at", row["created_at"]),
        since=held.get("since", row["updated_at"]),
        process=_process(process, meta.get("killed")) if isinstance(process, dict) else None,
        files=_files(workspace, args, writes) if isinstance(args, dict) else [],
    )  # fmt: skip


def _process(record: dict[str, Any], killed: Any) -> ProcessFacts | None:
    if not isinstance(record.get("pgid"), int):
        return None
    return ProcessFacts(pgid=record["pgid"], command=str(record.get("command", "")),
                        started_at=float(record.get("at") or 0.0), alive=orphans.alive(record),
                        killed=killed.get("result") if isinstance(killed, dict) else None)  # fmt: skip


def _files(workspace: Path, args: dict[str, Any], writes: dict[str, str | None]) -> list[FileFacts]:
    found = []
    for path_arg, text_arg in writes.items():
        path = args.get(path_arg)
        if not isinstance(path, str):
            continue
        text = args.get(text_arg) if text_arg else None
        want = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else None
        try:
            data, size = Workspace(workspace).read(path, len(want) + 1 if want is not None else 0)
        except ToolError as exc:
            missing = str(exc).startswith("no such file")
            found.append(FileFacts(path=path, exists=not missing,
                                   note="" if missing else str(exc)))  # fmt: skip
            continue
        found.append(FileFacts(path=path, exists=True, size=size,
                               matches=None if want is None else data == want))  # fmt: skip
    return found


async def kill_orphan(store: Store, call_id: str, run_id: str, at: float) -> Killed:
    """End the process group call `call_id`'s tool recorded, if it survived the run that
    recorded it (SIGTERM, then SIGKILL); the outcome goes into the call's meta (`killed`).

    Raises LookupError (no such call) or OrphanRefused: no group was recorded, or the run
    that recorded it is this one (the call's own tool ends it with its call).
    """
    row = await rows.call_row(store, call_id)
    if row is None:
        raise LookupError(f"no tool call {call_id}")
    record = json.loads(row["meta"] or "{}").get("process")
    if not isinstance(record, dict) or not isinstance(record.get("pgid"), int):
        raise OrphanRefused(f"call {call_id} recorded no process group")
    if record.get("run_id") == run_id:
        raise OrphanRefused(
            f"call {call_id}'s process group belongs to this runtime's own run: cancel its "
            "turn to stop it"
        )
    result = await orphans.end(record)
    done = {"result": result, "at": at, "run_id": run_id}
    await store.write([rows.call_meta_set(call_id, "killed", done)])
    return Killed(call_id=call_id, pgid=record["pgid"], result=result)


def put_up_for_review(call: CallState, now: float) -> Op:
    """A call the last run left `running`, its tool not idempotent: its outcome is unknown,
    so it waits for a review (suspended, awaiting `review`, with REVIEW_REASON for what
    the operator and the model read; when it went `running` and when its review began are
    kept in its meta). Returns the row update of its meta."""
    review = {"started_at": call.updated_at, "since": now}
    call.move(CallStatus.SUSPENDED, now, suspend_reason=REVIEW_REASON, awaiting="review")
    call.meta["review"] = review
    return rows.call_meta_set(call.id, "review", review)


def notice_text(call_id: str, tool: str, args: Any, process: Any) -> str:
    """What the operator is told when a call is put up for review at a restart."""
    what = f"{tool} call {call_id}"
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        what += f" (`{args['command'][:80]}`)"
    text = f"{what} was running when agentdeck stopped: its outcome is unknown"
    if isinstance(process, dict) and orphans.alive(process):
        text += f"; its process group {process['pgid']} is still running"
    return text + (f". Review it: ! in the console, or `agentdeck review` then "
                   f"`agentdeck decide {call_id} fail|rerun` (or approve --result).")  # fmt: skip
