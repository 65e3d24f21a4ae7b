"""The collector is settled once a runtime has started (engine/runtime/heap.py): frozen and
its young generation collected less often, once per process, never where someone tuned it."""

from __future__ import annotations

from typing import Any

import pytest

from engine.runtime import heap


class FakeGc:
    """The few `gc` functions heap.py uses, recording what was done."""

    def __init__(self, thresholds: tuple[int, ...], frozen: int = 0, enabled: bool = True):
        self.thresholds, self.frozen, self.enabled = thresholds, frozen, enabled
        self.done: list[Any] = []

    def get_freeze_count(self) -> int:
        return self.frozen

    def get_threshold(self) -> tuple[int, ...]:
        return self.thresholds

    def isenabled(self) -> bool:
        return self.enabled

    def freeze(self) -> None:
        self.done.append("freeze")

    def set_threshold(self, *t: int) -> None:
        self.done.append(t)


@pytest.mark.parametrize(
    ("gc", "done"),
    [
        (FakeGc((700, 10, 10)), ["freeze", heap.THRESHOLDS]),
        (FakeGc((50_000, 50, 1_000)), []),  # a console's collector, or an embedder's
        (FakeGc((700, 10, 10), frozen=1234), []),
        (FakeGc((700, 10, 10), enabled=False), []),  # a console starting: it enables it
    ],
)
def test_the_collector_is_settled_once_and_only_where_nobody_tuned_it(
    monkeypatch: pytest.MonkeyPatch, gc: FakeGc, done: list[Any]
) -> None:
    monkeypatch.setattr(heap, "gc", gc)
    monkeypatch.setattr(heap, "_settled", False)
    heap.settle()
    assert gc.done == done
    heap.settle()  # a second runtime in the process changes nothing
    assert gc.done == done


@pytest.mark.anyio
async def test_a_runtime_settles_the_collector_when_it_has_started(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers import runtime
    from tests.scripted import Reply

    gc = FakeGc((700, 10, 10))
    monkeypatch.setattr(heap, "gc", gc)
    monkeypatch.setattr(heap, "_settled", False)
    async with runtime(tmp_path, lambda request: Reply(text="ok")):
        assert gc.done == ["freeze", heap.THRESHOLDS]
