"""A model's context window, and the request sizes the runtime estimates against it
(engine/turn/compaction.py compacts a request that would pass its threshold)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.config import ModelConfig
from engine.domain.messages import ConvMessage
from engine.providers.base import Provider
from engine.providers.windows import context_window, estimate_tokens

THRESHOLD = 0.8  # of the window: a request past it is compacted first
PER_MESSAGE = 4  # tokens a message costs besides its text (roles, separators)
SHORTENED = 800  # tokens of an old result as it is read shortened (engine/turn/view.py)
KEPT_SIZES = 16_384  # messages whose estimated size is remembered (each held: bounded memory)
OFFLINE_WINDOW = 16_384  # the offline model's (it counts words): small, so compaction shows


def window_of(model: ModelConfig, provider: Provider) -> int | None:
    """The context window of a model: its `context_window` setting, else what its name is
    documented to have (None: not known, so nothing is compacted)."""
    if model.context_window is not None:
        return model.context_window
    if provider.name == "offline":
        return OFFLINE_WINDOW
    return context_window(provider.model)


def message_tokens(m: ConvMessage) -> int:
    calls = sum(estimate_tokens(json.dumps(c.arguments)) + 4 for c in m.tool_calls)
    return estimate_tokens(m.read_text) + calls + PER_MESSAGE


@dataclass
class ContextWindow:
    """A model's window, and how the runtime's estimates compare with what it counts."""

    tokens: int | None  # None: not known, nothing is compacted
    threshold: float = THRESHOLD
    ratio: float = 1.0  # the provider's count over the estimate, as last learned
    _sizes: dict[int, tuple[ConvMessage, int]] = field(default_factory=dict, repr=False)
    _texts: dict[str, int] = field(default_factory=dict, repr=False)
    _tool_sizes: dict[tuple[Any, ...], int] = field(default_factory=dict, repr=False)

    def estimate(self, messages: list[ConvMessage], system: str | None,
                 tools: list[dict[str, Any]]) -> int:  # fmt: skip
        """The request's size in tokens, estimated, corrected by what was learned."""
        sizes, total = self._sizes, 0
        for m in messages:
            hit = sizes.get(id(m))
            if hit is None or hit[0] is not m:  # (a message is held with its size: an id
                hit = (m, message_tokens(m))  # is not reused while it is)
                if len(sizes) > KEPT_SIZES:
                    sizes.clear()
                sizes[id(m)] = hit
            total += hit[1]
        if system:
            total += estimate_tokens(system)
        if tools:
            total += estimate_tokens(json.dumps(tools))
        return int(total * self.ratio)

    def tools(self, tools: list[dict[str, Any]]) -> int:
        """The tools' size, remembered by their names (a step offers the same ones)."""
        key = tuple(t.get("name") for t in tools)
        hit = self._tool_sizes.get(key)
        if hit is None:
            if len(self._tool_sizes) > 64:
                self._tool_sizes.clear()
            hit = self._tool_sizes[key] = estimate_tokens(json.dumps(tools))
        return hit

    def text(self, text: str) -> int:
        """A system prompt's or the tools' size, remembered (they repeat every request)."""
        hit = self._texts.get(text)
        if hit is None:
            if len(self._texts) > 64:
                self._texts.clear()
            hit = self._texts[text] = estimate_tokens(text)
        return hit

    def learn(self, estimated: int, reported: int) -> None:
        """The provider counted `reported` input tokens for a request estimated at
        `estimated` (already corrected): move the correction towards what it says."""
        if estimated <= 0 or reported <= 0:
            return
        raw = self.ratio * reported / estimated
        self.ratio = min(4.0, max(0.25, 0.5 * self.ratio + 0.5 * raw))

    def over(self, size: int) -> bool:
        return self.tokens is not None and size > self.tokens * self.threshold
