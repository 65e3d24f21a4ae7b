"""A replay's calls answered from the record (engine/services/forking.py makes the replay).

A replay answers a recorded turn's message again, in a scratch thread, against another
model, strategy, instructions or rules, with no tool run: its turn's record holds the
recorded turn's calls (`replay.calls`: tool, arguments, status, result, error). A call the
replay makes is matched at the gate (`match`) with an unused recorded call of the same
tool and the same arguments (as canonical JSON): it passes the gate as any call does (rules
and all), and when it runs, `result` gives the recorded outcome instead of the tool's. A
call that matches none (other arguments, or a call the record never made) is suspended for
an operator: approved, it runs for real; cancelled, the model reads so; or given a result.
"""

from __future__ import annotations

from typing import Any

from engine.domain.decisions import args_digest
from engine.tools import ToolResult
from engine.turn.call import CallState
from engine.turn.state import TurnState

MATCHED = "recorded"  # a call's meta: the index of the recorded call it stands for


def _calls(turn: TurnState) -> list[dict[str, Any]]:
    replay = turn.record.get("replay")
    calls = replay.get("calls") if isinstance(replay, dict) else None
    return calls if isinstance(calls, list) else []


def is_replay(turn: TurnState) -> bool:
    return isinstance(turn.record.get("replay"), dict)


def match(turn: TurnState, call: CallState) -> str | None:
    """Match `call` of a replay turn with the record: None when it matched (its meta names
    the recorded call), else why it stops the replay for a decision."""
    recorded = _calls(turn)
    used = {c.meta.get(MATCHED) for c in turn.calls.values() if c is not call}
    same_tool = [(i, r) for i, r in enumerate(recorded) if r.get("tool") == call.tool
                 and i not in used]  # fmt: skip
    digest = args_digest(call.args)
    for index, entry in same_tool:
        if args_digest(entry.get("args")) == digest:
            call.meta[MATCHED] = index
            return None
    if not same_tool:
        return (
            f"replay: the recorded turn made no other {call.tool} call; approve to run it for real"
        )
    want = same_tool[0][1].get("args")
    return (f"replay: the recorded {call.tool} call had other arguments "
            f"({_differences(want, call.args)}); approve to run it for real")  # fmt: skip


def result(turn: TurnState, call: CallState) -> ToolResult | None:
    """The recorded outcome a matched call of a replay gets instead of running (None: it
    runs, an operator approved it)."""
    index = call.meta.get(MATCHED)
    recorded = _calls(turn)
    if not isinstance(index, int) or not 0 <= index < len(recorded):
        return None
    entry = recorded[index]
    if entry.get("status") == "succeeded":
        return ToolResult.success(entry.get("result") or "")
    return ToolResult.error(
        str(entry.get("error") or f"it was {entry.get('status')} in the record")
    )


def _differences(want: Any, got: Any) -> str:
    """The keys whose values differ, in a few words."""
    if not isinstance(want, dict) or not isinstance(got, dict):
        return "not the same arguments"
    keys = sorted(set(want) | set(got))
    changed = [k for k in keys if want.get(k) != got.get(k)]
    return ", ".join(f"{k}: {_short(want.get(k))} -> {_short(got.get(k))}" for k in changed[:4])


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
