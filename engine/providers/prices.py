"""What a model's tokens cost: the room's own price (`[model] price`, per million tokens),
else the maintained price table of the `genai-prices` package (pydantic's, updated with
each release; it never fetches anything unless asked, and agentdeck never asks).

The table takes about a third of a second to load and a quarter of a millisecond to look
up, so both happen in a worker thread, never on the event loop, and only for a model that
has a price to find: the offline model is free, and a model served from a URL the table
does not know (a local server) has no price, which totals then say ("no price").

Prices are matched by the model's name at its provider's URL. Tokens written to a
provider's prompt cache are priced as plain input (the providers' usage counts them in the
input; agentdeck does not keep them apart).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from engine.config import PriceSettings
    from engine.providers.base import Provider

PER = 1_000_000  # prices are per million tokens


@dataclass(frozen=True)
class Priced:
    """How one model is priced: `rates` of the room's own, or `table` (the model's name
    and its provider's URL to look up), or neither (free: the offline model; or no price)."""

    rates: PriceSettings | None = None
    table: tuple[str, str] | None = None  # (model, provider URL)
    free: bool = False

    async def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float | None:
        """Dollars for these tokens, or None: the model has no known price."""
        if self.free:
            return 0.0
        if self.rates is not None:
            r = self.rates
            cached = min(cached_tokens, input_tokens)
            cached_rate = r.input if r.cached is None else r.cached
            return ((input_tokens - cached) * r.input + cached * cached_rate
                    + output_tokens * r.output) / PER  # fmt: skip
        if self.table is None:
            return None
        model, url = self.table
        return await anyio.to_thread.run_sync(
            _table_cost, model, url, input_tokens, output_tokens, cached_tokens
        )


def priced(provider: Provider, rates: PriceSettings | None) -> Priced:
    """How `provider`'s tokens are priced, with the room's `rates` first."""
    if rates is not None:
        return Priced(rates=rates)
    if provider.name == "offline":
        return Priced(free=True)
    url = getattr(provider, "base_url", None)
    return Priced(table=(provider.model, url)) if isinstance(url, str) else Priced()


@functools.lru_cache(maxsize=256)
def _unknown(model: str, url: str) -> bool:
    """Whether the table has no price for `model` at `url` (asked once per model)."""
    try:
        _lookup(model, url, 1, 1, 0)
    except Exception:  # LookupError: not in the table; anything else: no price either
        return True
    return False


def _table_cost(model: str, url: str, input_tokens: int, output_tokens: int,
                cached_tokens: int) -> float | None:  # fmt: skip
    if _unknown(model, url):
        return None
    try:
        return _lookup(model, url, input_tokens, output_tokens, cached_tokens)
    except Exception:  # a price the table cannot compute for these tokens: none
        return None


def _lookup(model: str, url: str, input_tokens: int, output_tokens: int,
            cached_tokens: int) -> float:  # fmt: skip
    from genai_prices import Usage, calc_price  # a third of a second: loaded on first use

    usage: Any = Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                       cache_read_tokens=min(cached_tokens, input_tokens))  # fmt: skip
    return float(calc_price(usage, model, provider_api_url=url).total_price)
