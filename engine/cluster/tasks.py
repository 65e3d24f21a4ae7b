"""A cluster worker's background tasks (engine/cluster/member.py): the heartbeat that renews
its leases (and stops the turns of a lease lost), the listener that hears the cluster's
notices (`noticed`), and the claim loop that leases threads with work, on a tick and at
once when a notice asks; and forgetting a thread given back or lost."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import psycopg

from engine.store.pg.cluster import ClusterError
from engine.store.pg.store import scrub

if TYPE_CHECKING:
    from engine.cluster.host import Member
    from engine.services.coordinator import Host

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
            await beat(member)
        except (psycopg.Error, ClusterError) as exc:
            log.warning("worker %s: heartbeat failed: %s", member.name, scrub(str(exc), member.url))
            if anyio.current_time() - member.beat_ok < member.lease:
                continue
            for thread_id in sorted(member.worker.held):
                lost(member, thread_id)
            await reconnect(member)


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


async def beat(member: Member) -> None:
    """Renew the worker's leases; stop the turns of those it lost."""
    worker = member.worker
    assert worker is not None
    gone = await member.leases(lambda _c: worker.heartbeat())
    member.beat_ok = anyio.current_time()
    for thread_id in sorted(gone):
        lost(member, thread_id)


def lost(member: Member, thread_id: str) -> None:
    """The lease expired under the worker: stop the thread's turns, write nothing."""
    log.warning("worker %s lost the lease of thread %s: its turn stops here", member.name,
                thread_id)  # fmt: skip
    stop_turns(member.rt, thread_id)
    forget(member.rt, thread_id)


def stop_turns(rt: Host, thread_id: str) -> None:
    """Stop the thread's running turns, writing nothing (resumed from the truth after)."""
    for handle in list(rt.live.values()):
        if handle.thread_id == thread_id and handle.scope is not None:
            handle.lost = True
            handle.scope.cancel()


async def reconnect(member: Member) -> None:
    assert member.worker is not None
    try:
        await member.worker.reconnect()  # its leases were all taken for lost
    except psycopg.Error as exc:
        log.warning("worker %s: cannot reach the database: %s", member.name, type(exc).__name__)


async def noticed(member: Member, thread_id: str) -> None:
    """Work for a thread: the worker loads it if it holds the thread, else claims it."""
    if thread_id and member.holds(thread_id):
        await member.quietly(member.refresh(thread_id))
    elif thread_id:  # that thread at once (if another worker holds it, SKIP LOCKED)
        member.rt.supervisor.spawn(_claim_one, member, thread_id)
    else:
        member.wanted.set()


async def _claim_one(member: Member, thread_id: str) -> None:
    await member.quietly(member.claim([thread_id]))


def forget(rt: Host, thread_id: str) -> bool:
    """Drop what this worker knows of the thread; False (nothing dropped) if a turn of it
    started meanwhile."""
    holder = rt.scheduler.holder(thread_id)
    if holder is not None and holder[0] in rt.live:
        return False
    for req in rt.scheduler.forget(thread_id):
        rt.live.pop(req.id, None)
    rt.supervisor.forget(thread_id)
    return True
