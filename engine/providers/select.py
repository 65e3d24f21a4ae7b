"""Which model a room uses: `[model]` in agentdeck.toml, else the environment, else offline.

Order: `[model] provider` when set; otherwise ANTHROPIC_API_KEY selects Anthropic, then
OPENAI_API_KEY or OPENAI_BASE_URL (a local OpenAI-compatible server) selects OpenAI; with
none of these, the offline model. Base URLs come from `[model] base_url`, else
OPENAI_BASE_URL / ANTHROPIC_BASE_URL. `key_source` tells the operator where the key came
from; it never holds the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from engine.config import Config
from engine.providers.base import Provider
from engine.providers.offline import OfflineModel

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}


@dataclass(frozen=True)
class ProviderChoice:
    """The provider in use and where its key comes from (never the key itself)."""

    provider: Provider
    key_source: str


def make_provider(config: Config, env: Mapping[str, str] | None = None) -> ProviderChoice:
    """The room's model, from `config` and `env` (default: the process environment).

    Real providers open their HTTP client on first use; the runtime closes it with
    `aclose()` when it shuts down.
    """
    env = os.environ if env is None else env

    def var(name: str) -> str | None:
        return env.get(name) or None

    m = config.model
    kind = m.provider
    if kind is None:
        if var("ANTHROPIC_API_KEY"):
            kind = "anthropic"
        elif var("OPENAI_API_KEY") or var("OPENAI_BASE_URL"):
            kind = "openai"
        else:
            kind = "offline"
    if kind == "offline":
        return ProviderChoice(OfflineModel(delay=m.offline_delay, model=m.model),
                              "none (offline model)")  # fmt: skip

    key_var = m.key_env or ("ANTHROPIC_API_KEY" if kind == "anthropic" else "OPENAI_API_KEY")
    key = var(key_var)
    base_url = m.base_url or var("ANTHROPIC_BASE_URL" if kind == "anthropic" else "OPENAI_BASE_URL")
    model = m.model or DEFAULT_MODELS[kind]
    if key:
        source = f"env {key_var}"
    elif base_url:
        source = "none (local server)"
    else:
        source = f"none ({key_var} is not set)"

    from engine.providers.http import RequestLimits

    limits = RequestLimits(connect_timeout=m.connect_timeout, read_timeout=m.read_timeout,
                           request_timeout=m.request_timeout, retry_after_max=m.retry_after_max,
                           max_event_bytes=m.max_event_bytes)  # fmt: skip
    if kind == "anthropic":
        from engine.providers.anthropic import DEFAULT_BASE_URL, AnthropicProvider

        provider: Provider = AnthropicProvider(
            model, key, base_url or DEFAULT_BASE_URL, limits=limits
        )
    else:
        from engine.providers.openai import DEFAULT_BASE_URL as OPENAI_URL
        from engine.providers.openai import OpenAIProvider

        provider = OpenAIProvider(model, key, base_url or OPENAI_URL, limits=limits)
    return ProviderChoice(provider, source)
