"""The timeline's rows: a step as one immutable row, and the bounded ring that holds them.

The state (`console.state`) keeps the live timeline's steps in a `StepLog`; the timeline
and the history's turn detail draw `StepRow`s, whoever made them, so they live here,
apart from the fold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, overload

from engine.lifecycle import CallStatus, StepStatus

# A round of calls (a tool round, a replay) "succeeds" once its calls settle, however they
# settled: beside "shell cancelled" that read as succeeded and cancelled at once (issue 30).
# A settled round is shown by its calls' states, as its summary names them
# (engine/turn/state.py's calls_summary: "shell cancelled, calc succeeded", "5 calls: 3
# succeeded, 2 failed"), the most telling first.
ROUNDS = frozenset({"tool_round", "replay"})
TELLING = (CallStatus.FAILED, CallStatus.CANCELLED, CallStatus.SUSPENDED, CallStatus.RUNNING,
           CallStatus.RESUMING, CallStatus.NEW, CallStatus.SUCCEEDED)  # fmt: skip


class StepRow(NamedTuple):
    """One timeline line (immutable: a finished step replaces its row)."""

    seq: int  # position in the timeline, never reused
    step_id: int
    at: float
    thread_id: str
    turn_id: str
    kind: str
    status: str = StepStatus.RUNNING.value  # the plain word (see StepLog)
    duration: float | None = None
    summary: str = ""
    group: str | None = None  # its thread's group, when the runtime said it
    channel: str | None = None  # its turn's channel ("console", "tg"...; None: not a channel's)


def shown_status(row: StepRow) -> str:
    """The state a timeline line shows for `row`: the step's own, or for a round of calls
    that settled, the most telling state of its calls."""
    if row.kind not in ROUNDS or row.status != StepStatus.SUCCEEDED:
        return row.status
    words = {part.split()[-1] for part in row.summary.split(":")[-1].split(",") if part.split()}
    return next((state.value for state in TELLING if state in words), row.status)


class StepLog(Sequence[StepRow]):
    """The newest `maxlen` steps, oldest first, as a ring of plain tuples.

    Plain tuples of strings and numbers are not tracked by the cyclic garbage collector,
    so holding thousands of rows adds nothing to its full collections (a pause the
    operator would feel as a late key press); rows are made when read.
    """

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self._ring: list[tuple[Any, ...]] = []
        self._head = 0  # where the oldest row is, once the ring is full

    def __len__(self) -> int:
        return len(self._ring)

    def _at(self, index: int) -> int:
        n = len(self._ring)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("step index out of range")
        return (self._head + index) % self.maxlen

    @overload
    def __getitem__(self, index: int) -> StepRow: ...
    @overload
    def __getitem__(self, index: slice) -> list[StepRow]: ...
    def __getitem__(self, index: int | slice) -> StepRow | list[StepRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._ring)))]
        return StepRow._make(self._ring[self._at(index)])

    def __setitem__(self, index: int, row: StepRow) -> None:
        self._ring[self._at(index)] = tuple(row)

    def __iter__(self) -> Iterator[StepRow]:
        ring, head, make = self._ring, self._head, StepRow._make
        for part in (ring[head:], ring[:head]):
            yield from map(make, part)

    def clear(self) -> None:
        self._ring, self._head = [], 0

    def append(self, row: StepRow) -> None:
        """Add the newest row, dropping the oldest when full."""
        if len(self._ring) < self.maxlen:
            self._ring.append(tuple(row))
        else:
            self._ring[self._head] = tuple(row)
            self._head = (self._head + 1) % self.maxlen
