"""The projector: a room's public events, from its truth to the shared bus.

Truth first, the bus second, delivery last. Every event is in execution.db's `events`
table before anyone sees it; the projector copies the public ones (a turn started or
changed, a call waiting, a decision, an answer's delivery) whose id is above the bus's
`last_seq` for this room, with the room's running and waiting counts, in one bus
transaction per page. So the truth alone rebuilds the bus: a bus that lags, was deleted, or
was never written (a kill between the two writes) is caught up by the next `catch_up`.

When: `catch_up` at start, then whenever it is poked (the runtime's event bus calls
`poke` after each commit: the bus lags the truth by one pass, and many commits in a burst
cost one pass, not one each), and every `every` seconds besides, for writes that do not go
through the event bus (a request's admission) and for a poke missed while a pass ran. The
delivery worker also calls `catch_up` before it sends anything, so an answer never leaves
before its turn's end is on the bus.

Only public fields are copied: no call arguments or results, no message text, no reply
address; the bus holds ids, states and counts (secrets never reach the truth either).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import anyio

from engine.config import BusConfig
from engine.store import Store, StoreError
from engine.store import bus as buses
from engine.store.bus import Bus, BusEvent, RoomRow

PAGE = 500  # events per bus transaction
# The fields of each public kind the bus carries (besides at, kind, thread and turn).
PUBLIC_FIELDS: dict[str, tuple[str, ...]] = {
    "turn_started": ("origin", "sender", "strategy", "group", "channel"),
    "turn_changed": ("status", "reason", "group"),
    "call_changed": ("call_id", "tool", "status", "deadline_at", "on_deadline"),
    "decision_recorded": ("decision_id", "call_id", "action", "status"),
    "delivery_changed": ("channel", "key", "state", "outbox_id", "tries", "next_at"),
}


def bus_path(room: Path, config: BusConfig) -> Path:
    """Where the room's bus is: `[bus] path` (relative to the room), else <room>/bus/events.db."""
    if config.path is None:
        return room / "bus" / "events.db"
    return room / Path(config.path).expanduser()  # an absolute path stays itself


def public(kind: str, body: str) -> str:
    """The public part of a stored event's JSON."""
    try:
        data = json.loads(body)
    except ValueError:
        data = {}
    fields = PUBLIC_FIELDS.get(kind, ())
    return json.dumps({k: data.get(k) for k in fields if k in data}, separators=(",", ":"))


class Projector:
    """Copies one room's public events from its store to a bus."""

    def __init__(self, store: Store, bus: Bus, room: Path, *, clock: Callable[[], float],
                 pid: int | None = None) -> None:  # fmt: skip
        self.store, self.bus, self.clock = store, bus, clock
        self.room = str(room)
        self.name = room.name
        self.pid = os.getpid() if pid is None else pid
        self.log = logging.getLogger("agentdeck")
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self.failing: str | None = None  # the last pass's error, for the channels view

    def poke(self) -> None:
        """Catch up soon (sync, quick: an event bus subscriber may call it)."""
        self._wake.set()

    async def catch_up(self) -> int:
        """Copy every public event the bus lacks, and the room's counts; returns the seq
        the bus now holds. One pass at a time (a second caller waits, then finds little)."""
        async with self._lock:
            # the counts first: they show no commit whose events the bus does not hold
            running, waiting = await buses.turn_counts(self.store)
            top = await buses.top_seq(self.store)
            last = await self.bus.last_seq(self.room)
            if last > top:  # the bus holds another truth's events (the room was made anew)
                self.log.warning("bus %s: %s is behind it; projected anew", self.bus.path,
                                 self.room)  # fmt: skip
                await self.bus.reset(self.room)
                last = 0
            while True:
                found = await buses.public_events(self.store, last, top, PAGE)
                events: list[BusEvent] = [
                    (r[0], r[1], r[2], r[3], r[4], public(r[2], r[5])) for r in found
                ]
                upto = events[-1][0] if len(events) == PAGE else top
                await self.bus.append(
                    RoomRow(self.room, self.name, self.clock(), running, waiting, self.pid, upto),
                    events,
                )
                last = upto
                if upto >= top:
                    return upto

    async def stopped(self) -> None:
        """The room's runtime stops: what it committed since the last pass is copied (a
        clean stop leaves the bus caught up), then its row shows no owner."""
        await self.catch_up()
        async with self._lock:
            running, waiting = await buses.turn_counts(self.store)
            last = await self.bus.last_seq(self.room)
            await self.bus.append(
                RoomRow(self.room, self.name, self.clock(), running, waiting, None, last), []
            )

    async def run(self, every: float = 1.0) -> None:
        """`catch_up` now, then when poked or every `every` seconds, until cancelled; a
        failed pass (the bus file locked too long, a full disk) is logged and tried again."""
        while True:
            self._wake = anyio.Event()  # a poke during the pass is kept for the next one
            try:
                await self.catch_up()
                self.failing = None
            except StoreError as exc:
                if self.failing != str(exc):
                    self.log.warning("bus projection failed: %s", exc)
                self.failing = str(exc)
            with anyio.move_on_after(every):
                await self._wake.wait()
