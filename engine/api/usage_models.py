"""The bodies of the usage and budget operations (`usage`, `budgets`, `set_budget`), and
how a room's reads become them (for the owner's LocalClient and RoomReader alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from engine.api.models import _Body
from engine.domain.decisions import storable
from engine.domain.usage import SCOPE, Usage, day_of

if TYPE_CHECKING:
    from engine.services.budgets import Budgets
    from engine.store.reader import Reads

DAY = r"^\d{4}-\d{2}-\d{2}$"
By = Literal["day", "group", "thread", "model"]


class Spend(_Body):
    """What was spent: tokens in (cached: of those, read from the provider's cache) and
    out, US dollars of the priced ones, and the tokens of models with no known price."""

    key: str = ""  # the day, group, thread or model it is the total of ("" for a total)
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0

    @classmethod
    def of(cls, usage: Usage, key: str = "") -> Spend:
        return cls(key=key, steps=usage.steps, input_tokens=usage.input_tokens,
                   output_tokens=usage.output_tokens, cached_tokens=usage.cached_tokens,
                   cost=usage.cost, unpriced=usage.unpriced)  # fmt: skip

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cached_tokens, self.cost,
                     self.unpriced, self.steps)  # fmt: skip


class UsageReport(_Body):
    """Totals from `since` to `until` (UTC days, both included), per `by` (None: one)."""

    by: By | None
    since: str
    until: str
    rows: list[Spend]
    total: Spend


class BudgetRow(_Body):
    scope: str  # turn | thread | thread:ID | group:NAME | room
    tokens: int | None
    cost: float | None
    source: Literal["toml", "set"]  # agentdeck.toml's, or set by an operator
    set_by: str | None = None
    set_at: float | None = None
    spent: Spend | None = None  # today's (None: the turn budget, per turn)
    reached: str | None = None  # how today's spend reached it (None: it has not)


class Held(_Body):
    scope: str  # room | group:NAME | thread:ID
    why: str


class BudgetsView(_Body):
    """The budgets that apply, today's spend against each, and what they hold."""

    day: str  # today, UTC
    today: Spend  # the room's
    budgets: list[BudgetRow]
    held: list[Held]


class BudgetBody(_Body):
    """A budget to set: `tokens` and `cost` (both None: no budget for this scope, over
    agentdeck.toml's), or `clear`: back to agentdeck.toml's."""

    scope: str = Field(pattern=SCOPE.pattern, max_length=4200)
    tokens: int | None = Field(None, ge=0, le=10**15)
    cost: float | None = Field(None, ge=0, le=10**9, allow_inf_nan=False)
    clear: bool = False
    by: str = Field("operator", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _storable(self) -> BudgetBody:
        storable(self.scope, "scope")
        storable(self.by, "by")
        if self.clear and (self.tokens is not None or self.cost is not None):
            raise ValueError("clear takes no tokens or cost")
        return self


async def report(reads: Reads, by: By | None, since: str | None, until: str | None,
                 now: float, limit: int = 1000) -> UsageReport:  # fmt: skip
    """The report of `since`..`until` (default: today)."""
    from engine.store import usage as stored

    today = day_of(now)
    since, until = since or today, until or today
    rows = await stored.report(reads, by, since, until, limit) if by else []
    total = await stored.report(reads, None, since, until)
    return UsageReport(by=by, since=since, until=until,
                       rows=[Spend.of(u, k) for k, u in rows],
                       total=Spend.of(total[0][1] if total else Usage()))  # fmt: skip


def view(budgets: Budgets, held: dict[str, str] | None = None) -> BudgetsView:
    """What `budgets` hold now, with the scheduler's holds (`held`: scope -> why)."""
    from engine.domain.usage import over

    rows = []
    for b in budgets.all():
        per_day = b.scope != "turn"
        spent = budgets.spent_in(b.scope) if per_day and b.scope != "thread" else None
        reached = over(spent, b.limit) if spent is not None else None
        rows.append(BudgetRow(
            scope=b.scope, tokens=b.limit.tokens, cost=b.limit.cost, source=b.source,  # type: ignore[arg-type]
            set_by=b.set_by, set_at=b.set_at, spent=Spend.of(spent) if spent else None,
            reached=reached,
        ))  # fmt: skip
    return BudgetsView(day=budgets.day or day_of(budgets.clock()),
                       today=Spend.of(budgets.spent_in("room")), budgets=rows,
                       held=[Held(scope=k, why=v) for k, v in (held or {}).items()])  # fmt: skip


def holds(scheduler: Any) -> dict[str, str]:
    """The scheduler's holds, by scope."""
    out = {"room": scheduler.held_room} if scheduler.held_room else {}
    out.update({f"group:{g}": why for g, why in sorted(scheduler.held_groups.items())})
    out.update({f"thread:{t}": why for t, why in sorted(scheduler.held_threads.items())})
    return out
