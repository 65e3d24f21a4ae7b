"""Where a turn pauses for an operator (engine/domain/breakpoints.py), and how it goes on.

The loop asks here at its three places: before an inference (`before_inference`), when
the model's calls reach the gate (`hold_calls`: a held call stays `new`, ungated) and when
results would enter the conversation (`answer`: a held result stays out of it). A pause
is a suspended call of the pseudo-tool `breakpoint` whose arguments say what it paused on
(`at`, the turn's `round`, and the `messages` or `calls` an operator may edit); it never
enters the conversation, and while it is open the model is not asked again.

A decision on a pause (`carry_out`): `cancel` ends the turn `cancelled`; `resume` and
`step` apply the operator's edits, release what was held (held calls pass the gate then,
rules and all; held results enter the conversation) and, for a step, mark the pause
`stepped`: the turn pauses again at the next place after one inference (a step from an
inference or a result pause) or one tool round (from a call pause). Every part of it is in
the calls table, so a pause and a step survive a restart as any suspended call does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from engine.domain.breakpoints import BREAKPOINT, STEP, Breakpoint, Kind, changes
from engine.domain.decisions import Decision
from engine.lifecycle import CallStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.store import Op
from engine.store import breakpoints as pointed
from engine.turn.call import ANSWERED, CallState
from engine.turn.context import TurnContext
from engine.turn.conversation import Conversation
from engine.turn.plugins import StopRequest
from engine.turn.state import TurnState, as_json

CONTINUED, STEPPED = "continued", "stepped"  # a pause's result: how the operator went on


class Site(Protocol):
    """What pausing needs of the turn's loop (engine/turn/loop.py)."""

    ctx: TurnContext
    turn: TurnState
    conv: Conversation
    ops: list[Op]
    events: list[Any]
    stop: StopRequest | None
    open_step: tuple[int, str, float] | None
    breakable: bool

    def answer(self, call: CallState) -> None: ...
    def step_start(self, kind: str) -> int: ...
    def step_end(self, status: str, summary: str) -> None: ...
    async def commit(self, checkpoint: str | None, touched: Sequence[CallState] = ...) -> None: ...


def is_pause(call: CallState) -> bool:
    return call.tool == BREAKPOINT and "pause" in call.meta  # (as TurnState.add_calls keeps)


def pauses(turn: TurnState) -> list[CallState]:
    """The turn's pauses, oldest first."""
    return turn.pauses


def open_pause(turn: TurnState) -> CallState | None:
    return next((c for c in pauses(turn) if not c.status.terminal), None)


def held(turn: TurnState) -> set[str]:
    """The calls an open pause holds (their gate or their answer waits for it)."""
    return {entry["call_id"] for p in pauses(turn) if not p.status.terminal
            for entry in _entries(p)}  # fmt: skip


def released(turn: TurnState, calls: Sequence[CallState]) -> list[CallState]:
    """The calls the pauses among `calls` held, now that those are decided."""
    ids = [e["call_id"] for c in calls if is_pause(c) and c.status.terminal for e in _entries(c)]
    return [turn.calls[i] for i in ids if i in turn.calls]


def _entries(pause: CallState) -> list[dict[str, Any]]:
    args = pause.args if isinstance(pause.args, dict) else {}
    return [e for e in args.get("calls", ()) if isinstance(e, dict) and "call_id" in e]


def _watching(loop: Site) -> bool:
    """Whether this turn can pause: a breakpoint is set, or it paused before."""
    return loop.breakable and (bool(loop.ctx.breakpoints) or bool(loop.turn.pauses))


def _step_due(turn: TurnState, at: Kind) -> bool:
    """Whether a step the operator took pauses here: after one inference (a step from an
    inference or a result pause pauses at the next calls), or one tool round (from a call
    pause: at its results, or before the next inference)."""
    done = pauses(turn)
    if not done or done[-1].status is not CallStatus.SUCCEEDED or done[-1].result != STEPPED:
        return False
    came_from = done[-1].args.get("at") if isinstance(done[-1].args, dict) else None
    return at == "call" if came_from != "call" else at in ("result", "inference")


def _hit(loop: Site, kind: Kind, tool: str | None = None, args: Any = None,
         hit: Sequence[Breakpoint] = ()) -> Breakpoint | None:  # fmt: skip
    """The breakpoint that pauses here: one `hit` already at this place (a once breakpoint
    holds every call of its round it matches), else the book's, its hit counted."""
    book, turn = loop.ctx.breakpoints, loop.turn
    for point in hit:
        if point.matches(tool, args, book.workspace):
            return point
    if not book:
        return None
    return book.hit(kind, turn.thread_id, turn.group, loop.ctx.clock, tool, args)


def _pause(loop: Site, at: Kind, points: list[Breakpoint], what: dict[str, Any],
           step_id: int) -> CallState:  # fmt: skip
    """A new pause: a suspended `breakpoint` call (its hits written with it)."""
    turn, now = loop.turn, loop.ctx.clock()
    why = points[0].describe() if points else "a step"
    call = CallState(
        id=loop.ctx.new_id("c"), model_call_id=f"pause_{len(turn.calls)}", turn_id=turn.id,
        thread_id=turn.thread_id, step_id=step_id, idx=len(turn.calls), tool=BREAKPOINT,
        args={"at": at, "round": turn.rounds, **what},
        meta={"pause": points[0].id if points else STEP}, has_message=ANSWERED,
        created_at=now, updated_at=now,
    )  # fmt: skip
    where = {"inference": "before an inference", "call": "before calls",
             "result": "after results"}[at]  # fmt: skip
    call.move(CallStatus.SUSPENDED, now, suspend_reason=f"paused {where}: {why}",
              awaiting="breakpoint")  # fmt: skip
    turn.add_calls([call])
    loop.ops += [pointed.hit(p, call.id) for p in points]
    if any(p.scope == "once" for p in points):  # spent: every runtime on the store reads so
        loop.ops += loop.ctx.coordinator.rules_changed()
    return call


