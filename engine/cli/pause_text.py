"""How a breakpoint's pause reads on a terminal: `agentdeck pending` and a turn's report.

A pause is a pending call of the pseudo-tool `breakpoint` that awaits `breakpoint`
(engine/turn/breaks.py): its arguments say where the turn paused (`at`, `round`) and what
it holds, the pending messages (`messages`) or the held calls or results (`calls`). Here
they read as a headline and a line each, from the API's JSON, so the quick path
(engine/cli/light.py) prints them without pydantic. Everything shown came from the room
(a model's words, a tool's output, an operator's thread name): it is printed as text, on
one line, with no control characters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

AT = {"inference": "before an inference", "call": "before calls", "result": "after results"}
# What an edit may change in each kind of pause (engine/domain/breakpoints.py, EDITABLE).
EDITS = {"inference": "a message's `text` in `messages`", "call": "a call's `args` in `calls`",
         "result": "a call's `result` in `calls`"}  # fmt: skip
SHOWN = 5  # entries of a pause listed; `pending --json` has them all


def is_pause(call: Mapping[str, Any]) -> bool:
    return call.get("awaiting") == "breakpoint"


def flat(value: Any, limit: int = 160) -> str:
    """`value` as one line of printable text (JSON when it is not a string), cut at `limit`."""
    if not isinstance(value, str):
        value = json.dumps(value, ensure_ascii=False, default=str)
    line = "".join(c if c.isprintable() else " " for c in " ".join(value.split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _args(call: Mapping[str, Any]) -> dict[str, Any]:
    args = call.get("args")
    return args if isinstance(args, dict) else {}


def headline(call: Mapping[str, Any], turn_id: str, thread_id: str) -> str:
    """`⏸ paused before an inference (round 2) — turn t12 thread X`."""
    args = _args(call)
    at = AT.get(str(args.get("at")), "at a breakpoint")
    rnd = args.get("round")
    where = f" (round {flat(rnd, 12)})" if rnd is not None else ""
    return f"⏸ paused {at}{where} — turn {flat(turn_id, 80)} thread {flat(thread_id, 120)}"


def details(call: Mapping[str, Any]) -> list[str]:
    """What made the pause, what it holds (a line each) and how to decide it."""
    args = _args(call)
    at = str(args.get("at"))
    reason = str(call.get("reason") or "")
    why = reason.partition(": ")[2] if reason.startswith("paused ") else reason
    lines = [("after a step" if why == "a step" else f"at {flat(why, 200)}")] if why else []
    if at == "inference":
        entries = [e for e in args.get("messages") or () if isinstance(e, dict)]
        held = [f"pending {flat(e.get('role'), 20)} message: {flat(e.get('text'))}"
                for e in entries]  # fmt: skip
    else:
        entries = [e for e in args.get("calls") or () if isinstance(e, dict)]
        held = [_held(e) if at == "call" else _result(e) for e in entries]
    lines += held[:SHOWN]
    if len(held) > SHOWN:
        lines.append(f"… and {len(held) - SHOWN} more (`agentdeck pending --json` has them all)")
    call_id = flat(call.get("call_id"), 80)
    edit = f" (edit {EDITS[at]}: --args JSON)" if at in EDITS else ""
    lines.append(f"decide: agentdeck decide {call_id} continue|step|cancel{edit}")
    return lines


def _held(entry: Mapping[str, Any]) -> str:
    return (f"held call {flat(entry.get('call_id'), 80)}: {flat(entry.get('tool'), 80)} "
            f"{flat(entry.get('args'))}")  # fmt: skip


def _result(entry: Mapping[str, Any]) -> str:
    status = str(entry.get("status"))
    said = entry.get("result") if status == "succeeded" else entry.get("error")
    return (f"held result of {flat(entry.get('call_id'), 80)} {flat(entry.get('tool'), 80)} "
            f"({flat(status, 20)}): {flat('' if said is None else said)}")  # fmt: skip
