"""Textual's drawn lines make no reference cycle once the console is imported
(console/strips.py): a line drawn and dropped is freed at once, not by a full collection."""

from __future__ import annotations

import sys

from rich.segment import Segment
from textual.strip import Strip

import console.app  # noqa: F401  (it patches Textual's strips on import)


def test_a_strip_asked_for_itself_does_not_keep_itself() -> None:
    # Counted by references, not by what a collection finds: another thread of the test
    # process may leave garbage of its own at any moment (CI: 55 objects once).
    strip = Strip([Segment("agent "), Segment("deck")], 10)
    held = sys.getrefcount(strip)
    assert strip.divide([10]) == [strip]  # the compositor asks this of every line
    assert strip.adjust_cell_length(10) is strip
    assert strip.crop_extend(0, 10, None) is strip
    assert [s.text for s in strip.divide([6, 10])] == ["agent ", "deck"]
    assert strip.adjust_cell_length(12).cell_length == 12
    assert strip.crop_extend(0, 12, None).text == "agent deck  "
    assert sys.getrefcount(strip) == held  # nothing the strip caches refers to it
