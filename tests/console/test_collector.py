"""The console's garbage collection (console/collector.py): the young and middle
generations every tick, the whole heap only at a quiet moment, and at least now and then."""

from __future__ import annotations

import pytest

from console import collector
from console.collector import EVERY, FULL_AT_MOST, FULL_EVERY, QUIET, Collector


@pytest.fixture
def collected(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The generations `gc.collect` was asked for (none is collected here)."""
    asked: list[int] = []
    monkeypatch.setattr(collector.gc, "collect", lambda generation=2: asked.append(generation))
    return asked


def run(c: Collector, clock: list[float], keys: list[int], seconds: float, typing: bool) -> None:
    """Tick `c` for `seconds` of its clock, a key pressed every tick while `typing`."""
    end = clock[0] + seconds
    while clock[0] < end:
        clock[0] += EVERY
        keys[0] += typing
        c.tick()


def test_the_whole_heap_waits_for_a_quiet_moment(collected: list[int]) -> None:
    clock, keys = [0.0], [0]
    c = Collector(lambda: keys[0], clock=lambda: clock[0])
    run(c, clock, keys, FULL_EVERY + 5, typing=True)
    assert set(collected) == {1}  # only the young and middle generations while keys come
    run(c, clock, keys, QUIET / 2, typing=False)
    assert 2 not in collected  # not quiet long enough yet
    run(c, clock, keys, QUIET, typing=False)
    assert collected.count(2) == 1 and c.collections[2] == 1
    run(c, clock, keys, FULL_EVERY / 2, typing=False)
    assert collected.count(2) == 1  # at most one a FULL_EVERY


def test_the_whole_heap_is_collected_now_and_then_however_busy(collected: list[int]) -> None:
    clock, keys = [0.0], [0]
    c = Collector(lambda: keys[0], clock=lambda: clock[0])
    run(c, clock, keys, FULL_AT_MOST + 1, typing=True)
    assert collected.count(2) == 1
    assert c.collections[1] == len(collected) - 1
