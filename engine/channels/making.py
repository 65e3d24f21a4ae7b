"""Making the room's channels from channels.toml and hooks.toml (see the package)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import httpx

from engine.channels.config import SlackConfig, TelegramConfig, WebhookConfig, read_channels
from engine.channels.slack import SlackChannel
from engine.channels.telegram import TelegramChannel
from engine.channels.webhook import WebhookChannel


def load_channels(
    room_dir: Path,
    env: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
) -> list[TelegramChannel | SlackChannel | WebhookChannel]:
    """The channels `room_dir`'s channels.toml and hooks.toml define (none when neither
    exists), their secrets from `env` (default: this process's environment); one shared
    `client` if given, else each opens its own (closed by its `aclose`).
    ChannelConfigError names the file and channel when one cannot start."""
    env = os.environ if env is None else env
    configs = read_channels(room_dir)
    for config in configs:  # every secret is checked before any client is opened
        for key in _secret_keys(config):
            config.secret(key, env)
    return [channel_of(config, env, client) for config in configs]


def channel_of(
    config: TelegramConfig | SlackConfig | WebhookConfig,
    env: Mapping[str, str],
    client: httpx.AsyncClient | None = None,
) -> TelegramChannel | SlackChannel | WebhookChannel:
    """The channel `config` describes, its secrets from `env` (ChannelConfigError, naming
    the variable, when one is unset or empty)."""
    for key in _secret_keys(config):
        config.secret(key, env)
    if isinstance(config, TelegramConfig):
        return TelegramChannel(config, config.secret("token_env", env), client)
    if isinstance(config, SlackConfig):
        signing = config.secret("signing_secret_env", env)
        return SlackChannel(config, signing, config.secret("token_env", env), client)
    return WebhookChannel(config, config.secret("secret_env", env), client)


def _secret_keys(config: TelegramConfig | SlackConfig | WebhookConfig) -> tuple[str, ...]:
    if isinstance(config, SlackConfig):
        return ("signing_secret_env", "token_env")
    if isinstance(config, TelegramConfig):
        return ("token_env",)
    return ("secret_env",)
