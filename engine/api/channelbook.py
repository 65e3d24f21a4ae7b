"""A runtime's loops, channels and outbound deliveries, and the rooms of its bus.

What `LocalClient.channels`, `deliveries`, `retry_delivery`, `drop_delivery` and `rooms`
do (and so the API's routes, and every console and CLI through them). When the runtime's
loops did not start (a room opened for one command, a one-off), it says so: no channel
is up, and a retry or drop is refused, since nothing would send the answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from engine.api.client import Conflict, Invalid, NotFound
from engine.api.models import ChannelsView, DeliveryRow, LoopState, RoomOverview
from engine.runtime import Runtime
from engine.services import delivery
from engine.services.projector import bus_path
from engine.store import outbox
from engine.store.bus import Bus

NOT_RUNNING = ("the delivery worker is not running (the room's loops run under `agentdeck run`, "
               "`agentdeck start` or the console)")  # fmt: skip
MAX_LIMIT = 1000


async def channels(rt: Runtime) -> ChannelsView:
    """Every loop and channel with its state, and the deliveries by state."""
    cs: Any = rt.channels
    started = cs is not None and cs.worker is not None
    server = dict(rt.api)
    loops = [
        LoopState(name="server", kind="server", loop="server",
                  state="up" if server else "stopped", detail=server),
        LoopState(name="pulse", kind="pulse", loop="pulse", state="up" if started else "stopped",
                  detail={"interval": f"{rt.config.pulse.interval:g}s"}),
    ]  # fmt: skip
    rows = [LoopState.model_validate(s.as_dict()) for s in cs.states.values()] if cs else []
    hook_address = cs.hook_address if cs is not None else None
    if cs is not None and cs.hooks():
        listen = {"listen": cs.listen} if cs.listen else {}
        loops.append(LoopState(name="hook", kind="hook", loop="hook",
                               state="up" if hook_address else "stopped" if not started
                               else "starting",
                               detail={**listen, **({"address": hook_address}
                                                    if hook_address else {})}))  # fmt: skip
    if not started:  # nothing polls or serves them: say so, whatever they last said
        rows = [r.model_copy(update={"state": "stopped"}) for r in rows]
    counts = await delivery.counts(rt.store)
    return ChannelsView(loops=loops, channels=rows, hook_address=hook_address,
                        deliveries=counts, delivering=started)  # fmt: skip


async def deliveries(rt: Runtime, state: str | None, limit: int) -> list[DeliveryRow]:
    """The outbox, newest first: `limit` answers, only those in `state` when given."""
    if state is not None and state not in outbox.STATES:
        raise Invalid(f"no delivery state {state!r} (states: {', '.join(outbox.STATES)})")
    if not 1 <= limit <= MAX_LIMIT:
        raise Invalid(f"limit {limit}: give 1 to {MAX_LIMIT}")
    found = await delivery.deliveries(rt.store, (state,) if state else (), limit)
    return [_row(d) for d in found]


async def retry(rt: Runtime, outbox_id: int) -> DeliveryRow:
    """Send a dead answer again: `NotFound` for no such delivery, `Conflict` for one not
    dead or no worker to send it."""
    return await _operate(rt, outbox_id, "retry", ("dead",))


async def drop(rt: Runtime, outbox_id: int) -> DeliveryRow:
    """Give up on a dead or retrying answer (kept, marked dropped)."""
    return await _operate(rt, outbox_id, "drop", ("dead", "retrying"))


async def _operate(rt: Runtime, outbox_id: int, what: str, states: tuple[str, ...]) -> DeliveryRow:
    # an id past the store's integers is no delivery's (SQLite would overflow on it)
    row = await outbox.row(rt.store, outbox_id) if 0 < outbox_id < 2**63 else None
    if row is None:
        raise NotFound(f"no delivery {outbox_id} (`agentdeck deliveries` lists them)")
    if row["state"] not in states:
        raise Conflict(f"delivery {outbox_id} is {row['state']}: only a {' or '.join(states)} "
                       f"one can be {'retried' if what == 'retry' else 'dropped'}")  # fmt: skip
    cs: Any = rt.channels
    worker = cs.worker if cs is not None else None
    if worker is None:
        raise Conflict(NOT_RUNNING)
    done = await (worker.retry(outbox_id) if what == "retry" else worker.drop(outbox_id))
    after = await outbox.row(rt.store, outbox_id)
    if not done or after is None:  # it moved meanwhile (sent, or dead again)
        now = after["state"] if after is not None else "gone"
        raise Conflict(f"delivery {outbox_id} is {now}: it changed meanwhile")
    rt.log.info("delivery %s %s by the operator", outbox_id,
                "retried" if what == "retry" else "dropped")  # fmt: skip
    return _row(delivery.Delivery.of(after))


async def rooms(rt: Runtime) -> list[RoomOverview]:
    """Every room on the bus this room writes to (none when it has no bus yet)."""
    path = bus_path(rt.room.path, rt.config.bus)
    if not await anyio.to_thread.run_sync(path.exists):
        return []
    bus = await Bus.open(path)
    try:
        found = await bus.rooms()
    finally:
        await bus.close()
    here = str(rt.room.path)
    return [RoomOverview(room=r.room, name=r.name, running=r.running, waiting=r.waiting,
                         pid=r.pid, alive=r.pid is not None and alive(r.pid),
                         updated_at=r.updated_at, this=_same(r.room, here))
            for r in found]  # fmt: skip


def alive(pid: int) -> bool:
    """Whether process `pid` exists (one of another user's counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return True


def _same(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def _row(d: delivery.Delivery) -> DeliveryRow:
    return DeliveryRow(id=d.id, turn_id=d.turn_id, thread_id=d.thread_id, channel=d.channel,
                       state=d.state, tries=d.tries, next_at=d.next_at, last_error=d.last_error,
                       created_at=d.created_at, sent_at=d.sent_at, text=d.text)  # fmt: skip
