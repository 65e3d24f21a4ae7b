"""Pick the thread the chat pane shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from console.format import visible
from console.widgets.text import Label


class ThreadPickerScreen(ModalScreen[str | None]):
    """Enter picks the highlighted thread; Esc keeps the current one."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back"),
        Binding("j", "cursor('down')", "Down", show=False),
        Binding("k", "cursor('up')", "Up", show=False),
    ]

    def __init__(self, threads: list[str], current: str,
                 context: dict[str, str] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.threads, self.current = threads, current
        self.context = context or {}  # each thread's context gauge, where one is known

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("Switch thread", id="question")
            yield OptionList(
                *(
                    Option(
                        Content(
                            visible(
                                ("● " if t == self.current else "  ")
                                + t
                                + (f"   {self.context[t]}" if t in self.context else "")
                            )
                        ),
                        id=t,
                    )
                    for t in self.threads
                ),
                id="thread-list",
                markup=False,
            )

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        if self.current in self.threads:
            options.highlighted = self.threads.index(self.current)

    def action_cursor(self, direction: str) -> None:
        options = self.query_one(OptionList)
        options.action_cursor_down() if direction == "down" else options.action_cursor_up()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)
