"""Set a group's daily spending budget (`b` in the scheduler view): at most so many US
dollars and so many tokens a UTC day, each optional, or back to agentdeck.toml's.

What is typed is read here, before anything is sent: an amount that is negative, too
large or not a number is said under the fields and the dialog stays open, with nothing
changed. The answer (`NewBudget`) goes back to the scheduler view, which applies it
through the bridge; Esc backs out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input

from console.format import facts, one_line
from console.spend import budget_text
from console.widgets.inputs import OneLineInput
from console.widgets.text import Label, Static
from engine.domain.usage import Limit, Usage, spent_text

MAX_COST = 10**9  # dollars: what the room's API takes (engine/api/usage_models.py)
MAX_TOKENS = 10**15
_SUFFIX = {"k": 1_000, "m": 1_000_000}
_NUMBER = re.compile(r"^\d+(\.\d+)?$|^\.\d+$")


@dataclass(frozen=True)
class NewBudget:
    """A daily budget to set: `tokens` and `cost` (None: no cap of that kind; both None: no
    budget, over agentdeck.toml's), or `clear`: back to agentdeck.toml's."""

    tokens: int | None = None
    cost: float | None = None
    clear: bool = False


def read_cost(text: str) -> float | None:
    """Dollars as typed (`5`, `$1.20`, `0.5`); None when empty. ValueError says why not."""
    raw = text.strip().removeprefix("$").replace(",", "").replace("_", "").strip()
    if not raw:
        return None
    if raw.startswith("-"):
        raise ValueError(f"cost: {one_line(text, 30)} is negative (0 or more dollars)")
    if not _NUMBER.match(raw) or not math.isfinite(float(raw)):
        raise ValueError(f"cost: {one_line(text, 30)} is not a number of dollars (like 5 or 1.20)")
    if (cost := float(raw)) > MAX_COST:
        raise ValueError(f"cost: at most ${MAX_COST:,} a day")
    return cost


def read_tokens(text: str) -> int | None:
    """Tokens as typed (`120000`, `120k`, `1.5M`); None when empty. ValueError says why not."""
    raw = text.strip().replace(",", "").replace("_", "").lower()
    if not raw:
        return None
    if raw.startswith("-"):
        raise ValueError(f"tokens: {one_line(text, 30)} is negative (0 or more tokens)")
    scale = _SUFFIX.get(raw[-1], 1)
    number = raw[:-1] if scale > 1 else raw
    if not _NUMBER.match(number) or (scale == 1 and "." in number):
        raise ValueError(f"tokens: {one_line(text, 30)} is not a whole number of tokens "
                         "(like 120000 or 120k)")  # fmt: skip
    if (tokens := round(float(number) * scale)) > MAX_TOKENS:
        raise ValueError(f"tokens: at most {MAX_TOKENS:,} a day")
    return tokens


def _typed(limit: float | None) -> str:
    """A limit as its field shows it to start with: 5, 1.2, 0.005, 120000 ("": none)."""
    return "" if limit is None else f"{limit:.6f}".rstrip("0").rstrip(".")


class DailyBudgetScreen(ModalScreen[NewBudget | None]):
    """Dismissed with the budget to set, or None (Esc: nothing changes)."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Back"),
        Binding("ctrl+t", "from_toml", "Back to agentdeck.toml's"),
    ]

    def __init__(self, group: str, today: Usage | None, limit: Limit | None,
                 whose: str | None = None) -> None:  # fmt: skip
        """`whose`: where the budget now comes from (agentdeck.toml's, set by someone)."""
        super().__init__()
        self.group, self.today, self.limit, self.whose = group, today, limit, whose

    def compose(self) -> ComposeResult:
        limit = self.limit or Limit()
        with Vertical(id="dialog"):
            yield Label(f"Daily budget of group {self.group}", id="question")
            yield Static(facts((
                ("spent today", spent_text(self.today) if self.today is not None else "—"),
                ("budget now", budget_text(self.today, self.limit)
                 + (f" ({self.whose})" if self.whose and self.limit else "")),
            )))  # fmt: skip
            with Horizontal(classes="budget-field"):
                yield Label("US dollars a day")
                yield OneLineInput(_typed(limit.cost), placeholder="no cap", id="cost")
            with Horizontal(classes="budget-field"):
                yield Label("tokens a day")
                yield OneLineInput(_typed(limit.tokens), placeholder="no cap",
                                   id="tokens")  # fmt: skip
            yield Static(id="budget-error")
            yield Static("Empty: no cap of that kind (both empty: no budget for the group). "
                         "Its held turns start once it is under the budget.",
                         classes="hint")  # fmt: skip
            with Horizontal(id="buttons"):
                yield Button("Back (esc)", id="back")
                yield Button("agentdeck.toml's (^t)", id="toml")
                yield Button("Set (enter)", id="set", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#cost", Input).focus()

    def answer(self) -> NewBudget | None:
        """The budget typed, or None when it cannot be read (said under the fields)."""
        error = self.query_one("#budget-error", Static)
        try:
            budget = NewBudget(tokens=read_tokens(self.query_one("#tokens", Input).value),
                               cost=read_cost(self.query_one("#cost", Input).value))  # fmt: skip
        except ValueError as exc:
            error.update(Text(f"✗ {exc}. Nothing is set."))
            error.add_class("-refused")
            return None
        error.update("")
        error.remove_class("-refused")
        return budget

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_set()

    @on(Input.Changed)
    def changed(self, event: Input.Changed) -> None:
        event.stop()
        if self.query_one("#budget-error", Static).has_class("-refused"):
            self.answer()  # the error goes as soon as what is typed reads

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "set":
            self.action_set()
        elif event.button.id == "toml":
            self.action_from_toml()
        else:
            self.dismiss(None)

    def action_set(self) -> None:
        if (budget := self.answer()) is not None:
            self.dismiss(budget)

    def action_from_toml(self) -> None:
        self.dismiss(NewBudget(clear=True))
