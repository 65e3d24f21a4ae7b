"""Every room of this machine at once (issue 38): the rooms the registry holds
(engine/rooms_registry.py), each read through its own owner's socket by a client of its
own, and one inbox of every room's waiting calls, needs input first.

Needs input first, precisely (`needs_input_first`):
1. a call a deadline will decide ([approvals] deadlines: cancelled or approved without
   the operator) comes before any call without one, the nearest deadline first;
2. then the calls no deadline decides, the one waiting longest first (`since`: when it
   started waiting; it has held its turn, and its thread, longest);
3. ties by the room's path, then the call's id, so the order is the same at every read.
A breakpoint's pause and a call put up for review after a crash are ordered as any call.

`read_machine` is `agentdeck inbox`'s read: each serving room answers two requests (its
scheduler's counts, its pending calls), all rooms at once, each within `READ_WAIT`
seconds; a room whose owner does not answer in time is said so, not waited for. The
console follows each room with one event stream instead (console/machine.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from pydantic import BaseModel, ConfigDict

from engine import rooms_registry
from engine.domain.decisions import PendingCall
from engine.room import Room, shown

if TYPE_CHECKING:
    from engine.rooms_registry import Looked

READ_WAIT = 5.0  # seconds a room's owner has to answer `agentdeck inbox`
# What the overview says of a room's owner (the lock's word, then the socket's)
SERVING, GONE, OTHER, SILENT = "serving", "owner gone", "other owner", "not answering"


class MachineRoom(BaseModel):
    """One registered room as the overview shows it: who serves it and what it holds."""

    model_config = ConfigDict(frozen=True)

    room: str  # its folder
    label: str  # its folder's name, or its path where two rooms share a name
    socket: str
    kind: str  # the owner's: console, run, start
    pid: int
    started_at: float  # when the owner started serving (wall time)
    run_id: str = ""
    owner: str  # serving | owner gone | other owner | not answering
    why: str = ""  # what is known of an owner that does not serve (one line)
    running: int | None = None  # turns running (None: not known, its owner does not serve)
    waiting: int | None = None  # turns waiting for a decision or a slot
    decisions: int | None = None  # calls waiting for the operator (decisions and reviews)


class InboxCall(BaseModel):
    """A waiting call of one room, as the machine's inbox lists it."""

    model_config = ConfigDict(frozen=True)

    room: str
    label: str
    call: PendingCall


class MachineInbox(BaseModel):
    """Every registered room, and every serving room's waiting calls, needs input first;
    `problems`: files in the registry that are not entries (left alone)."""

    rooms: list[MachineRoom]
    calls: list[InboxCall]
    problems: list[str] = []


def needs_input_first(deadline_at: float | None, since: float, room: str,
                      call_id: str) -> tuple[bool, float, float, str, str]:  # fmt: skip
    """The inbox's sort key (the module's docstring says the order and why)."""
    return (deadline_at is None, deadline_at or 0.0, since, room, call_id)


def labels(rooms: Iterable[Path]) -> dict[Path, str]:
    """A short name for each room: its folder's name, or, where two rooms share one, its
    path as the operator reads it (`~/work/room`)."""
    rooms = list(rooms)
    names = Counter(p.name for p in rooms)
    return {p: p.name if names[p.name] == 1 and p.name else shown(p) for p in rooms}


def room_of(looked: Looked, label: str, **known: object) -> MachineRoom:
    """The overview's row of a registration, with what the lock said and what is `known`
    (owner, why, counts)."""
    reg = looked.reg
    owner, why = {"gone": (GONE, "nobody holds the room's lock: its owner stopped or died"),
                  "other": (OTHER, f"held by {looked.holder}, which serves no API here"),
                  "serving": (SERVING, "")}[looked.seen]  # fmt: skip
    fields: dict[str, object] = {"owner": owner, "why": why, **known}
    return MachineRoom(room=str(reg.room), label=label, socket=str(reg.socket), kind=reg.kind,
                       pid=reg.pid, started_at=reg.started_at, run_id=reg.run_id,
                       **fields)  # type: ignore[arg-type]  # fmt: skip


async def read_room(looked: Looked, label: str,
                    wait: float = READ_WAIT) -> tuple[MachineRoom, list[PendingCall]]:  # fmt: skip
    """One room's row and waiting calls, read through its owner's socket (nothing when
    the lock says its owner is gone)."""
    if looked.seen != "serving":
        return room_of(looked, label), []
    from engine.api.client import ApiError
    from engine.api.remote import RemoteClient

    client = RemoteClient(Room(looked.reg.room))
    try:
        with anyio.fail_after(wait):
            stats = await client.statistics()
            pending = await client.pending()
    except TimeoutError:
        return room_of(looked, label, owner=SILENT, why=f"no answer within {wait:g} s"), []
    except ApiError as exc:  # OwnerGone too: it died between the look and the read
        return room_of(looked, label, owner=SILENT, why=" ".join(str(exc).split())), []
    waiting = sum(g.waiting for g in stats.groups)
    return room_of(looked, label, running=stats.running, waiting=waiting,
                   decisions=len(pending)), pending  # fmt: skip


async def read_machine(where: Path | None = None, wait: float = READ_WAIT) -> MachineInbox:
    """Every registered room and every serving room's waiting calls, needs input first
    (the rooms read at once, each through its own socket)."""
    looks, problems = await anyio.to_thread.run_sync(rooms_registry.looked, where)
    names = labels(lk.reg.room for lk in looks)
    read: list[tuple[MachineRoom, list[PendingCall]] | None] = [None] * len(looks)

    async def one(i: int, looked: Looked) -> None:
        read[i] = await read_room(looked, names[looked.reg.room], wait)

    async with anyio.create_task_group() as tg:
        for i, looked in enumerate(looks):
            tg.start_soon(one, i, looked)
    rooms, calls = [], []
    for row, pending in (r for r in read if r is not None):
        rooms.append(row)
        calls += [InboxCall(room=row.room, label=row.label, call=p) for p in pending]
    calls.sort(key=lambda c: needs_input_first(c.call.deadline_at, c.call.since, c.room,
                                               c.call.call_id))  # fmt: skip
    return MachineInbox(rooms=rooms, calls=calls, problems=problems)
