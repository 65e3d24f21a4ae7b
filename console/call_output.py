"""A running call's output as the console keeps it: the last lines, as a terminal shows them.

The runtime sends what a running call prints in pieces (`CallOutput` events, paced and cut
to their newest part: engine/turn/output.py); a piece may end mid-line, and a progress bar
rewrites its line with a carriage return. `OutputTail` keeps the last `LINES` lines of
both streams in the order they came, each line cut to `WIDTH` characters, and says where
some were not sent. Memory is that, per running call, and the state keeps at most `CALLS`
of them (console/state.py): a call's tail goes when it ends, since its result is the
record.
"""

from __future__ import annotations

from collections import deque

LINES = 200  # lines kept per call
WIDTH = 2000  # characters kept of one line (its end: where a progress bar writes)
CALLS = 64  # running calls whose output is kept at once


class OutputTail:
    """The last lines a call printed; `version` counts changes, for redrawing."""

    __slots__ = ("lines", "partial", "version", "chars")

    def __init__(self) -> None:
        self.lines: deque[tuple[str, str]] = deque(maxlen=LINES)  # (stream, line) ended
        self.partial: dict[str, str] = {}  # each stream's line not ended yet
        self.version = 0
        self.chars = 0  # characters received, for a test's count

    def add(self, stream: str, text: str, skipped: int = 0) -> None:
        self.version += 1
        self.chars += len(text)
        if skipped:  # some were not sent: the line before was not ended where it was cut
            self._end(stream)
            self.lines.append(("skipped", f"… {skipped:,} characters not shown"))
        pieces = text.replace("\r\n", "\n").split("\n")
        for piece in pieces[:-1]:
            self._grow(stream, piece)
            self._end(stream)
        self._grow(stream, pieces[-1])

    def _grow(self, stream: str, piece: str) -> None:
        if "\r" in piece:  # a carriage return: the line is written again from its start
            line = piece.rsplit("\r", 1)[1]
        else:
            line = self.partial.get(stream, "") + piece
        self.partial[stream] = line[-WIDTH:]

    def _end(self, stream: str) -> None:
        line = self.partial.pop(stream, None)
        if line is not None:
            self.lines.append((stream, line))

    def last(self, n: int) -> list[tuple[str, str]]:
        """The last `n` lines (with the unfinished ones), oldest first, as (stream, text):
        stream is stdout, stderr, or skipped (a note of what was not sent)."""
        if n <= 0:
            return []
        partial = [(s, line) for s, line in self.partial.items() if line]
        take = max(0, n - len(partial))
        ended = list(self.lines)[-take:] if take else []
        return [*ended, *partial][-n:]
