"""Which model answers a turn: the room's `[model]`, or its group's (`[groups.NAME.model]`),
or its thread's (`[threads."ID".model]`), each over the one before it, field by field. A
turn records the one it ran with (`provider:model`), so a resumed turn is answered by it
again, and history shows which model answered each turn.

Each model is made once per run, when a turn first needs it, with its own context window
(engine/turn/window.py); the runtime closes them when it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.config import Config, ModelConfig
from engine.providers.base import Provider
from engine.providers.prices import Priced, priced
from engine.turn.window import ContextWindow, window_of


def model_for(config: Config, model: ModelConfig) -> Provider:
    """A provider for `model` (a group's or a thread's settings over the room's)."""
    from engine.providers.select import make_provider

    return make_provider(config.model_copy(update={"model": model})).provider


def model_over(record: dict[str, Any]) -> ModelConfig | None:
    """The model a turn's record names over its thread's (a replay's: engine/api/forkbook.py)."""
    said = record.get("model")
    return ModelConfig.model_validate(said) if isinstance(said, dict) else None


def key_of(provider: Provider) -> str:
    return f"{provider.name}:{provider.model}"


class Models:
    """The models of one run, by their `provider:model` key."""

    def __init__(self, config: Config, default: Provider,
                 make: Callable[[ModelConfig], Provider] | None = None) -> None:  # fmt: skip
        self.config, self.make = config, make
        self.default = key_of(default)
        self._providers: dict[str, Provider] = {self.default: default}
        self._windows = {self.default: ContextWindow(window_of(config.model, default),
                                                     config.model.compact_at)}  # fmt: skip
        self._chosen: dict[str, str] = {}  # settings (their JSON) -> key
        self._prices = {self.default: priced(default, config.model.price)}

    def choose(self, thread_id: str, group: str, over: ModelConfig | None = None) -> str:
        """The key of the model a new turn on `thread_id` (of `group`) is answered by (`over`:
        a replay's own model, over the thread's)."""
        thread = self.config.threads.get(thread_id)
        settings = self.config.groups.get(group)
        layers = [m for m in (settings.model if settings else None,
                              thread.model if thread else None, over) if m is not None]  # fmt: skip
        if not layers or self.make is None:
            return self.default
        merged = self.config.model
        for layer in layers:  # the group's over the room's, the thread's over both
            update = layer.model_dump(exclude_unset=True)
            if ("provider" in update or "model" in update) and "price" not in update:
                update["price"] = None  # another model: not the room's model's price
            merged = merged.model_copy(update=update)
        said = merged.model_dump_json()
        key = self._chosen.get(said)
        if key is None:
            provider = self.make(merged)
            key = self._chosen[said] = key_of(provider)
            if key not in self._providers:
                self._providers[key] = provider
                self._windows[key] = ContextWindow(window_of(merged, provider), merged.compact_at)
                self._prices[key] = priced(provider, merged.price)
        return key

    def provider(self, key: str | None) -> Provider:
        """The model of `key` (a turn recorded before models were chosen, or one whose model
        this run does not have: the room's)."""
        return self._providers.get(key or self.default) or self._providers[self.default]

    def priced(self, key: str | None) -> Priced:
        """How the model of `key` is priced (one this run does not have: the room's)."""
        return self._prices.get(key or self.default) or self._prices[self.default]

    def window(self, key: str | None) -> ContextWindow:
        return self._windows.get(key or self.default) or self._windows[self.default]

    async def aclose(self) -> None:
        """Close the models this run made (the room's own is closed by the runtime)."""
        for key, provider in self._providers.items():
            if key != self.default and (aclose := getattr(provider, "aclose", None)) is not None:
                await aclose()
