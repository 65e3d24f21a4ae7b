"""Rows of execution.db as the plain dicts `engine.api.history` hands out (and `--json` prints)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.domain.instructions import Instructions
from engine.domain.usage import Usage
from engine.store import json_or_text
from engine.store.history.filters import search_cursor, turn_cursor


@dataclass(frozen=True)
class Page:
    """One page of a list: `items` (plain dicts) and `next`, the cursor of the next page
    (None at the end)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    next: str | None = None


def page(rows: list[sqlite3.Row], limit: int, item: Callable[[sqlite3.Row], dict]) -> Page:
    """`limit + 1` rows were asked for: one more than shown means there is a next page."""
    items = [item(r) for r in rows[:limit]]
    return Page(items, items[-1]["cursor"] if len(rows) > limit else None)


def write_json(target: Path, doc: dict[str, Any]) -> None:
    """Replace `target` atomically with `doc` as indented JSON."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, target)


def turn_item(r: sqlite3.Row) -> dict[str, Any]:
    item = {
        "turn_id": r["id"], "thread_id": r["thread_id"], "origin": r["origin"],
        "status": r["status"], "reason": r["reason"], "text": r["text"],
        "answer": r["final_text"] or "", "created_at": r["created_at"],
        "ended_at": r["ended_at"], "calls": r["calls"],
        # added with the history browser
        "steps": r["steps"], "group": r["group_name"], "run_id": r["run_id"],
        "channel": r["channel"], "sender": r["sender"], "strategy": r["strategy"],
        "detail": r["detail"], "rounds": r["rounds"], "input_tokens": r["input_tokens"],
        "output_tokens": r["output_tokens"], "updated_at": r["updated_at"],
        "cursor": turn_cursor(r["created_at"], r["id"]),
        # added with instructions (issue 32): the hash of what the turn was told
        "instructions": _column(r, "instructions"),
        # added with a model per group and thread (issue 32): `provider:model`
        "model": _column(r, "model"),
        # added with usage (issue 33): of input_tokens, those the provider's cache served;
        # US dollars of its priced tokens; its tokens whose model has no known price
        "cached_tokens": _number(r, "cached_tokens"), "cost": _number(r, "cost"),
        "unpriced": _number(r, "unpriced"),
    }  # fmt: skip
    return _pruned(item, r)


def _pruned(item: dict[str, Any], r: sqlite3.Row) -> dict[str, Any]:
    """A turn as retention left it (issue 35): when it was pruned (None: it was not), and
    the steps it had then as its `steps`."""
    item["pruned_at"] = _number(r, "pruned_at")
    if item["pruned_at"] is not None:
        item["steps"] = _number(r, "pruned_steps") or 0
    return item


def _column(r: sqlite3.Row, name: str) -> str | None:
    """What a turn row recorded in a column added since the first release (None: nothing,
    or a room that predates the column)."""
    try:
        return r[name] or None
    except IndexError:  # (the row was read without the column)
        return None


def _number(r: sqlite3.Row, name: str) -> Any:
    """A number a turn or step row recorded in a column added since the first release (None:
    a room that predates the column); PostgreSQL's sums and big integers as plain numbers."""
    try:
        value = r[name]
    except (IndexError, KeyError):  # (the row was read without the column)
        return None
    return value if value is None or isinstance(value, int | float) else float(value)


def spent(item: dict[str, Any]) -> Usage:
    """What a turn row or a step spent (`turn_item`, `step_item`): a row without a cost (a
    step that had no price, or a room that predates costs) counts its tokens unpriced."""
    tokens_in, tokens_out = item.get("input_tokens") or 0, item.get("output_tokens") or 0
    cost = item.get("cost")
    unpriced = tokens_in + tokens_out if cost is None else item.get("unpriced") or 0
    return Usage(input_tokens=tokens_in, output_tokens=tokens_out,
                 cached_tokens=item.get("cached_tokens") or 0, cost=cost or 0.0,
                 unpriced=unpriced, steps=item.get("rounds") or 0)  # fmt: skip


def run_item(r: sqlite3.Row) -> dict[str, Any]:
    return {
        "run_id": r["id"], "kind": r["kind"], "pid": r["pid"], "status": r["status"],
        "started_at": r["started_at"], "ended_at": r["ended_at"], "turns": r["turns"] or 0,
        "cursor": turn_cursor(r["started_at"], r["id"]),
    }  # fmt: skip


