"""The event hub: every runtime event numbered, kept in a bounded ring, read by API streams.

The runtime hands the hub each event as it publishes it (a synchronous call: append and
wake, nothing more). Each stream reads forward from its own cursor, so a slow client costs
the runtime nothing: when its cursor falls out of the ring it is told to resynchronise and
goes on from the newest event. Memory is the ring, whatever the number of clients; an event
is serialised once, by the first stream that reads it, and shared by the rest.

Sequence numbers start at 1 with each run; a stream's cursor is `(run_id, seq)`, so a
client that comes back to a new run knows it missed everything in between.
"""

from __future__ import annotations

from typing import Any

import anyio

from engine.events import Event


class EventHub:
    """The last `size` events of this run, numbered from 1."""

    def __init__(self, run_id: str, size: int = 10_000) -> None:
        self.run_id, self.size = run_id, size
        self.head = 0  # the sequence number of the newest event (0: none yet)
        self._ring: list[list[Any]] = [[0, None, None] for _ in range(size)]  # seq, event, json
        self._changed = anyio.Event()
        self.closed = False
        self.streams = 0  # streams open now

    def publish(self, event: Event) -> None:
        """The runtime's subscriber: number the event and wake the streams."""
        self.head = seq = self.head + 1
        slot = self._ring[seq % self.size]
        slot[0], slot[1], slot[2] = seq, event, None
        if not self._changed.is_set():
            self._changed.set()

    def close(self) -> None:
        """The runtime is stopping: every stream ends after what it has."""
        self.closed = True
        self._changed.set()

    @property
    def oldest(self) -> int:
        """The sequence number of the oldest event still kept."""
        return max(1, self.head - self.size + 1)

    def since(self, seq: int, limit: int, max_bytes: int = 4 * 1024 * 1024) -> list[str] | None:
        """The JSON of the events after `seq`: up to `limit` of them and about `max_bytes`
        (one at least, whatever its size); None if some of them are gone."""
        if seq >= self.head:
            return []
        if seq + 1 < self.oldest:
            return None
        ring, size, total = self._ring, self.size, 0
        out: list[str] = []
        for n in range(seq + 1, min(self.head, seq + limit) + 1):
            slot = ring[n % size]
            if slot[2] is None:
                slot[2] = slot[1].model_dump_json()
            total += len(slot[2])
            if out and total > max_bytes:
                break
            out.append(slot[2])
        return out

    async def wait_beyond(self, seq: int) -> None:
        """Return once an event after `seq` is published, or the hub is closed."""
        while self.head <= seq and not self.closed:
            changed = self._changed
            if changed.is_set():  # set by an event this waiter has already read
                changed = self._changed = anyio.Event()
            await changed.wait()
