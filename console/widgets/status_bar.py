"""The status bar: room, run id, model in use, hosted or attached, how many turns run and
wait, how many calls wait for a decision, what the room spent today and what its
budgets hold, and a warning when the shell has no sandbox."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from console.format import short_id
from console.glyphs import look
from engine.domain.usage import Usage, cost_text, spent_text, tokens_text
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
    spent: reactive[Usage | None] = reactive(None)  # the room's today (None: not read yet)
    held: reactive[str] = reactive("")  # what budgets hold: "group chore over budget"
    sandbox: reactive[str] = reactive("")  # "no sandbox": the kernel cannot confine shell calls

    def render(self) -> Text:
        """The parts that fit, most needed first kept: the calls to decide and the turns,
        what budgets hold, a missing sandbox, a thread near its window, today's spend, then
        the model (its short form before it goes), hosted or attached, the room, the run,
        the timeline's following."""
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
        warn = self.get_component_rich_style("state--waiting")
        nearing = Text(f"⚠ {self.nearing}", warn) if self.nearing else None
        held = Text(f"⚠ {self.held}", warn) if self.held else None
        sandbox = Text(f"⚠ {self.sandbox}", warn) if self.sandbox else None
        spent = self.spent
        today = Text.assemble(("today ", dim), spent_text(spent)) if spent is not None else None
        model = Text.assemble(("model ", dim), self.model)
        # (priority, part): the lowest priority goes first when the line is too long
        parts: list[tuple[int, Text | None]] = [
            (3, Text.assemble(("room ", dim), self.room)),
            (2, Text.assemble(("run ", dim), short_id(self.run_id))),  # whole in history (h)
            (10, running),
            (11, waiting),
            (9, held),
            (8, sandbox),
            (7, nearing),
            (6, today),
            (4, mode),
            (5, model),
            (1, Text.assemble(("timeline ", dim), "following" if self.follow else "frozen")),
        ]
        # parts with a short form, tried in this order before a part goes
        shorter = [(model, Text.assemble(("model ", dim), short_model(self.model)))]
        if today is not None and spent is not None:
            shorter.append((today, Text.assemble(("today ", dim), short_spent(spent))))
        width = self.size.width or 160
        shown = [(k, t) for k, t in parts if t is not None]
        while _line(t for _, t in shown).cell_len > width and len(shown) > 2:
            can = [(a, b) for a, b in shorter
                   if b.cell_len < a.cell_len and any(t is a for _, t in shown)]  # fmt: skip
            if can:
                long, short = can[0]
                shown = [(k, short if t is long else t) for k, t in shown]
                shorter.remove(can[0])
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


def short_spent(usage: Usage) -> str:
    """What was spent, in short: its cost (its tokens when none of them has a price)."""
    if usage.unpriced and usage.unpriced == usage.tokens:
        return f"{tokens_text(usage.tokens)} tokens"
    return cost_text(usage.cost)
