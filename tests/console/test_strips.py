"""Textual's drawn lines make no reference cycle once the console is imported
(console/strips.py): a line drawn and dropped is freed at once, not by a full collection."""

from __future__ import annotations

import gc

from rich.segment import Segment
from textual.strip import Strip

import console.app  # noqa: F401  (it patches Textual's strips on import)


def test_a_strip_asked_for_itself_does_not_keep_itself() -> None:
    gc.collect()
    gc.disable()
    try:
        strip = Strip([Segment("agent "), Segment("deck")], 10)
        assert strip.divide([10]) == [strip]  # the compositor asks this of every line
        assert strip.adjust_cell_length(10) is strip
        assert strip.crop_extend(0, 10, None) is strip
        assert [s.text for s in strip.divide([6, 10])] == ["agent ", "deck"]
        assert strip.adjust_cell_length(12).cell_length == 12
        assert strip.crop_extend(0, 12, None).text == "agent deck  "
        del strip
        assert gc.collect() == 0  # nothing was left for the cyclic collector
    finally:
        gc.enable()
