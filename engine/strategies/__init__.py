"""Execution strategies: how one turn completes. The runtime loop that created the turn
has no say; the strategy is chosen per thread group, per thread or per invoke and recorded
on the turn. All of them use the same lifecycle, gates, decisions and checkpoints."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.turn.loop import TurnLoop

Strategy = Callable[["TurnLoop"], Awaitable[None]]
NAMES = ("react", "direct", "plan_execute")
OPERATIONS = ("compact", "uncompact")  # turns an operator asks for that answer no message


class UnknownStrategy(ValueError):
    """A turn named a strategy agentdeck does not have."""


async def _runner_gone(loop: TurnLoop) -> None:
    """A ToolRunner's turn found running after a restart: the program driving it is gone."""
    await loop.finish("stopped:runner_gone", "the program that iterated this runner stopped")


def strategy_for(name: str) -> Strategy:
    """The strategy called `name`."""
    from engine.strategies import compact, direct, plan_execute, react

    table: dict[str, Strategy] = {
        "compact": compact.compact,
        "uncompact": compact.uncompact,
        "react": react.run,
        "direct": direct.run,
        "plan_execute": plan_execute.run,
        "runner": _runner_gone,
    }
    if name not in table:
        raise UnknownStrategy(f"unknown strategy {name!r}; choose one of {', '.join(NAMES)}")
    return table[name]


def initial_record(name: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """What a new turn keeps on its record from its message's meta, so a resumed turn has
    it too: a replay's record and model (engine/api/forkbook.py), and what the strategy
    `name` keeps (plan_execute: the sender's extra requirement)."""
    kept = {k: meta[k] for k in ("replay", "model") if isinstance(meta.get(k), dict)}
    if name != "plan_execute":
        return kept
    from engine.strategies import plan_execute

    return {**kept, **plan_execute.initial_record(meta)}


def strategy_of_turn(name: str) -> Strategy:
    """The strategy a recorded turn names; one agentdeck no longer has ends it in error
    (when it runs, as any failure does) instead of failing its resumption."""
    try:
        return strategy_for(name)
    except UnknownStrategy as exc:
        problem = str(exc)

        async def unknown(loop: TurnLoop) -> None:
            await loop.finish("error", problem)

        return unknown
