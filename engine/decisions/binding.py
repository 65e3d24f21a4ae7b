"""Decisions bound to what was approved: the hash of the arguments an operator saw.

An approval names the arguments it was given for by `args_hash`, the SHA-256 of their
canonical JSON (keys sorted, no spaces, UTF-8): of the call's arguments as the operator's
console or `agentdeck decide` showed them, or of the edited ones when the operator edited
them. The call runs only with arguments of that hash; anything else is refused, and the
call goes on waiting for a decision.

Who must bind: every approval that runs a tool and reaches the room through its client
(the console, `agentdeck decide`, the API). Decisions the runtime makes itself (a
deadline's) and an embedding program's `Runtime.decide` may come without a hash (the
program decides what it approves); one that has a hash is checked all the same. So is a
decision recorded before hashes existed: it has none, and applies as it always did.
"""

from __future__ import annotations

from typing import Any

from engine.domain.breakpoints import changes
from engine.domain.decisions import Decision, args_digest
from engine.lifecycle.call import Awaiting

__all__ = ["args_digest", "fits", "refusal", "runs_tool", "why_not"]


def runs_tool(decision: Decision) -> bool:
    """Whether `decision` would run its call's tool (an approval that uses no result, or a
    rerun after a crash)."""
    return decision.action in ("rerun", "step") or (
        decision.action == "resume" and not decision.use_result
    )


def why_not(
    decision: Decision, call_args: Any, awaiting: Awaiting | None, *, need_hash: bool = False
) -> str | None:
    """Why `decision` may not apply to a call with `call_args` that awaits a decision or a
    review after a crash (engine.decisions.review), or None: it fits the call and is bound
    to what it would run."""
    return (fits(decision, awaiting) or refusal(decision, call_args, need_hash=need_hash)
            or _edit(decision, call_args, awaiting))  # fmt: skip


def _edit(decision: Decision, call_args: Any, awaiting: Awaiting | None) -> str | None:
    """Why an edit of a breakpoint's pause cannot apply (engine/domain/breakpoints.py)."""
    if awaiting != "breakpoint" or decision.args is None:
        return None
    try:
        changes(call_args, decision.args)
    except ValueError as exc:
        return str(exc)
    return None


def fits(decision: Decision, awaiting: Awaiting | None) -> str | None:
    """Why `decision`'s action does not fit a call that awaits `awaiting`, or None. A call
    whose outcome a crash left unknown may have run already: a plain approval or a cancel
    could hide that, so it takes only `rerun` (run it again, knowingly), a result (it
    succeeded) or `fail`."""
    action, reviewed = decision.action, awaiting == "review"
    if awaiting == "breakpoint":
        if action in ("fail", "rerun") or decision.use_result or decision.remember:
            return ("a breakpoint's pause takes continue (resume, maybe with what it paused "
                    "on edited), step, or cancel (the turn ends)")  # fmt: skip
        return None
    if action == "step":
        return "`step` is for a breakpoint's pause; this call waits for an approval"
    if reviewed and action == "resume" and not decision.use_result:
        return ("its outcome is unknown after a crash and it may have run already: run it "
                "again explicitly (rerun), or mark it succeeded (a result) or failed")  # fmt: skip
    if reviewed and action == "cancel":
        return "its outcome is unknown after a crash: mark it failed instead of cancelling it"
    if not reviewed and action in ("fail", "rerun"):
        return (f"`{action}` is for a call whose outcome a crash left unknown; this one "
                "waits for an approval: approve or cancel it")  # fmt: skip
    return None


def refusal(decision: Decision, call_args: Any, *, need_hash: bool = False) -> str | None:
    """Why `decision` may not run a call whose arguments are `call_args` (None: it may).

    The arguments it would run with are its edited ones, if any, else the call's. With
    `need_hash` (a decision from outside the runtime), an approval with no hash is refused.
    """
    if not runs_tool(decision):
        return None
    if decision.args_hash is None:
        if need_hash:
            return ("an approval must name the arguments it approves (args_hash: the SHA-256 "
                    "of their canonical JSON, as /v1/pending gives it); nothing was run")  # fmt: skip
        return None
    would_run = decision.args if decision.args is not None else call_args
    if args_digest(would_run) != decision.args_hash:
        which = "edited arguments" if decision.args is not None else "call's arguments"
        return (f"the {which} hash to {args_digest(would_run)[:12]}, not to the "
                f"{decision.args_hash[:12]} approved: they are not the arguments the operator "
                "was shown; nothing was run, decide again")  # fmt: skip
    return None
