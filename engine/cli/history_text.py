"""`agentdeck history` as text: one line per turn or hit, and one turn in a few lines."""

from __future__ import annotations

import json
import time
from typing import Any

from engine.api.history import History
from engine.domain.usage import spent_text

SPENT_WIDTH = 21  # `$0.0042 · 4.1k tokens`, `12k tokens · no price`: most fit


def _oneline(text: Any, width: int) -> str:
    """Text from the room on one line, without the terminal's control or format characters."""
    line = " ".join(str(text or "").split())
    return "".join(c if c.isprintable() else " " for c in line)[:width]


def _clock(at: float | None, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return time.strftime(fmt, time.localtime(at)) if at else "-"


def spent(item: dict[str, Any]) -> str:
    """What a turn or a step spent (`$0.0042 · 12k tokens`, `15 tokens · no price`); ""
    for one that spent nothing (a tool round, a turn that never reached its model)."""
    usage = History.spent(item)
    return spent_text(usage) if usage.tokens else ""


def turn_line(t: dict[str, Any]) -> str:
    state = t["status"] + (f"/{t['reason']}" if t["reason"] else "")
    calls = f"{t['calls']:>2} call" + ("s" if t["calls"] != 1 else " ")
    pruned = f"  · {pruned_text(t)}" if t.get("pruned_at") is not None else ""
    made = f"  · {_oneline(t['origin']['said'], 120)}" if t.get("origin") else ""
    return (f"{t['turn_id']}  {_oneline(t['thread_id'], 120):<20} {state:<18} {calls}  "
            f"{spent(t):<{SPENT_WIDTH}}  {_oneline(t['text'], 60)}{pruned}{made}")  # fmt: skip


def thread_line(h: dict[str, Any]) -> str:
    """A thread of `history --threads`, drawn in its tree (`branch`): when it was last
    used, its group and turns, and where it came from when a fork or a replay made it."""
    turns = f"{h['turns'] or 0:>4} turn" + ("s" if h["turns"] != 1 else " ")
    name = h.get("branch", "") + _oneline(h["thread_id"], 200)
    made = f"  {_oneline(h['origin']['said'], 120)}" if h.get("origin") else ""
    more = f"  (+{h['forks_more']} more made from it)" if h.get("forks_more") else ""
    return (f"{_clock(h['updated_at'], '%Y-%m-%d %H:%M')}  {name:<30} {_oneline(h['group'], 12):<8}"
            f"{turns}{made}{more}")  # fmt: skip


def pruned_text(t: dict[str, Any]) -> str:
    """What retention left of a pruned turn (engine/services/retention.py)."""
    return f"steps pruned {_clock(t['pruned_at'], '%Y-%m-%d')}"


def hit_line(h: dict[str, Any]) -> str:
    where = h["tool"] if h["kind"] == "call" else h["role"]
    return (f"{_clock(h['created_at'], '%Y-%m-%d %H:%M')}  {h['turn_id']}  "
            f"{_oneline(h['thread_id'], 120):<20} "
            f"{h['kind']:<7} {where:<10} {_oneline(h['snippet'], 200)}")  # fmt: skip


def turn_lines(detail: dict[str, Any]) -> list[str]:
    """One turn: the model that answered it, its steps with their calls, its decisions,
    where it suspended, its answer."""
    t = detail["turn"]
    state = t["status"] + (f"/{t['reason']}" if t["reason"] else "")
    by = f", answered by {t['model']}" if t.get("model") else ""  # (None: an older room)
    out = [
        f"turn {t['turn_id']} on {_oneline(t['thread_id'], 120)} ({t['group']}, {t['origin']}): "
        f"{state}{by}",
        f"  {_clock(t['created_at'])} from {t['sender']}: {_oneline(t['text'], 200)}",
    ]
    if (origin := detail.get("origin")) is not None:
        out.append(f"  {origin_line(origin)}")
    if (told := told_line(t.get("told"))) is not None:
        out.append(f"  {told}")
    if said := spent(t):
        out.append(f"  spent {said}{tokens_line(t)}")
    calls_by_step: dict[int, list[dict[str, Any]]] = {}
    for c in detail["calls"]:
        calls_by_step.setdefault(c["step_id"], []).append(c)
    if t.get("pruned_at") is not None:  # its steps and outputs went; its calls and decisions stay
        calls = f"{t['calls']} call" + ("s" if t["calls"] != 1 else "")
        out.append(f"  {pruned_text(t)} ({t['steps']} steps, {calls}: results and events went,"
                   " calls and decisions stay)")  # fmt: skip
        for c in detail["calls"]:
            out.append(f"    call {c['call_id']} {c['tool']} -> {c['status']}")
    for s in detail["steps"]:
        cost = f" ({said})" if (said := spent(s)) else ""
        out.append(f"  step {s['idx']} {s['kind']:<10} {s['status']:<9} id {s['step_id']:<4} "
                   f"{_oneline(s['summary'], 80)}{cost}")  # fmt: skip
        for c in calls_by_step.get(s["step_id"], []):
            said = c["result"] if c["status"] == "succeeded" else c["error"] or c["suspend_reason"]
            out.append(f"    call {c['call_id']} {c['tool']} {_oneline(json.dumps(c['args']), 80)}"
                       f" -> {c['status']}: {_oneline(said, 80)}")  # fmt: skip
    for d in detail["decisions"]:
        edit = f" args {json.dumps(d['args'])}" if d["args"] is not None else ""
        then = f" -> {d['then']['status']}" if d["then"] else ""
        if d.get("sandbox") == "outside":
            edit += " OUTSIDE THE SANDBOX"
        elif d.get("sandbox") == "network":
            edit += " with the network"
        out.append(f"  decision {d['decision_id']} on {d['call_id']}: {d['action']}{edit} by "
                   f"{d['decided_by']} at {_clock(d['created_at'])} ({d['status']}){then}")  # fmt: skip
    if (sus := detail["suspended"]) is not None:
        still = " (still waiting)" if sus["waiting"] else ""
        at = f" at step {sus['step_idx']}," if sus["step_idx"] is not None else ""  # (pruned)
        out.append(f"  suspended{at} call {sus['call_id']}{still}")
    if t["answer"]:
        out.append(f"  answer: {_oneline(t['answer'], 200)}")
    for made in detail.get("forks", []):
        out.append(f"  {made_line(made)}")
    return out


def origin_line(origin: dict[str, Any]) -> str:
    """Where a turn's thread came from (a fork or a replay made it)."""
    edited = origin["edited"]
    changed = f", entr{'y' if len(edited) == 1 else 'ies'} {', '.join(edited)} edited" \
        if edited else ""  # fmt: skip
    return (f"thread {_oneline(origin['thread_id'], 120)}: {_oneline(origin['said'], 200)}, "
            f"{origin['upto']} entries copied{changed}, by {_oneline(origin['made_by'], 60)}")  # fmt: skip


def made_line(made: dict[str, Any]) -> str:
    """A thread made from a turn: a fork of one of its steps, or a replay of it."""
    what = "replayed in" if made["kind"] == "replay" else f"forked at step {made['from_step']} to"
    return (f"{what} {_oneline(made['thread_id'], 120)} ({_oneline(made['group'], 40)}, by "
            f"{_oneline(made['made_by'], 60)} at {_clock(made['made_at'])})")  # fmt: skip


def tokens_line(t: dict[str, Any]) -> str:
    """A turn's tokens in, out and (of the input) cached, after what it spent."""
    cached = f", {t['cached_tokens']} cached" if t.get("cached_tokens") else ""
    return f": {t['input_tokens'] or 0} in{cached}, {t['output_tokens'] or 0} out"


def told_line(told: dict[str, Any] | None) -> str | None:
    """What the turn was told: its hash and the parts' sources, and whether that changed
    since the thread's turn before it (None: nothing to say, a room that predates them or a
    turn told nothing, as the one before it)."""
    if told is None or (told["hash"] is None and not told["changed"]):
        return None
    if told["hash"] is None:
        line = "told no instructions"
    else:
        sources = ", ".join(p["source"] for p in told["parts"]) or "their text is not kept"
        line = f"told instructions {told['hash']}: {sources}"
    if told["changed"]:
        line += f" (changed since turn {told['previous']['turn_id']})"
    return line
