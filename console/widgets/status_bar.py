"""The status bar: room, run id, model in use, hosted or attached, how many turns run and
wait, and how many calls wait for a decision."""

from __future__ import annotations

from collections.abc import Iterable

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
    activity: reactive[str] = reactive("")  # the spinner and how long the oldest turn runs
    nearing: reactive[str] = reactive("")  # a thread near its context window, and how near

    def render(self) -> Text:
        """The parts that fit, most needed first kept: the calls to decide and the turns,
        then the model (its short form before it goes), hosted or attached, the room, the
        run, the timeline's following."""
        dim = self.get_component_rich_style("status--dim")
        run, wait = look(TurnStatus.RUNNING), look(TurnStatus.WAITING)
        calls = (
            f" ({self.calls} call{'s' if self.calls > 1 else ''} to decide)" if self.calls else ""
        )
        running = Text(f"{run.glyph} {self.running} running"
                       + (f" {self.activity}" if self.running and self.activity else ""),
                       self.get_component_rich_style("state--running"))  # fmt: skip
        waiting = Text(f"{wait.glyph} {self.waiting} waiting{calls}",
                       self.get_component_rich_style("state--waiting"))  # fmt: skip
        mode = Text(self.mode, dim if self.mode == "hosted" else "") if self.mode else None
        nearing = (Text(f"⚠ {self.nearing}", self.get_component_rich_style("state--waiting"))
                   if self.nearing else None)  # fmt: skip
        model = Text.assemble(("model ", dim), self.model)
        short = Text.assemble(("model ", dim), short_model(self.model))
        # (priority, part): the lowest priority goes first when the line is too long
        parts: list[tuple[int, Text | None]] = [
            (3, Text.assemble(("room ", dim), self.room)),
            (2, Text.assemble(("run ", dim), short_id(self.run_id))),  # whole in history (h)
            (9, running),
            (10, waiting),
            (8, nearing),
            (5, mode),
            (7, model),
            (1, Text.assemble(("timeline ", dim), "following" if self.follow else "frozen")),
        ]
        width = self.size.width or 160
        shown = [(k, t) for k, t in parts if t is not None]
        while _line(t for _, t in shown).cell_len > width and len(shown) > 2:
            if any(t is model for _, t in shown) and short.cell_len < model.cell_len:
                shown = [(k, short if t is model else t) for k, t in shown]
                model = short
                continue
            lowest = min(k for k, _ in shown)
            shown = [(k, t) for k, t in shown if k != lowest]
        return _line(t for _, t in shown)


def _line(parts: Iterable[Text]) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis", end="")
    for part in parts:
        text.append(" " if not text else "  ").append_text(part)
    return text


def short_model(model: str) -> str:
    """A model's name without its provider ("openai:gpt-4o-mini" -> "gpt-4o-mini")."""
    return model.split(":", 1)[-1] if ":" in model else model
