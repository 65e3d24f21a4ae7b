"""Text from outside, drawn as text: Static and Label that never read markup, and the
line filter that keeps control characters from the terminal.

What the console shows comes from a model, a tool, a channel user, a file or an error as
often as from us, and Textual reads a string given to Static or Label as markup (`[/]` in
a command would end the console): screens import these instead of Textual's. Control
characters are shown escaped where text is drawn (console.format.visible); `NoControls`
drops any still left in a line just before it is written, so one a widget missed is
never sent raw."""

from __future__ import annotations

import re
from typing import Any

from rich.segment import Segment
from textual import widgets
from textual.color import Color
from textual.filter import LineFilter
from textual.visual import VisualType

from console.format import visible

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _safe(content: VisualType) -> VisualType:
    return visible(content, lines=True) if isinstance(content, str) else content


class _Plain:
    """`markup=False` and control characters escaped, for a Textual widget with content."""

    def __init__(self, content: VisualType = "", **kw: Any) -> None:
        kw.setdefault("markup", False)
        super().__init__(_safe(content), **kw)  # type: ignore[call-arg]

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(_safe(content), layout=layout)  # type: ignore[misc]


class Static(_Plain, widgets.Static):
    """Textual's Static, drawing text."""


class Label(_Plain, widgets.Label):
    """Textual's Label, drawing text."""


class NoControls(LineFilter):
    """Drops control characters from the text of a line about to be written (they take
    no cells, so the layout is unchanged); the terminal's own sequences are not text."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        # (every line drawn passes here: one search over the line's text, not one a segment)
        if not _CONTROL.search("".join([s.text for s in segments])):
            return segments
        return [Segment(_CONTROL.sub("", s.text), s.style) if s.control is None else s
                for s in segments]  # fmt: skip
