"""A one-line filter for a list pane: shown by `/`, live as you type, Esc clears it."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message

from console.widgets.inputs import OneLineInput


class FilterBar(OneLineInput):
    """Filter text for the list below it."""

    BINDINGS = [Binding("escape", "clear_filter", "Clear filter")]

    class Cleared(Message):
        """Esc: the filter was emptied and the bar should hide."""

        def __init__(self, bar: FilterBar) -> None:
            super().__init__()
            self.bar = bar

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Cleared(self))
