"""The status bar: room, run id, model in use, hosted or attached, how many turns run and
wait, and how many calls wait for a decision."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from console.format import short_id
from console.glyphs import look
from engine.lifecycle import TurnStatus


class StatusBar(Widget):
    """One line at the bottom of the main screen."""

    COMPONENT_CLASSES = {"state--running", "state--waiting", "status--dim"}

    room: reactive[str] = reactive("")
    run_id: reactive[str] = reactive("starting…")
    model: reactive[str] = reactive("")
    mode: reactive[str] = reactive("")  # hosted | attached to pid N | detached: …
    running: reactive[int] = reactive(0)
    waiting: reactive[int] = reactive(0)
    calls: reactive[int] = reactive(0)  # calls waiting for a decision
    follow: reactive[bool] = reactive(True)

    def render(self) -> Text:
        dim = self.get_component_rich_style("status--dim")
        run, wait = look(TurnStatus.RUNNING), look(TurnStatus.WAITING)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" room ", dim).append(self.room)
        text.append("  run ", dim).append(short_id(self.run_id))  # whole in history (h)
        text.append("  ")
        text.append(f"{run.glyph} {self.running} running",
                    self.get_component_rich_style("state--running"))  # fmt: skip
        text.append("  ")
        calls = (
            f" ({self.calls} call{'s' if self.calls > 1 else ''} to decide)" if self.calls else ""
        )
        text.append(f"{wait.glyph} {self.waiting} waiting{calls}",
                    self.get_component_rich_style("state--waiting"))  # fmt: skip
        if self.mode:  # what a narrow terminal cuts first comes last
            text.append("  ").append(self.mode, dim if self.mode == "hosted" else None)
        text.append("  model ", dim).append(self.model)
        text.append("  timeline ", dim).append("following" if self.follow else "frozen")
        return text
