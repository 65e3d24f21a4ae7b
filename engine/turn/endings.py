"""How a turn's run ends: `waiting` (every outcome is suspended), `done` (with a reason), or
a waiting turn running again. Each writes the turn's new status with its checkpoint, and a
`done` turn leaves no open step or call behind and owes its channel the answer."""

from __future__ import annotations

from typing import Protocol

from engine.domain.events import TurnChanged
from engine.lifecycle import CallStatus, TurnStatus
from engine.lifecycle import turn as turn_lifecycle
from engine.store.outbox import answer_owed
from engine.turn import replay
from engine.turn.call import ANSWERED
from engine.turn.conversation import Conversation
from engine.turn.plugins import StopRequest
from engine.turn.state import one_line


class Site(replay.Site, Protocol):
    """What an ending needs of the turn's loop (engine/turn/loop.py)."""

    conv: Conversation
    stop: StopRequest | None
    open_step: tuple[int, str, float] | None

    async def run_end(self) -> None: ...


async def reopen(loop: Site) -> None:
    """A waiting turn runs again (a decision arrived): `waiting -> running`, committed."""
    _set(loop, TurnStatus.RUNNING, None, None)
    await loop.commit(None)


async def finish_stopped(loop: Site) -> None:
    """End the turn as the plugin that asked it to stop said (`loop.stop`); none did: it
    paused at a breakpoint, and waits."""
    if loop.stop is None:
        return await finish_waiting(loop)
    await finish(loop, loop.stop.reason, loop.stop.detail)


async def finish_waiting(loop: Site) -> None:
    """Every outcome is suspended: the turn waits for a decision."""
    _set(loop, TurnStatus.WAITING, turn_lifecycle.SUSPENDED, None)
    await loop.run_end()
    await loop.commit("run_finished")


async def finish(loop: Site, reason: str, detail: str | None = None) -> None:
    """End the turn `done`; an open step ends with it, and open calls are cancelled and
    answered, so nothing dangles."""
    now = loop.ctx.clock()
    if loop.open_step is not None:  # an error or a cancel cut the step short
        status = "cancelled" if reason == turn_lifecycle.CANCELLED else "failed"
        loop.step_end(status, one_line(detail or reason, 200))
    calls = list(loop.turn.calls.values())
    for call in calls:
        if not call.status.terminal:  # `new` ones never ran: cancelled from there
            call.move(CallStatus.CANCELLED, now, error=f"turn ended: {reason}")
        if call.has_message != ANSWERED:
            loop.answer(call)
    if reason == turn_lifecycle.NATURAL and loop.turn.final_text is None:
        loop.turn.final_text = _committed_answer(loop)  # resumed after its answer
    _set(loop, TurnStatus.DONE, reason, detail)
    _answer_owed(loop, reason)
    await loop.run_end()
    await loop.commit("run_finished", calls)


def _committed_answer(loop: Site) -> str | None:
    """The answer a previous run committed (assistant_turn_committed) and did not end the
    turn with (a kill before run_finished): the conversation's last message, when it is
    the model's and calls nothing. Without it the resumed turn would end with no text, and
    its channel would never get the answer."""
    messages = loop.conv.messages
    last = messages[-1] if messages else None
    if last is None or last.role != "assistant" or last.tool_calls:
        return None
    return last.text


def _answer_owed(loop: Site, reason: str) -> None:
    """A turn from a delivering channel that ends with an answer owes it to the channel:
    its outbox row goes into this, the turn's final checkpoint (engine/delivery sends it).
    One that fails or is cancelled owes nothing: a failure's detail is the operator's to
    read (a provider's message, an exception), not the user's, and a cancel is an
    operator's choice that nothing be answered; both show in the console."""
    turn, failed = loop.turn, (turn_lifecycle.ERROR, turn_lifecycle.CANCELLED)
    if turn.channel in loop.ctx.delivering and turn.final_text and reason not in failed:
        op, event = answer_owed(turn.id, turn.thread_id, turn.channel, turn.reply,
                                turn.final_text, loop.ctx.clock())  # fmt: skip
        loop.ops.append(op)
        loop.events.append(event)


def _set(loop: Site, status: TurnStatus, reason: str | None, detail: str | None) -> None:
    turn = loop.turn
    turn_lifecycle.check(turn.status, status, reason)
    turn.status, turn.reason, turn.detail = status, reason, detail
    loop.events.append(
        TurnChanged(at=loop.ctx.clock(), thread_id=turn.thread_id, turn_id=turn.id,
                    status=status, reason=reason, detail=detail, group=turn.group)
    )  # fmt: skip