async def before_inference(loop: Site) -> bool:
    """Whether the turn pauses (or stays paused) before its next inference; a new pause is
    committed here."""
    if not _watching(loop):
        return False
    turn = loop.turn
    if open_pause(turn) is not None:
        return True
    if any(p.args.get("at") == "inference" and p.args.get("round") == turn.rounds
           for p in pauses(turn)):  # fmt: skip
        return False  # the operator went on from a pause here already
    point = _hit(loop, "inference")
    if point is None and not _step_due(turn, "inference"):
        return False
    messages = [{"seq": seq, "role": loop.conv.messages[seq].role,
                 "text": loop.conv.messages[seq].text} for seq in loop.conv.unread()]  # fmt: skip
    step_id = loop.step_start("breakpoint")
    call = _pause(loop, "inference", [point] if point else [], {"messages": messages}, step_id)
    loop.step_end("succeeded", call.suspend_reason or "paused")
    await loop.commit(None, [call])
    return True


def hold_calls(loop: Site, calls: list[CallState], step_id: int) -> CallState | None:
    """The pause (not committed: it goes with the calls) that holds the calls of `calls` a
    call breakpoint matches, or all of them after a step; None when none is held."""
    if not calls or not _watching(loop):
        return None
    stepping = _step_due(loop.turn, "call")
    holding: list[CallState] = []
    points: list[Breakpoint] = []
    for call in calls:
        point = _hit(loop, "call", call.tool, call.args, points)
        if point is not None and point.id not in {p.id for p in points}:
            points.append(point)
        if stepping or point is not None:
            holding.append(call)
    if not holding:
        return None
    what = [{"call_id": c.id, "tool": c.tool, "args": c.args} for c in holding]
    pause = _pause(loop, "call", points, {"calls": what}, step_id)
    for call in holding:  # held `new`: said, so the calls pane shows them waiting
        call.say(pause.created_at)
    return pause


def answer(loop: Site, calls: Sequence[CallState]) -> CallState | None:
    """Answer the settled calls of `calls` in the conversation, but those a result
    breakpoint (or a step) holds: the pause that holds them is returned (None: none)."""
    watching = _watching(loop)
    keep = held(loop.turn) if watching else set()
    ready = [c for c in calls if c.status.terminal and c.has_message != ANSWERED
             and not is_pause(c) and c.id not in keep]  # fmt: skip
    holding: list[CallState] = []
    points: list[Breakpoint] = []
    if ready and watching:
        stepping = _step_due(loop.turn, "result")
        once = {e["call_id"] for p in pauses(loop.turn) if p.args.get("at") == "result"
                for e in _entries(p)}  # a result is held once  # fmt: skip
        for call in ready:
            if call.id in once:
                continue
            point = _hit(loop, "result", call.tool, call.args, points)
            if point is not None and point.id not in {p.id for p in points}:
                points.append(point)
            if stepping or point is not None:
                holding.append(call)
    for call in ready:
        if call not in holding:
            loop.answer(call)
    if not holding:
        return None
    what = [{"call_id": c.id, "tool": c.tool, "status": c.status.value, "result": c.result,
             "error": c.error} for c in holding]  # fmt: skip
    step_id = loop.open_step[0] if loop.open_step else holding[0].step_id
    return _pause(loop, "result", points, {"calls": what}, step_id)


def carry_out(loop: Site, decision: Decision, pause: CallState,
              clean: Any) -> str | None:  # fmt: skip
    """What a decision applied to a `resuming` pause makes of the turn: `cancel` ends it
    (`loop.stop`), `resume` and `step` go on with the operator's edits (the held calls,
    released, pass the gate in the caller). Returns why the edit cannot apply (the pause
    then waits again), or None."""
    now = loop.ctx.clock()
    if decision.action == "cancel":
        pause.move(CallStatus.CANCELLED, now, error=decision.denial_text())
        detail = f"cancelled at a breakpoint by {decision.decided_by}"
        loop.stop = StopRequest(turn_lifecycle.CANCELLED,
                                detail + (f": {decision.reason}" if decision.reason else ""))  # fmt: skip
        return None
    try:
        edits = [] if decision.args is None else changes(pause.args, decision.args)
    except ValueError as exc:  # (checked when it was recorded: a room from elsewhere)
        return str(exc)
    unread = set(loop.conv.unread())
    for where, field, _ in edits:  # all or nothing: each is checked before any applies
        if field == "text" and where not in unread:
            return f"message {where} was read by the model already: it cannot change"
        if field != "text" and str(where) not in loop.turn.calls:
            return f"call {where} is not this turn's"
    for where, field, value in edits:
        if field == "text":
            op, event = loop.conv.edit_unread(int(where), value, loop.turn.id, now)
            loop.ops.append(op)
            loop.events.append(event)
            continue
        target = loop.turn.calls[str(where)]
        if field == "args":
            target.args = value
        else:  # a held result, as a tool's text is kept: masked, cut (a failed call's error)
            text = clean(value if isinstance(value, str) else as_json(value))
            if target.status is CallStatus.SUCCEEDED:
                target.result = text
            else:
                target.error = text
    went = STEPPED if decision.action == "step" else CONTINUED
    pause.move(CallStatus.SUCCEEDED, now, result=went, error=None)
    return None
