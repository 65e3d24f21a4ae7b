"""What a turn's steps spend: an inference's tokens priced by the turn's model, and what a
step that spent writes with it (its day's row of the usage table) and tells the room's
budgets (engine/services/budgets.py)."""

from __future__ import annotations

from engine.domain.usage import Usage, day_of
from engine.providers.base import AssistantAccumulator
from engine.store import Op
from engine.store import usage as spending
from engine.turn.context import TurnContext
from engine.turn.state import TurnState


async def priced(ctx: TurnContext, model: str | None, acc: AssistantAccumulator) -> Usage:
    """One inference's usage, its cost from the model of `model` (None: the room's)."""
    tokens = (acc.input_tokens, acc.output_tokens, acc.cached_tokens)
    cost = await ctx.models.priced(model).cost(*tokens) if any(tokens) else 0.0
    return Usage.priced(*tokens, cost)


def written(ctx: TurnContext, turn: TurnState, used: Usage, at: float) -> list[Op]:
    """What a step of `turn` that ended `at` and spent `used` adds to its checkpoint (and
    tells the budgets, which count it at once)."""
    if not used.tokens:
        return []
    ctx.budgets.spend(turn.group, turn.thread_id, used, at)
    model = turn.model or ctx.models.default
    return [spending.added(day_of(at), turn.group, turn.thread_id, model, used)]
