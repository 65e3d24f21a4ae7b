"""The console's cyclic garbage collection: small and often, paced by the event loop's clock.

Python starts a young collection when allocations outnumber deallocations by a threshold.
Under a flood that count hardly moves: as many old objects die as young ones are born (the
events leaving the API's buffer as new ones enter it, the rows the console's state forgets,
the drawn lines its caches drop), so the young generation grows to tens of thousands of
objects between collections, and each collection of it, and of the middle generation after
it, stalls the event loop for 20-70 ms: a key pressed then waits that long. Here the console's
own process collects the young and middle generations every `EVERY` seconds (1-5 ms each
under the benchmark's 20,000 events a second: what survived the last one, and what was made
since), and the whole heap made since start (the start's own is frozen, out of the
collector's reach) at a quiet moment, when no key was pressed for `QUIET` seconds, at most
every `FULL_EVERY` seconds and at least every `FULL_AT_MOST`: under the flood that heap is
some 100,000 objects (most of them the API's ring of recent events) and a full collection
of it takes 40-50 ms. Little waits for one: with Textual's drawn lines no longer cycles
(console/strips.py), memory stays flat without it. Python's own thresholds stay as a
backstop for a loop that does not tick.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from typing import Any

EVERY = 0.03  # seconds between collections of the young and middle generations
FULL_EVERY = 60.0  # seconds: the least time between two full collections
FULL_AT_MOST = 600.0  # seconds: the most, quiet or not
QUIET = 1.0  # seconds without a key that make a quiet moment
THRESHOLDS = (50_000, 50, 1_000)  # Python's own (default 700, 10, 10): a backstop
SWITCH_INTERVAL = 0.001  # seconds; Python's default is 0.005


class Collector:
    """Paces the process's garbage collection once `start` has frozen the heap."""

    def __init__(self, keys: Callable[[], int], clock: Callable[[], float] = time.monotonic):
        self.keys, self.clock = keys, clock  # keys: how many keys were pressed so far
        self.collections = [0, 0, 0]  # by generation, for the benchmark
        self._full_at = self._key_at = 0.0
        self._keys_seen = 0
        self.started = False

    def start(self, app: Any) -> None:
        """Tune the interpreter for key latency once startup is over, and start pacing.

        The heap built so far (modules, widgets, the runtime, its API) is moved out of the
        collector's reach: a full collection over it is a 30-100 ms stall. The thread switch
        interval is shortened so the terminal's input thread gets the interpreter within a
        millisecond of a key press, not five.
        """
        if self.started:
            return
        self.started = True
        gc.freeze()
        gc.set_threshold(*THRESHOLDS)
        gc.enable()  # console.cli.main disables it for the start: nothing of it is garbage
        sys.setswitchinterval(SWITCH_INTERVAL)
        self._full_at = self._key_at = self.clock()
        app.set_interval(EVERY, self.tick, name="collector")

    def tick(self) -> None:
        """One collection: the young and middle generations, or the whole heap."""
        now = self.clock()
        if (keys := self.keys()) != self._keys_seen:
            self._keys_seen, self._key_at = keys, now
        since = now - self._full_at
        quiet = now - self._key_at >= QUIET
        generation = 1
        if since >= FULL_AT_MOST or (since >= FULL_EVERY and quiet):
            generation, self._full_at = 2, now
        gc.collect(generation)
        self.collections[generation] += 1
