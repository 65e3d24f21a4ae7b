"""What turns, steps and threads spent, as the history screen says it; no Textual here.

A turn row or a step (`engine.api.history`'s dicts) becomes a `Usage` through
`History.spent`, which counts tokens with no cost (a model without a price, a room that
predates costs) as unpriced. Where there is room the words are the engine's (`spent_text`:
`$0.0042 · 12k tokens`, `15 tokens · no price`), as `agentdeck history` says them; the
turns list and the steps pane are narrow, and say it short (`$0.0042`, `15 tok`). A turn
or step that spent nothing says nothing.
"""

from __future__ import annotations

from typing import Any

from engine.api.history import History
from engine.domain.usage import Usage, cost_text, spent_text, tokens_text

LIST_WIDTH = 8  # `$0.0042`, `<$0.0001`, `4.1k tok`: the turns list's column


def list_text(item: dict[str, Any]) -> str:
    """A turn in the turns list, at most LIST_WIDTH cells: its cost (`+` when some of its
    tokens have no price), or with no price at all its tokens; "" when it spent nothing."""
    usage = History.spent(item)
    if not usage.tokens:
        return ""
    if usage.unpriced == usage.tokens:
        return f"{tokens_text(usage.tokens)} tok"
    return cost_text(usage.cost) + ("+" if usage.unpriced else "")


def said(item: dict[str, Any]) -> str:
    """What a turn or a step spent in words; "" when it spent nothing (a tool round)."""
    usage = History.spent(item)
    return spent_text(usage) if usage.tokens else ""


def tokens_apart(turn: dict[str, Any]) -> str:
    """A turn's tokens in, out and (of the input) served from the provider's cache."""
    cached = f" · {turn['cached_tokens']} cached" if turn.get("cached_tokens") else ""
    return f"{turn['input_tokens'] or 0} in · {turn['output_tokens'] or 0} out{cached}"


def step_summary(step: dict[str, Any]) -> str:
    """A step's timeline summary after what it spent, short (the pane is narrow, and a long
    answer is cut at its end): `$0.0020 · 15 tok — calls add`, with no price `15 tok — …`."""
    summary = step["summary"] or ""
    usage = History.spent(step)
    if not usage.tokens:  # a tool round
        return summary
    cost = "" if usage.unpriced == usage.tokens else f"{cost_text(usage.cost)} · "
    return f"{cost}{tokens_text(usage.tokens)} tok — {summary}"


def thread_text(usage: Usage | None) -> str:
    """The turns pane's title part for a thread: what it spent, all days together."""
    if usage is None:  # a room that predates costs
        return ""
    return f"thread spent {spent_text(usage)}" if usage.tokens else "thread spent nothing"
