"""Channels: the room's edges to Telegram, Slack and signed webhooks.

`load_channels` reads channels.toml and hooks.toml and builds one channel object per
table, each with its secrets from the environment; the poll and hook loops use `poll` and
`accept` to turn what arrives into `Inbound` messages, the delivery worker `deliver` to send
answers back.

The names below are loaded when first used (`from engine.channels import X`), so a module
that reads the channels' config (engine/channels/config.py) does not load every channel,
and httpx, with it: a room without channels never does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.channels.base import (
        Channel,
        ChannelError,
        DeliveryError,
        HookChannel,
        HookRejected,
        HookReply,
        Inbound,
        PollChannel,
        PollError,
    )
    from engine.channels.config import ChannelConfigError, Secret
    from engine.channels.making import channel_of, load_channels
    from engine.channels.slack import SlackChannel
    from engine.channels.telegram import TelegramChannel
    from engine.channels.webhook import WebhookChannel

_WHERE = {
    "base": ("Channel", "ChannelError", "DeliveryError", "HookChannel", "HookRejected",
             "HookReply", "Inbound", "PollChannel", "PollError"),
    "config": ("ChannelConfigError", "Secret"),
    "making": ("channel_of", "load_channels"),
    "slack": ("SlackChannel",),
    "telegram": ("TelegramChannel",),
    "webhook": ("WebhookChannel",),
}  # fmt: skip
_MODULE = {name: module for module, names in _WHERE.items() for name in names}
__all__ = [
    "Channel",
    "ChannelConfigError",
    "ChannelError",
    "DeliveryError",
    "HookChannel",
    "HookRejected",
    "HookReply",
    "Inbound",
    "PollChannel",
    "PollError",
    "Secret",
    "SlackChannel",
    "TelegramChannel",
    "WebhookChannel",
    "channel_of",
    "load_channels",
]


def __getattr__(name: str) -> Any:
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.channels' has no attribute {name!r}")
    return getattr(importlib.import_module(f"engine.channels.{module}"), name)
