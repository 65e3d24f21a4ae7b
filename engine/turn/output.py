"""A running call's output, as it is produced, to those who watch it.

A tool that streams (the shell: `Tool.streams`) hands each piece of what its process prints
to `ToolContext.output`; the call's `OutputTap` decodes it and sends it on as `CallOutput`
events, which are published and never stored (the call's result stays the record, cut to
the result cap as before). What it sends is bounded whatever the command prints:

- per call, at most `RATE` events a second for each stream, each the newest `PIECE`
  characters of what came since the last (the older ones are counted in `skipped`: a
  person watching reads the tail, as a terminal that scrolls shows it);
- in total, `OutputPump`: at most `TOTAL` characters a second over every running call
  of the runtime; a call over it waits for the next second, keeping only its tail.

One task of the runtime's sends every call's pending output (`OutputPump.run`); a call
that prints nothing costs nothing, and one that ends sends the rest itself.

Memory is the tail of each stream of each running call, whatever the command prints.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Literal

import anyio

from engine.domain.events import CallOutput, Event

RATE = 10  # events a second, per stream of a call
PIECE = 4096  # characters an event carries at most: the newest of what came
TOTAL = 256 * 1024  # characters a second over every call of the runtime

Stream = Literal["stdout", "stderr"]


class OutputPump:
    """Every call's output of one runtime: the calls with some pending, sent `RATE` times a
    second by one task (`run`, started with the runtime), and the characters a second they
    may send together (`TOTAL`)."""

    def __init__(self, per_second: int = TOTAL, now: Callable[[], float] = anyio.current_time):
        self.per_second, self.now = per_second, now
        self._second, self._spent = -1, 0
        self._due: dict[OutputTap, None] = {}  # taps with output not sent yet, in order

    def take(self, wanted: int) -> int:
        """Characters that may be sent now, of `wanted` (0: none before the next second)."""
        second = int(self.now())
        if second != self._second:
            self._second, self._spent = second, 0
        granted = min(wanted, self.per_second - self._spent)
        self._spent += granted
        return granted

    def due(self, tap: OutputTap) -> None:
        self._due[tap] = None

    def done(self, tap: OutputTap) -> None:
        self._due.pop(tap, None)

    def flush(self) -> None:
        """Send what every call has pending, as far as the budget allows."""
        due, self._due = self._due, {}
        for tap in due:
            tap.flush()

    async def run(self) -> None:
        """Flush `RATE` times a second, for as long as the runtime runs."""
        while True:
            await anyio.sleep(1 / RATE)
            if self._due:
                self.flush()


class _Pending:
    """What one stream printed since it was last sent: its newest PIECE characters, and a
    count of the older ones."""

    __slots__ = ("decoder", "text", "skipped")

    def __init__(self) -> None:
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text, self.skipped = "", 0

    def add(self, data: bytes) -> None:
        text = self.text + self.decoder.decode(data)
        if len(text) > PIECE:
            self.skipped += len(text) - PIECE
            text = text[-PIECE:]
        self.text = text

    def end(self) -> None:
        self.add(b"")  # (an incomplete character at the end: shown replaced)
        self.text += self.decoder.decode(b"", final=True)


class OutputTap:
    """One running call's output on its way to `publish`, paced by the runtime's pump."""

    def __init__(self, call_id: str, thread_id: str, turn_id: str,
                 publish: Callable[[Event], None], clock: Callable[[], float],
                 pump: OutputPump) -> None:  # fmt: skip
        self.call_id, self.thread_id, self.turn_id = call_id, thread_id, turn_id
        self.publish, self.clock, self.pump = publish, clock, pump
        self._pending: dict[Stream, _Pending] = {}
        self.sent = 0  # events published (for the tests and the benchmark)

    def write(self, stream: Stream, data: bytes) -> None:
        """What the call's process printed on `stream` (sync and quick: kept for the pump)."""
        pending = self._pending.get(stream)
        if pending is None:
            pending = self._pending[stream] = _Pending()
        pending.add(data)
        self.pump.due(self)

    def flush(self) -> None:
        """Send what is pending, as far as the runtime's budget allows (the rest waits for
        the pump's next beat)."""
        for stream, pending in self._pending.items():
            if not pending.text:
                continue
            granted = self.pump.take(len(pending.text))
            if granted == 0:
                self.pump.due(self)  # the next second, with what came meanwhile
                continue
            text = pending.text
            skipped = pending.skipped + len(text) - granted
            pending.text, pending.skipped = "", 0
            self.publish(
                CallOutput(at=self.clock(), thread_id=self.thread_id, turn_id=self.turn_id,
                           call_id=self.call_id, stream=stream, text=text[-granted:],
                           skipped=skipped)
            )  # fmt: skip
            self.sent += 1

    def close(self) -> None:
        """The call ended: what is pending goes now, as far as the budget allows (the rest
        is not sent: the result is the record)."""
        for pending in self._pending.values():
            pending.end()
        self.flush()
        self.pump.done(self)
