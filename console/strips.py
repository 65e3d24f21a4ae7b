"""Textual's drawn lines without the reference cycle each of them made.

A Textual `Strip` caches what it derives from itself, and three of its methods cache the
strip itself when there is nothing to derive: `divide` at its own end (`[self]`, which the
compositor asks of every line of every pane it draws), `adjust_cell_length` to its own
length, `crop_extend` to its own extent. The strip then holds itself, so a line drawn and
later dropped is garbage that only the cyclic collector can free, and a line kept a moment
(a pane's cache) outlives the young collections and waits for a full one: under the
benchmark's flood 330 lines a second, 0.5 MB a second of memory until a full collection,
which is a pause a key waits behind (console/collector.py). `patch` makes those three
return the strip itself without caching it: the same strips, no cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.style import Style
from textual.strip import Strip

_divide = Strip.divide
_adjust_cell_length = Strip.adjust_cell_length
_crop_extend = Strip.crop_extend


def _divide_uncycled(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
    cuts = list(cuts)
    length = self.cell_length
    if [cut for cut in cuts if cut <= length] == [length]:
        return [self]  # (Textual's caches this list, which holds the strip)
    return _divide(self, cuts)


def _adjust_uncycled(self: Strip, cell_length: int, style: Style | None = None) -> Strip:
    if cell_length == self.cell_length:
        return self
    return _adjust_cell_length(self, cell_length, style)


def _crop_extend_uncycled(self: Strip, start: int, end: int, style: Style | None) -> Strip:
    if start == 0 and end == self.cell_length:
        return self
    return _crop_extend(self, start, end, style)


def patch() -> None:
    """Make Textual's strips stop caching themselves (once; the results are the same)."""
    Strip.divide = _divide_uncycled  # type: ignore[method-assign]
    Strip.adjust_cell_length = _adjust_uncycled  # type: ignore[method-assign]
    Strip.crop_extend = _crop_extend_uncycled  # type: ignore[method-assign]
