"""Lines to a stream nobody may be reading, without ever blocking the event loop.

`agentdeck run` logs every turn to stdout. A plain `print` blocks once the pipe's buffer
is full and nobody reads it (about 64 KB), and the runtime's loop blocked with it: every
turn stalled. An `Outlet` hands lines to a thread that writes them to a duplicate of the
stream's descriptor (os.write: no Python buffer lock a blocked write could hold at exit);
past `keep` lines waiting, new ones are dropped and counted, and the count is written
when the stream drains again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
from typing import TextIO


class Outlet:
    """A thread writing lines to `stream`; `say` never blocks."""

    def __init__(self, stream: TextIO, keep: int = 10_000) -> None:
        self.name = getattr(stream, "name", "output")
        self._stream = stream
        self._fd: int | None = None  # a stream with no descriptor (a test's capture) is
        with contextlib.suppress(AttributeError, OSError, ValueError):  # written as it is
            stream.flush()
            self._fd = os.dup(stream.fileno())
        self._lines: queue.Queue[str | None] = queue.Queue(keep)
        self.dropped = 0
        self._thread = threading.Thread(target=self._write, name=f"outlet {self.name}",
                                        daemon=True)  # fmt: skip
        self._thread.start()

    def say(self, line: str) -> None:
        """Queue one line (dropped and counted when `keep` lines already wait)."""
        try:
            self._lines.put_nowait(line)
        except queue.Full:
            self.dropped += 1

    def close(self, wait: float = 1.0) -> None:
        """Write what waits, for `wait` seconds at most (a reader may never come)."""
        with contextlib.suppress(queue.Full):
            self._lines.put_nowait(None)
        self._thread.join(wait)

    def _write(self) -> None:
        while (line := self._lines.get()) is not None:
            if self.dropped:
                dropped, self.dropped = self.dropped, 0
                line = f"({dropped} lines dropped: {self.name} was not read)\n{line}"
            try:
                self._put(line + "\n")
            except (OSError, ValueError):  # the reader went away: nothing more can be said
                break
        if self._fd is not None:
            os.close(self._fd)

    def _put(self, text: str) -> None:
        if self._fd is None:
            self._stream.write(text)
            self._stream.flush()
            return
        data = text.encode(errors="replace")
        while data:
            data = data[os.write(self._fd, data) :]


class OutletHandler(logging.Handler):
    """Log records through an outlet."""

    def __init__(self, outlet: Outlet) -> None:
        super().__init__()
        self.outlet = outlet

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.outlet.say(self.format(record))
        except Exception:  # a record that cannot be formatted must not stop the runtime
            self.handleError(record)
