"""The question each decision key asks before anything is decided, and the decision made
from the answer. Approve asks nothing; the others take a reason the model will see, open
the arguments in an editor (a diff is shown before approving), or show what a remembered
approval will allow from now on (its pattern, editable, and its scope). An approval
is bound to the arguments the operator was shown (`seen`), or to the edited ones; one to run
a shell call outside the sandbox (or with the network) too, and it is never remembered.

On a breakpoint's pause (console/pause.py): continue and step ask nothing and are bound to
what it showed; edit opens what it holds in the editor (checked before the diff is shown)
and continues; ending the turn asks first, No the default."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from textual.app import App

from console.format import one_line, short_id
from console.pause import END_TURN, where
from console.screens.confirm import ConfirmScreen
from console.screens.prompt import PromptScreen
from console.state import CallRow
from engine.domain.decisions import Decision


async def ask_decision(
    app: App[object],
    action: str,
    call: CallRow,
    make_id: Callable[[], str],
    workspace: Path | None = None,
) -> Decision | None:
    """The decision `action` makes on `call`, or None when the operator backs out."""
    if action in ("approve", "continue"):  # (continue: go on from a pause)
        return Decision.approve(call.call_id, seen=call.args, id=make_id())
    if action == "step":  # one inference or one tool round, then pause again
        return Decision.step(call.call_id, seen=call.args, id=make_id())
    if action == "end_turn":  # cancel at a pause: the whole turn ends
        yes = await app.push_screen_wait(ConfirmScreen(
            f"{END_TURN} (paused {where(call)}, turn {short_id(call.turn_id)} on "
            f"{call.thread_id})", yes="End the turn", no="Keep it paused"))  # fmt: skip
        return Decision.cancel(call.call_id, "", id=make_id()) if yes else None
    if action == "edit_pause":
        from console.screens.edit_args import EditArgsScreen

        edited = await app.push_screen_wait(EditArgsScreen(call.tool, call.args, pause=True))
        if edited is None:
            return None
        return Decision.approve(call.call_id, seen=call.args, args=edited, id=make_id())
    if action in ("outside", "network"):  # O, N: this shell call runs another way, once
        return Decision.approve(call.call_id, seen=call.args, sandbox=action, id=make_id())
    if action in ("remember", "remember_room"):  # A: for the thread, R: for the room
        from console.screens.remember import RememberScreen  # load on use

        scope: Literal["thread", "room"] = "room" if action == "remember_room" else "thread"
        pattern = await app.push_screen_wait(RememberScreen(call, scope, workspace))
        if pattern is None:
            return None
        return Decision.approve(call.call_id, seen=call.args, remember=scope, pattern=pattern,
                                id=make_id())  # fmt: skip
    if action == "cancel":
        reason = await app.push_screen_wait(PromptScreen(
            f"Cancel {call.tool} {one_line(call.args, 50)} on {call.thread_id} "
            f"(turn {short_id(call.turn_id)})? Reason (optional; the model sees it):",
            "reason"))  # fmt: skip
        return None if reason is None else Decision.cancel(call.call_id, reason, id=make_id())
    if action == "edit":
        from console.screens.edit_args import EditArgsScreen  # TextArea: load on use

        edited = await app.push_screen_wait(EditArgsScreen(call.tool, call.args))
        if edited is None:
            return None
        return Decision.approve(call.call_id, seen=call.args, args=edited, id=make_id())
    if action == "use":
        result = await app.push_screen_wait(PromptScreen(
            f"Use a result instead of running {call.tool} {one_line(call.args, 50)} on "
            f"{call.thread_id}: the model reads it as the tool's output. Result:", "result"))  # fmt: skip
        if not result:
            return None
        return Decision.with_result(call.call_id, result, id=make_id())
    raise ValueError(f"unknown decision action {action!r}")
