"""A state as styled text (glyph + word) for table cells, coloured from the theme."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from console.glyphs import look


def state_text(widget: Widget, status: str, reason: str | None = None) -> Text:
    """`▶ running` in the widget's `state--*` component style."""
    state = look(status, reason)
    return Text(
        f"{state.glyph} {state.word}", widget.get_component_rich_style(state.style, partial=True)
    )
