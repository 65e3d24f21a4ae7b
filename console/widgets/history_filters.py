"""The history screen's filter line: every filter with its value, and the room's totals."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from console.history.view import BOLD, DIM, Criteria, describe, plural


class HistoryFilters(Widget):
    """One line: `status all origin all … search —` and, at the right, the totals."""

    COMPONENT_CLASSES = {DIM, BOLD}

    criteria: reactive[Criteria] = reactive(Criteria)
    totals: reactive[dict[str, Any]] = reactive(dict, always_update=True)

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        for part, name in describe(self.criteria):
            text.append(part, self.get_component_rich_style(name) if name else "")
        if totals := self.totals:
            right = " · ".join(plural(totals.get(key, 0), word, 0) for key, word in (
                ("turns", "turn"), ("threads", "thread"), ("runs", "run"), ("steps", "step"),
                ("calls", "call"))) + f" · {totals.get('suspended_calls', 0)} waiting "  # fmt: skip
            gap = self.size.width - text.cell_len - len(right)
            if gap > 1:
                text.append(" " * gap)
                text.append(right, self.get_component_rich_style(DIM))
        return text