def thread_item(r: sqlite3.Row) -> dict[str, Any]:
    return {
        "thread_id": r["id"], "group": r["group_name"], "created_at": r["created_at"],
        "updated_at": r["updated_at"], "last_turn_id": r["last_turn_id"],
        "turns": r["turn_count"], "cursor": turn_cursor(r["updated_at"], r["id"]),
    }  # fmt: skip


def step_item(r: sqlite3.Row) -> dict[str, Any]:
    return {
        "step_id": r["id"], "idx": r["idx"], "kind": r["kind"], "status": r["status"],
        "summary": r["summary"], "run_id": r["run_id"], "started_at": r["started_at"],
        "ended_at": r["ended_at"],
        # added with usage (issue 33): an inference's tokens (0: a tool round) and their
        # cost (None: no tokens, or no price); all None in a room that predates them
        "input_tokens": _number(r, "input_tokens"), "output_tokens": _number(r, "output_tokens"),
        "cached_tokens": _number(r, "cached_tokens"), "cost": _number(r, "cost"),
    }  # fmt: skip


def message_item(r: sqlite3.Row) -> dict[str, Any]:
    return {
        "message_id": r["id"], "seq": r["seq"], "role": r["role"], "text": r["text"],
        "created_at": r["created_at"], "body": json_or_text(r["body"]),
    }  # fmt: skip


def call_item(r: sqlite3.Row) -> dict[str, Any]:
    return {
        "call_id": r["id"], "model_call_id": r["model_call_id"], "step_id": r["step_id"],
        "idx": r["idx"], "tool": r["tool"], "args": json_or_text(r["args"]), "status": r["status"],
        "result": r["result"], "error": r["error"], "suspend_reason": r["suspend_reason"],
        "decision_id": r["decision_id"], "created_at": r["created_at"],
        "updated_at": r["updated_at"], "ended_at": r["ended_at"],
    }  # fmt: skip


def decision_item(r: sqlite3.Row, call: dict[str, Any] | None) -> dict[str, Any]:
    """A decision, and (once applied) what its call then did: the arguments it ran with,
    its final status, result or error. A queued or duplicate decision changed nothing."""
    then = None
    if r["status"] == "applied" and call is not None:
        then = {
            "status": call["status"], "args": call["args"], "result": call["result"],
            "error": call["error"], "ended_at": call["ended_at"],
        }  # fmt: skip
    return {
        "decision_id": r["id"], "call_id": r["call_id"],
        "tool": call["tool"] if call else None, "action": r["action"],
        "args": json_or_text(r["args"]), "result": json_or_text(r["result"]),
        "use_result": bool(r["use_result"]), "reason": r["reason"], "remember": r["remember"],
        "decided_by": r["decided_by"], "status": r["status"], "note": r["note"],
        "created_at": r["created_at"], "applied_at": r["applied_at"], "then": then,
        # a shell call run outside the sandbox, or in it with the network ("default": as the
        # room says; a room that predates the sandbox has none)
        "sandbox": (r["sandbox"] if "sandbox" in r.keys() else None) or "default",
    }  # fmt: skip


def hit_item(r: sqlite3.Row, cursor: str) -> dict[str, Any]:
    kind = "message" if r["message_id"] is not None else "call"
    return {
        "kind": kind, "turn_id": r["turn_id"], "thread_id": r["thread_id"],
        "message_id": r["message_id"], "role": r["role"], "call_id": r["call_id"],
        "tool": r["tool"], "status": r["status"], "created_at": r["created_at"],
        "snippet": r["snippet"], "cursor": cursor,
    }  # fmt: skip


def suspension(turn: dict[str, Any], calls: list[dict[str, Any]],
               steps: list[dict[str, Any]], decisions: list[dict[str, Any]]) -> dict[str, Any] | None:  # fmt: skip
    """Where a turn suspended: its calls that waited (still waiting first), each with the
    step that asked for it and the decision that settled it; None if it never suspended."""
    by_step = {s["step_id"]: s for s in steps}
    by_call = {d["call_id"]: d for d in decisions if d["status"] == "applied"}
    waited = [c for c in calls if c["status"] == "suspended" or c["suspend_reason"] is not None]
    if not waited:
        return None
    waited.sort(key=lambda c: (c["status"] != "suspended", c["step_id"], c["idx"]))
    out = []
    for c in waited:
        step = by_step.get(c["step_id"])
        out.append({
            "call_id": c["call_id"], "tool": c["tool"], "args": c["args"],
            "reason": c["suspend_reason"], "status": c["status"],
            "waiting": c["status"] == "suspended", "step_id": c["step_id"],
            "step_idx": step["idx"] if step else None,
            "since": c["updated_at"] if c["status"] == "suspended" else None,
            "decision_id": by_call[c["call_id"]]["decision_id"] if c["call_id"] in by_call else None,
        })  # fmt: skip
    first = out[0]
    return {
        "turn_id": turn["turn_id"], "waiting": turn["status"] == "waiting",
        "step_id": first["step_id"], "step_idx": first["step_idx"],
        "call_id": first["call_id"], "calls": out,
    }  # fmt: skip


