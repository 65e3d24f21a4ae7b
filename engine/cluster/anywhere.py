"""Turns run by any worker of a cluster: waiting for one, cancelling one (what the runtime's
`wait_turn` and `cancel_turn` do when it is a cluster's worker, engine/cluster/member.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from engine.domain.outcome import TurnOutcome
from engine.lifecycle import TurnStatus
from engine.services.coordinator import Host
from engine.store import turns as rows
from engine.store.pg import claims as sql
from engine.store.schedule import coalesced_into

if TYPE_CHECKING:
    from engine.cluster.host import Member


async def follow(rt: Host, turn_id: str) -> str:
    """The turn a request's answer comes from: its own, or the request's it went into."""
    req = rt.request(turn_id)
    if req is not None:
        return req.turn_id
    return await coalesced_into(rt.store, turn_id) or turn_id


async def cancel_turn(member: Member, turn_id: str, reason: str) -> bool:
    """Cancel a turn run by any worker: a waiting or interrupted one is leased and ended
    here; a running one is cancelled by the worker running it, told by a notice that rides
    the cancel's record: should that worker die before it reads it, the worker that
    recovers the turn ends it cancelled (TurnSupervisor._resume)."""
    rt = member.rt
    row = await rt.outcome(turn_id)
    if row.status == TurnStatus.DONE:
        return False
    await member.claim([row.thread_id])
    if member.holds(row.thread_id):
        return await rt.supervisor.cancel_turn(turn_id, reason)
    asked = rows.cancel_asked(turn_id, reason, rt.clock())
    await rt.store.write([asked, sql.cancel_notice(turn_id, reason)], urgent=True)
    return True


def cancel_here(rt: Host, payload: str) -> None:
    """A cancel notice: the worker running the turn cancels it (the others ignore it)."""
    turn_id, _, reason = payload.partition("\n")
    if turn_id in rt.live:
        rt.supervisor.spawn(rt.supervisor.cancel_turn, turn_id, reason)


async def wait_turn(rt: Host, turn_id: str) -> TurnOutcome:
    """Until the turn (run by any worker) is waiting (with no decision about to apply) or
    done; its outcome, as the database has it."""
    pause = 0.02
    while True:
        handle = rt.live.get(turn_id)
        if handle is not None:
            with anyio.move_on_after(0.5):
                await handle.done.wait()
        turn_id = await follow(rt, turn_id)
        if turn_id not in rt.live:
            try:
                outcome: TurnOutcome | None = await rt.outcome(turn_id)
            except LookupError:  # its request is still queued somewhere
                outcome = None
            if outcome is not None and outcome.status != TurnStatus.RUNNING:
                going_on = outcome.status == TurnStatus.WAITING and (
                    await sql.going_on(rt.store, turn_id, rt.clock()))  # fmt: skip
                if not going_on:
                    return outcome
        await anyio.sleep(pause)
        pause = min(pause * 2, 0.25)
