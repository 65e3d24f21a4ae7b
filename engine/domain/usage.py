"""What turns spend, and the budgets that stop them.

`Usage` counts tokens (in, out, and of the input those the provider served from its prompt
cache) and their cost in US dollars. A step's cost comes from its model's price (the room's
`[model] price`, else the maintained price table, engine/providers/prices.py); a model
with no known price adds its tokens to `unpriced` instead of a guess to `cost`, so a total
says "$1.20 + 4.1k tokens unpriced" rather than a wrong figure.

A `Limit` caps tokens, cost or both. Budgets are limits with a scope (`Scope`): one turn,
each thread per day, a group per day, the room per day. Days are UTC days, as providers
bill them.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Literal

__all__ = ["Limit", "Scope", "Usage", "day_of", "next_day_at", "over", "parse_scope"]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0  # a share of input_tokens, not added to it
    cost: float = 0.0  # US dollars of the priced tokens
    unpriced: int = 0  # tokens (in + out) of steps whose model has no known price
    steps: int = 0  # inference steps counted

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def known_cost(self) -> float | None:
        """The cost, or None when there is none to say: no tokens, or some had no price."""
        return self.cost if self.tokens and not self.unpriced else None

    @classmethod
    def priced(cls, input_tokens: int, output_tokens: int, cached_tokens: int,
               cost: float | None) -> Usage:  # fmt: skip
        """One inference's: its tokens and their `cost` (None: its model has no price,
        and its tokens count as unpriced)."""
        unpriced = 0 if cost is not None else input_tokens + output_tokens
        return cls(input_tokens, output_tokens, cached_tokens, cost or 0.0, unpriced, 1)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens, self.cost + other.cost,
            self.unpriced + other.unpriced, self.steps + other.steps,
        )  # fmt: skip


@dataclass(frozen=True)
class Limit:
    """At most `tokens` (in + out) and at most `cost` dollars; None: no cap of that kind."""

    tokens: int | None = None
    cost: float | None = None

    @property
    def empty(self) -> bool:
        return self.tokens is None and self.cost is None


ScopeKind = Literal["turn", "thread", "group", "room"]
SCOPE = re.compile(r"^(turn|thread|room)$|^(thread|group):(.{1,4096})$", re.DOTALL)


@dataclass(frozen=True)
class Scope:
    """Where a budget applies: `turn` (each turn), `thread` (each thread per day),
    `thread:ID` (that thread per day, over `thread`), `group:NAME`, `room` (per day)."""

    kind: ScopeKind
    name: str = ""  # the thread's id or the group's name; "" for the room, turn and thread

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" if self.name else self.kind

    @property
    def per_day(self) -> bool:
        return self.kind != "turn"


def parse_scope(text: str) -> Scope:
    """`turn`, `thread`, `thread:ID`, `group:NAME` or `room`; ValueError otherwise."""
    m = SCOPE.match(text)
    if m is None or (m.group(3) is not None and not m.group(3).strip()):
        raise ValueError(
            f"no such budget scope {text!r}: turn, thread, thread:ID, group:NAME or room"
        )
    if m.group(1):
        return Scope(m.group(1))  # type: ignore[arg-type]
    return Scope(m.group(2), m.group(3))  # type: ignore[arg-type]


CENT = 1e-9  # dollars below which two costs are the same (sums of floats drift)


def over(spent: Usage, limit: Limit, coming: Usage | None = None) -> str | None:
    """How `spent` has reached `limit` (or would pass it with what the next step is
    expected to add, `coming`), in words; None when it stays within it."""
    would = spent + coming if coming is not None else spent
    if limit.tokens is not None and (spent.tokens >= limit.tokens or would.tokens > limit.tokens):
        return f"{tokens_text(spent.tokens)} of {tokens_text(limit.tokens)} tokens"
    if limit.cost is not None and (spent.cost >= limit.cost - CENT
                                   or would.cost > limit.cost + CENT):  # fmt: skip
        return f"{cost_text(spent.cost)} of {cost_text(limit.cost)}"
    return None


def tokens_text(n: int) -> str:
    """12, 4.1k, 2.3M: a count as people read it."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def cost_text(dollars: float) -> str:
    """$0.0042, $1.20, $312: enough digits to see a small spend (and <$0.0001 for less:
    never $0.0000 for something that cost)."""
    if dollars == 0:
        return "$0.00"
    if dollars < 0.0001:
        return "<$0.0001"
    if dollars < 0.01:
        return f"${dollars:.4f}"
    if dollars < 100:
        return f"${dollars:.2f}"
    return f"${dollars:,.0f}"


def spent_text(usage: Usage) -> str:
    """What was spent as a line says it: `$1.20 · 41k tokens`, with what has no price."""
    tokens = f"{tokens_text(usage.tokens)} tokens"
    if usage.unpriced and usage.unpriced == usage.tokens:
        return f"{tokens} · no price"
    if usage.unpriced:
        return f"{cost_text(usage.cost)} · {tokens} ({tokens_text(usage.unpriced)} no price)"
    return f"{cost_text(usage.cost)} · {tokens}"


_said = (math.nan, "")  # the last day named: (its number since 1970, its name)


def day_of(at: float) -> str:
    """The UTC day of a Unix time: `2026-11-28` (the last one named again without
    strftime: every step's usage row and the budgets ask for it)."""
    global _said
    number, name = _said
    if at // 86400 == number:  # (a UTC day is 86,400 s: its number decides its name)
        return name
    name = time.strftime("%Y-%m-%d", time.gmtime(at))
    _said = (at // 86400, name)
    return name


def next_day_at(at: float) -> float:
    """The Unix time the UTC day after `at`'s begins."""
    return (int(at) // 86400 + 1) * 86400.0
