"""A cluster worker's background tasks (engine/cluster/member.py): the heartbeat that renews
its leases, the listener that hears the cluster's notices, and the claim loop that leases
threads with work, on a tick and at once when a notice asks."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import psycopg

from engine.store.pg.cluster import ClusterError
from engine.store.pg.store import scrub

if TYPE_CHECKING:
    from engine.cluster.host import Member

log = logging.getLogger("agentdeck")


async def run(member: Member) -> None:
    """The heartbeat, the listener and the claims, until cancelled."""
    assert member.listener is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(beat_forever, member)
        tg.start_soon(member.listener.run)
        tg.start_soon(claim_forever, member)


async def beat_forever(member: Member) -> None:
    """Every third of a lease, renew the leases. A worker that could not for a whole lease
    takes them all for lost (their turns stop) and reconnects."""
    assert member.worker is not None
    while True:
        await anyio.sleep(member.lease / 3)
        try:
            await member.beat()
        except (psycopg.Error, ClusterError) as exc:
            log.warning("worker %s: heartbeat failed: %s", member.name, scrub(str(exc), member.url))
            if anyio.current_time() - member.beat_ok < member.lease:
                continue
            for thread_id in sorted(member.worker.held):
                member.lost(thread_id)
            await member.reconnect()


async def claim_forever(member: Member) -> None:
    """Claim on a tick (a third of a lease, at most a second: a dead worker's threads are
    taken soon after their leases expire), and at once when a notice asks."""
    tick = min(1.0, member.lease / 3)
    while True:
        try:
            await member.quietly(member.claim())
        except Exception:  # a bug, or a row it cannot read: say so, and go on claiming
            log.exception("worker %s: a claim failed", member.name)
        with anyio.move_on_after(tick):
            await member.wanted.wait()
        member.wanted = anyio.Event()
