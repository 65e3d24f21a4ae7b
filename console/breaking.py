"""Where the operator asked for a breakpoint (`B` on a call in the calls pane, or on a step
in the timeline), and what the breakpoint dialog proposes from there.

From a call: a pause before its tool's calls (or after their results) whose arguments
match the narrowest pattern for this call (engine.domain.rules.narrowest: a shell call's
exact command), in its thread. From an inference step: a pause before each inference of
its thread. From a round of calls: before a call of its tool when the round ran one tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from console.groups import group_of
from console.pause import BREAKPOINT
from console.state import DeckState
from console.steps import ROUNDS, StepRow


@dataclass(frozen=True)
class Origin:
    """What the dialog starts from: the thread (and its group) and, from a call, its tool
    and arguments (the pattern proposed, and what "matches this call" is checked on)."""

    thread_id: str = ""
    group: str = ""
    kind: str = "call"
    tool: str = ""
    args: Any = None
    call: str = ""  # the call's id, when it is from one ("" otherwise)


class BreakAt(Message):
    """The operator asked for a breakpoint at a call (`call_id`) or a step (`step`)."""

    def __init__(self, call_id: str = "", step: StepRow | None = None) -> None:
        super().__init__()
        self.call_id, self.step = call_id, step


def origin_of(state: DeckState, ask: BreakAt) -> Origin | str:
    """The dialog's start for what `ask` names, or why there is none (a string)."""
    if ask.call_id:
        call = state.calls.get(ask.call_id)
        if call is None:
            return "That call is no longer shown."
        turn = state.turns.get(call.turn_id)
        group = group_of(call.thread_id, turn.group if turn is not None else None)
        if call.tool == BREAKPOINT:
            return ("That is a pause, not a call: B on a call sets a breakpoint for its tool "
                    "(b lists the breakpoints).")  # fmt: skip
        return Origin(call.thread_id, group, "call", call.tool, call.args, call.call_id)
    step = ask.step
    if step is None:
        return "No step is selected."
    group = group_of(step.thread_id, step.group)
    if step.kind not in ROUNDS:
        return Origin(step.thread_id, group, "inference")
    tools = {c.tool for c in state.calls_of(step.turn_id) if c.tool != BREAKPOINT}
    return Origin(step.thread_id, group, "call", tools.pop() if len(tools) == 1 else "")
