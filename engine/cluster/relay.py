"""What the other workers of a cluster commit, handed to this worker's event bus.

A worker's bus carries the events of the turns it runs. A console (or an API event stream)
attached to it must show the whole runtime, so each worker reads the events and the
conversation entries the others stored (engine/store/pg/tail.py) and hands them to its
subscribers (`EventBus.relay`): stored once, by the worker that ran the turn, shown
everywhere. Text deltas and step starts are not stored, and do not cross.

How the rows are found: a poll every `EVERY` seconds on a connection the relay keeps
(borrowed from the runtime's pool),
past a cursor that remembers the ids it skipped (a worker's batch commits after another's
higher ids are visible), each asked for again until it shows up or `GIVE_UP` seconds
passed (a rolled-back write's ids never do; a batch commits within milliseconds of its
insert). Not a NOTIFY per commit: PostgreSQL serializes committing transactions that
notify, which the cluster's busiest path would pay for every checkpoint, and a notice lost
with a dropped connection would need the poll anyway. Idle, a poll is two index lookups.

Which rows are this worker's own (its bus handed them already): events name their run;
conversation entries do not, so the relay notes the entries this worker's bus hands
(thread and seq) and holds any other entry until the next poll before passing it on (the
local hand-off runs right after the COMMIT, a poll later it has certainly run).

Bounded: a page of `PAGE` rows per table per poll, at most `MAX_MISSING` skipped ids and
`OWN_KEPT` own entries remembered. The database's connection may drop: the relay says so,
connects again and goes on from its cursor.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import psycopg
from pydantic import ValidationError

from engine.domain.events import Event, MessageAppended, parse_event
from engine.services.coordinator import Host
from engine.store.pg import tail
from engine.store.pg.pool import Pool

log = logging.getLogger("agentdeck")
EVERY = 0.25  # seconds between two polls (a full page: the next one at once)
PAGE = 500  # rows of each table per poll
GIVE_UP = 30.0  # seconds a skipped id is asked for again
MAX_MISSING = 10_000  # skipped ids remembered per table (beyond: the oldest are given up)
LOOKBACK = 1_000  # ids below the top at start that may still commit
OWN_KEPT = 10_000  # this worker's own conversation entries remembered
RECONNECT = 1.0  # seconds before connecting again after the connection dropped


class Cursor:
    """How far a reader of one table is: the highest id read, and the ids below it not
    seen yet, with when each was first missed."""

    def __init__(self, top: int, missing: Sequence[int], now: float) -> None:
        self.top = top
        self.missing: dict[int, float] = dict.fromkeys(missing, now)

    def read(self, ids: Sequence[int], now: float) -> None:
        """`ids` (ascending) were read: those skipped below the new top are missing."""
        missing = self.missing
        fresh = [i for i in ids if i > self.top]
        for i in ids:
            if i <= self.top:
                missing.pop(i, None)
        if fresh:
            seen, last = set(fresh), fresh[-1]
            start = max(self.top + 1, last - MAX_MISSING)  # a huge gap: its newest ids only
            missing.update((i, now) for i in range(start, last) if i not in seen)
            self.top = last
        for i in [i for i, at in missing.items() if now - at > GIVE_UP]:
            del missing[i]
        if len(missing) > MAX_MISSING:
            for i in sorted(missing)[: len(missing) - MAX_MISSING]:
                del missing[i]


class Relay:
    """Reads what other workers stored and hands it to `hand` (a bus's `relay`)."""

    def __init__(self, pool: Pool, run_id: str, hand: Callable[[list[Event]], None], *,
                 application_name: str, every: float = EVERY) -> None:  # fmt: skip
        self.pool, self.run_id, self.hand, self.every = pool, run_id, hand, every
        self.application_name = application_name
        self.conn: psycopg.AsyncConnection[Any] | None = None
        self.events: Cursor | None = None
        self.messages: Cursor | None = None
        self._own: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._held: list[tuple[Any, ...]] = []  # entries read last poll, not known as own
        self._failing: str | None = None
        self._unreadable = 0
        self.relayed = 0  # events handed on (for tests and statistics)

    def local(self, event: Event) -> None:
        """A subscriber to this worker's own events: notes its conversation entries."""
        if isinstance(event, MessageAppended):
            own = self._own
            own[(event.thread_id, event.seq)] = None
            if len(own) > OWN_KEPT:
                own.popitem(last=False)

    async def start(self) -> None:
        """Connect, and begin at what is committed now (history is not relayed)."""
        await self._connect()
        assert self.conn is not None
        ev_top, ev_missing, msg_top, msg_missing = await tail.tops(self.conn, LOOKBACK)
        now = anyio.current_time()
        self.events = Cursor(ev_top, ev_missing, now)
        self.messages = Cursor(msg_top, msg_missing, now)

    async def run(self) -> None:
        """Poll until cancelled; a dropped connection is said once and connected again."""
        try:
            while True:
                try:
                    if self.conn is None or self.conn.closed:
                        await self._connect()
                    full = await self.poll()
                    self._failing = None
                except psycopg.Error as exc:
                    if self._failing != type(exc).__name__:
                        log.warning("%s: event relay dropped: %s", self.application_name,
                                    type(exc).__name__)  # fmt: skip
                    self._failing = type(exc).__name__
                    await self._close()
                    await anyio.sleep(RECONNECT)
                    continue
                await anyio.sleep(0 if full else self.every)
        finally:
            await self._close()

    async def poll(self) -> bool:
        """Read one page of each table past its cursor, hand on what other workers stored;
        whether a page was full (more to read at once)."""
        assert self.conn is not None and self.events is not None and self.messages is not None
        conn, events, messages = self.conn, self.events, self.messages
        ev_rows = await tail.events_after(conn, self.run_id, events.top, list(events.missing),
                                          PAGE)  # fmt: skip
        msg_rows = await tail.messages_after(conn, messages.top, list(messages.missing), PAGE)
        now = anyio.current_time()
        events.read([r[0] for r in ev_rows], now)
        messages.read([r[0] for r in msg_rows], now)
        out: list[Event] = [self._entry(r) for r in self._held if not self._mine(r)]
        self._held = [r for r in msg_rows if not self._mine(r)]
        for _id, mine, body in ev_rows:
            if mine or body is None:
                continue
            try:
                out.append(parse_event(body))
            except ValidationError:  # a kind a newer agentdeck stored: not for this one
                self._unreadable += 1
                if self._unreadable == 1:
                    log.warning("%s: an event the relay cannot read (id %s)",
                                self.application_name, _id)  # fmt: skip
        if out:
            self.relayed += len(out)
            self.hand(out)
        return len(ev_rows) == PAGE or len(msg_rows) == PAGE

    def _mine(self, row: tuple[Any, ...]) -> bool:
        key = (row[1], int(row[3]))
        if key in self._own:
            del self._own[key]
            return True
        return False

    @staticmethod
    def _entry(row: tuple[Any, ...]) -> MessageAppended:
        _id, thread_id, turn_id, seq, role, text, at = row
        return MessageAppended(at=at, thread_id=thread_id, turn_id=turn_id, role=role,
                               text=text, seq=seq)  # fmt: skip

    async def _connect(self) -> None:
        self.conn = await self.pool.borrow(self.application_name)

    async def _close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            await self.pool.give_back(conn)


async def relay_events(rt: Host, pool: Pool, worker: str, *,
                       task_status: anyio.abc.TaskStatus[Relay] = anyio.TASK_STATUS_IGNORED,
                       ) -> None:  # fmt: skip
    """Relay the cluster's events to `rt`'s bus (the runtime of `worker`), until cancelled
    (`tg.start` returns once the relay knows where it begins: every later commit of another
    worker reaches the bus)."""
    name = f"agentdeck-relay {worker}"[:63]
    relay = Relay(pool, rt.run_id, rt.bus.relay, application_name=name)
    unsubscribe = rt.bus.subscribe(relay.local, relayed=False)
    try:
        await relay.start()
        task_status.started(relay)
        await relay.run()
    finally:
        unsubscribe()