def merge_hits(
    messages: list[sqlite3.Row], calls: list[sqlite3.Row],
    bounds: tuple[int | None, int | None], limit: int,
) -> tuple[list[dict[str, Any]], bool]:  # fmt: skip
    """Merge two newest-first hit lists; each hit's cursor resumes just after it (a prefix
    of each list is taken, so nothing is skipped). Returns the hits and whether more remain."""
    items: list[dict[str, Any]] = []
    (mb, cb), i, j = bounds, 0, 0
    while len(items) < limit and (i < len(messages) or j < len(calls)):
        if j >= len(calls) or (
            i < len(messages) and messages[i]["created_at"] >= calls[j]["created_at"]
        ):
            row, mb, i = messages[i], messages[i]["rid"], i + 1
        else:
            row, cb, j = calls[j], calls[j]["rid"], j + 1
        items.append(hit_item(row, search_cursor(mb, cb)))
    return items, i < len(messages) or j < len(calls)


def told_item(rows: list[sqlite3.Row] | None) -> dict[str, Any] | None:
    """What a turn was told, from `history.turn_instructions`: the hash, the parts (source
    and text, most general first; none when it was told nothing), and whether that differs
    from what the thread's turn before it was told (`changed`; a thread's first turn has no
    turn before it). None: the room predates instructions."""
    if not rows:
        return None
    r = rows[0]
    told = Instructions.from_stored(r["parts"]) if r["parts"] else Instructions()
    hash_, previous = r["hash"] or None, r["previous"] or None
    before = None if r["previous_id"] is None else {"turn_id": r["previous_id"], "hash": previous}
    return {
        "hash": hash_,
        "parts": [{"source": source, "text": text} for source, text in told.parts],
        "changed": before is not None and previous != hash_,
        "previous": before,
    }


def turn_detail(
    row: sqlite3.Row, steps: list[sqlite3.Row], messages: list[sqlite3.Row],
    calls: list[sqlite3.Row], decisions: list[sqlite3.Row],
    *, told: list[sqlite3.Row] | None = None, model: list[sqlite3.Row] | None = None,
    usage: list[sqlite3.Row] | None = None, pruned: list[sqlite3.Row] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """One turn with its steps, messages, calls and decisions (the `--turn` object); its
    row says what it was told (`told`: the rows of `history.turn_instructions`), which
    model answered it (`model`: the rows of `history.turn_model`) and what it spent
    (`usage`: the rows of `history.turn_usage`) and whether retention pruned it (`pruned`:
    the rows of `history.turn_pruned`), each None in a room that predates them."""
    turn = turn_item(row)
    turn["meta"] = json_or_text(row["meta"]) or {}
    turn["told"] = told_item(told)
    if turn["told"] is not None:
        turn["instructions"] = turn["told"]["hash"]
    if model:
        turn["model"] = _column(model[0], "model")
    if usage:
        turn.update({k: _number(usage[0], k) for k in ("cached_tokens", "cost", "unpriced")})
    if pruned:
        _pruned(turn, pruned[0])
    call_items = [call_item(c) for c in calls]
    by_id = {c["call_id"]: c for c in call_items}
    decision_items = [decision_item(d, by_id.get(d["call_id"])) for d in decisions]
    # (a pruned turn may keep the room's newest step row, engine/store/retention.py: not its)
    step_items = [] if turn["pruned_at"] is not None else [step_item(s) for s in steps]
    return {
        "turn": turn,
        "steps": step_items,
        "messages": [message_item(m) for m in messages],
        "calls": call_items,
        "decisions": decision_items,
        "suspended": suspension(turn, call_items, step_items, decision_items),
    }
