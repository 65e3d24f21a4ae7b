"""The event hub: every runtime event numbered, kept in bounded rings per lane, read by
API streams that each watch some lanes (engine/api/watch.py).

The runtime hands the hub each event as it publishes it (a synchronous call: number it,
put it in its lanes' rings, wake the streams that watch one of them, nothing more). Each
stream reads forward from its own cursor, so a slow client costs the runtime nothing: when
a lane it watches has dropped an event after its cursor it is told to resynchronise and
goes on from the newest event. Memory is the rings, whatever the number of clients; an
event is serialised once, by the first stream that reads it, and shared by the rest.

Each lane has its own ring, so a noisy thread cannot push the queue's events out: `all`
keeps the last `size` events, the queue and the counts their own thousands, a thread or a
call that a stream watches its own (kept a while after its last stream leaves, so a
client that reconnects resumes).

Sequence numbers start at 1 with each run; a stream's cursor is `(run_id, seq)`, so a
client that comes back to a new run knows it missed everything in between.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

import anyio

from engine.api.watch import ACTIVITY, ALL, COUNTS, NOTICES, QUEUE, SLOW, Lanes, in_lane
from engine.domain.events import Event

RINGS = {QUEUE: 2_000, COUNTS: 2_000, NOTICES: 1_000, ACTIVITY: 10_000}  # `all`: the hub's size
PER_RING = 2_000  # events kept per thread or call lane
PER_KEPT = 64  # thread and call lanes no stream watches, kept for reconnects


class Lane:
    """The last `size` events of one lane (slots shared with the other lanes)."""

    __slots__ = ("name", "size", "slots", "count", "lost", "streams")

    def __init__(self, name: str, size: int, lost: int) -> None:
        self.name, self.size = name, size
        self.slots: list[list[Any] | None] = [None] * size  # [seq, event, json]
        self.count = 0  # events ever added
        self.lost = lost  # events up to this sequence number are not here (dropped, or before)
        self.streams: set[Stream] = set()

    def add(self, slot: list[Any]) -> None:
        i = self.count % self.size
        old = self.slots[i]
        if old is not None:
            self.lost = old[0]
        self.slots[i] = slot
        self.count += 1

    def after(self, seq: int) -> Iterator[list[Any]]:
        """The slots of events after `seq`, oldest first."""
        lo, hi, size, slots = max(0, self.count - self.size), self.count, self.size, self.slots
        while lo < hi:  # the first kept event after `seq`
            mid = (lo + hi) // 2
            if slots[mid % size][0] <= seq:  # type: ignore[index]
                lo = mid + 1
            else:
                hi = mid
        for n in range(lo, self.count):
            yield slots[n % size]  # type: ignore[misc]


class Stream:
    """One client's subscription: its lanes, each from the sequence number it counts
    from (where the stream resumed, or where the lane was added), and its cursor."""

    __slots__ = ("lanes", "since", "cursor", "ready", "hurry")

    def __init__(self, lanes: list[Lane], since: dict[str, int], cursor: int) -> None:
        self.lanes, self.since, self.cursor = lanes, since, cursor
        self.ready = anyio.Event()  # set when an event for it arrived
        self.hurry = anyio.Event()  # set when one of them is in a lane read at once (not SLOW)


class EventHub:
    """The events of this run, numbered from 1, in their lanes' rings."""

    def __init__(self, run_id: str, size: int = 10_000) -> None:
        self.run_id, self.size = run_id, size
        self.head = 0  # the sequence number of the newest event (0: none yet)
        self._sort = Lanes()
        self._lanes: dict[str, Lane] = {ALL: Lane(ALL, size, 0)}
        self._lanes.update({name: Lane(name, n, 0) for name, n in RINGS.items()})
        self._idle: OrderedDict[str, None] = OrderedDict()  # per-lanes nobody watches
        self._open: set[Stream] = set()
        self.closed = False

    @property
    def streams(self) -> int:
        """Streams open now."""
        return len(self._open)

    def publish(self, event: Event) -> None:
        """The runtime's subscriber: number the event, keep it in its lanes, wake the
        streams that watch them."""
        self.head = seq = self.head + 1
        slot = [seq, event, None]
        lanes = self._lanes
        for name in self._sort.of(event):
            lane = lanes.get(name)
            if lane is None:  # a thread or a call nobody watches
                continue
            lane.add(slot)
            urgent = name not in SLOW
            for stream in lane.streams:
                stream.ready.set()
                if urgent:
                    stream.hurry.set()

    def close(self) -> None:
        """The runtime is stopping: every stream ends after what it has."""
        self.closed = True
        for stream in self._open:
            stream.ready.set()
            stream.hurry.set()

    def open(self, watch: Iterable[str], run: str | None, after: int,
             fresh: Iterable[str] = ()) -> tuple[Stream, bool]:  # fmt: skip
        """A stream of the lanes in `watch`, resuming after `after` of `run` when it can
        (else from now); `fresh` names lanes added to a resumed watch (their events after
        `after` as far back as the rings reach, never a reason to resynchronise). Returns the stream and whether the client must resynchronise."""
        names = sorted(set(watch) or {ALL})
        resume = run == self.run_id and 0 <= after <= self.head
        cursor = after if resume else self.head
        lanes: list[Lane] = []
        since: dict[str, int] = {}
        for name in names:
            lane = self._lanes.get(name) or self._per_lane(name)
            self._idle.pop(name, None)
            lanes.append(lane)
            # a lane added to a resumed watch: from the cursor, as far back as it reaches
            since[name] = cursor if name not in fresh else max(cursor, lane.lost)
        stream = Stream(lanes, since, cursor)
        lost = resume and any(lane.lost > since[lane.name] for lane in lanes)
        if lost:
            self._resynced(stream)
        for lane in lanes:
            lane.streams.add(stream)
            if any(True for _ in lane.after(stream.since[lane.name])):  # some to replay
                stream.ready.set()
                stream.hurry.set()
        self._open.add(stream)
        return stream, run is not None and (not resume or lost)

    def _per_lane(self, name: str) -> Lane:
        """A thread's or a call's lane, with its events the `all` ring still holds."""
        everything = self._lanes[ALL]
        lane = self._lanes[name] = Lane(name, PER_RING, everything.lost)
        for slot in everything.after(everything.lost):
            if in_lane(name, slot[1]):
                lane.add(slot)
        return lane

    def release(self, stream: Stream) -> None:
        """The stream ended: its per-lanes nobody else watches are kept a while, then go."""
        self._open.discard(stream)
        for lane in stream.lanes:
            lane.streams.discard(stream)
            if not lane.streams and lane.name not in RINGS and lane.name != ALL:
                self._idle[lane.name] = None
        while len(self._idle) > PER_KEPT:
            self._lanes.pop(self._idle.popitem(last=False)[0], None)

    def read(self, stream: Stream, limit: int,
             max_bytes: int = 4 * 1024 * 1024) -> list[str] | None:  # fmt: skip
        """The JSON of the stream's events after its cursor: up to `limit` of them and about
        `max_bytes` (one at least, whatever its size), moving its cursor past them; None
        if some of them are gone (the stream then goes on from the newest event)."""
        if any(lane.lost > max(stream.cursor, stream.since[lane.name]) for lane in stream.lanes):
            self._resynced(stream)
            return None
        cursor = stream.cursor
        sources = [lane.after(max(cursor, stream.since[lane.name])) for lane in stream.lanes]
        merged = sources[0] if len(sources) == 1 else heapq.merge(*sources, key=_seq)
        out: list[str] = []
        total, last = 0, cursor
        for slot in merged:
            seq = slot[0]
            if seq == last:  # in two of its lanes: once
                continue
            if slot[2] is None:
                slot[2] = slot[1].model_dump_json()
            total += len(slot[2])
            if out and (total > max_bytes or len(out) >= limit):
                break
            out.append(slot[2])
            last = seq
        else:  # all of it: nothing waits for this stream now
            stream.ready, stream.hurry = anyio.Event(), anyio.Event()
        stream.cursor = last
        return out

    async def wait(self, stream: Stream) -> None:
        """Return once an event for `stream` arrived, or the hub is closed."""
        if not self.closed:
            await stream.ready.wait()

    def _resynced(self, stream: Stream) -> None:
        stream.cursor = self.head
        stream.since = dict.fromkeys(stream.since, self.head)
        stream.ready, stream.hurry = anyio.Event(), anyio.Event()


def _seq(slot: list[Any]) -> int:
    return int(slot[0])
