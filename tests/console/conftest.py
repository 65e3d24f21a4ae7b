"""Console test fixtures: a fixed clock, fixed ids, the offline model at zero delay, UTC.

Every console test builds its app with `deck_app`, so Pilot tests and snapshots see the
same deterministic console.
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from console.app import AgentDeck, make_app
from engine.providers.offline import OfflineModel

T0 = 1_767_268_800.0  # 2026-01-01 12:00:00 UTC


def fixed_ids() -> Callable[[str], str]:
    counters: dict[str, itertools.count[int]] = defaultdict(lambda: itertools.count(1))
    return lambda prefix: f"{prefix}_{next(counters[prefix]):03d}"


class KeysClock:
    """The clock of key timing (monotonic seconds) for tests: each reading is a second
    after the last, so no key falls within the queue's focus guard, unless a test holds the
    clock still (`held`) and moves it itself (`now`)."""

    def __init__(self) -> None:
        self.now, self.held = 0.0, False

    def __call__(self) -> float:
        if not self.held:
            self.now += 1.0
        return self.now


def build(room: Path, **kw: object) -> AgentDeck:
    """A console over `room` with a fixed clock and ids and the instant offline model."""
    kw.setdefault("provider", OfflineModel(delay=0))
    kw.setdefault("ids", fixed_ids())
    kw.setdefault("keys_clock", KeysClock())
    return make_app(room, clock=lambda: T0, **kw)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Home is the test's folder: the status bar and hints show the room as `~/room`."""
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def room(tmp_path: Path) -> Path:
    return tmp_path / "room"


@pytest.fixture
def deck_app(room: Path) -> Callable[..., AgentDeck]:
    return lambda **kw: build(room, **kw)
