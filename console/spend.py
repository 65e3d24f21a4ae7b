"""What the room spent today, and what its budgets hold, as the status bar says them.

The room says what today (a UTC day, as the engine's budgets count them) has spent when
the console reads its state (`budgets`: at start and after a gap in the events); from
then on each step that ends adds its tokens and cost (`StepFinished`), so the line moves
as turns run without asking the room. A step the room's read already showed finished is
in that total and is not added again; one that ends between that read and the budgets'
read is counted twice until the next gap (two reads back to back: rarely, and little).

What budgets hold (a group, a thread or the room that reached its day's limit) comes
with the same read, and at once from the notice the runtime publishes when a hold
begins. The room says nothing when a hold ends (a budget raised here or by `agentdeck
budget`, a new day), so while something is held, or a budget may have been reached by
the spending seen since, the screen reads the room's budgets again (`due`): once a
second at most, and only then.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from console.format import one_line, visible
from engine.domain.usage import Limit, Usage, cost_text, day_of, tokens_text

if TYPE_CHECKING:
    from engine.api.usage_models import BudgetsView
    from engine.domain.events import Notice, StepFinished

# The runtime's notice when a budget starts holding new turns (engine/services/budgets.py):
# "group chore's daily budget reached: $1.00 of $1.00 today: new turns of group chore
# wait (raise: agentdeck budget group:chore)"
HOLD_NOTICE = re.compile(
    r"^(?P<why>.*daily budget reached: .* today): new turns .*"
    r"\(raise: agentdeck budget (?P<scope>room|group:.+|thread:.+)\)$"
)
THREAD_SHOWN = 24  # characters of a held thread's id the status bar shows


class TodaySpend:
    """Today's spend of the room and its budgets' holds, kept by the state's fold."""

    def __init__(self) -> None:
        self.day = ""  # the UTC day counted ("": the room was not read yet)
        self.usage: Usage | None = None  # None: not read yet (nothing to show)
        self.held: dict[str, str] = {}  # scope (room, group:NAME, thread:ID) -> why
        self.budgeted = False  # the room has a daily budget (its spending may reach one)
        self.spent_since = False  # spending seen since the room's budgets were last read

    def load(self, view: BudgetsView, *, spent: bool = True) -> None:
        """The room's budgets as read: what they hold and (`spent`) what today spent.
        A read that is not the console's state (one while events flow) keeps the count
        of the events instead: both have the steps that ended before it."""
        if spent or view.day != self.day:
            self.day, self.usage = view.day, view.today.usage
        self.held = {h.scope: h.why for h in view.held}
        self.budgeted = any(b.scope != "turn" for b in view.budgets)
        self.spent_since = False

    def step(self, event: StepFinished) -> bool:
        """A step ended: add what it spent (its cost, or its tokens as unpriced when its
        model has no price). True when the line changed."""
        if not (event.input_tokens or event.output_tokens) or self.usage is None:
            return False  # (not read yet: the read will have it)
        day = day_of(event.at)
        if day < self.day:  # yesterday's, seen late: not today's
            return False
        self.roll(day)
        tokens = event.input_tokens + event.output_tokens
        self.usage = self.usage + Usage(
            event.input_tokens, event.output_tokens, event.cached_tokens,
            event.cost or 0.0, tokens if event.cost is None else 0, 1,
        )  # fmt: skip
        self.spent_since = self.budgeted
        return True

    def notice(self, event: Notice) -> bool:
        """A notice: one that a budget holds new turns now is shown at once."""
        m = HOLD_NOTICE.match(event.text)
        if m is None or self.usage is None:
            return False
        self.held[m.group("scope")] = m.group("why")
        return True

    def roll(self, day: str) -> bool:
        """`day` (UTC) is today: a new one starts from nothing, its holds gone with the
        day they counted. True when it is a new day."""
        if self.usage is None or day <= self.day:
            return False
        self.day, self.usage, self.held = day, Usage(), {}
        return True

    def due(self, now: float) -> bool:
        """Whether the room's budgets are to be read again now (`now`: Unix time): what
        holds may have ended, or begun."""
        return self.roll(day_of(now)) or bool(self.held) or self.spent_since

    # -- the status bar's words ----------------------------------------------------------------

    def held_text(self) -> str:
        """What the budgets hold, shortly: `group chore over budget` ("" when nothing)."""
        held = self.held
        if not held:
            return ""
        names = ["room"] if "room" in held else []
        names += [f"group {s.partition(':')[2]}" for s in sorted(held) if s.startswith("group:")]
        threads = [s.partition(":")[2] for s in sorted(held) if s.startswith("thread:")]
        if len(threads) == 1:
            names.append(f"thread {visible(one_line(threads[0], THREAD_SHOWN))}")
        elif threads:
            names.append(f"{len(threads)} threads")
        return f"{', '.join(names)} over budget"


def budget_text(spent: Usage | None, limit: Limit | None) -> str:
    """Today's spend against a daily budget: `$1.20 / $5.00`, `41k / 100k tokens` (both,
    when it caps both); `—` when there is none."""
    if limit is None or limit.empty:
        return "—"
    spent = spent or Usage()
    parts = [] if limit.cost is None else [f"{cost_text(spent.cost)} / {cost_text(limit.cost)}"]
    if limit.tokens is not None:
        parts.append(f"{tokens_text(spent.tokens)} / {tokens_text(limit.tokens)} tokens")
    return " · ".join(parts)
