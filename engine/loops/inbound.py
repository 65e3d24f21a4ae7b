"""What the hook and poll loops share: a channel's state, and making a message a request.

A message from a channel becomes a turn request like any other (origin `chat`, the
channel's name, its thread group), offered with the message's de-duplication key: the
request and its key commit in one transaction, so the same message offered again (a
Telegram update polled again after a crash, a Slack retry, a webhook redelivery) gets the
first request back and makes no second turn. Where the answer goes (`meta.reply`) rides
with the request, for the outbox at the turn's end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from engine.channels.base import Inbound
from engine.domain.events import one_line
from engine.domain.messages import InvalidMessage, Message
from engine.runtime import Runtime
from engine.services.scheduler import Rejected

log = logging.getLogger("agentdeck")
State = Literal["starting", "up", "failing", "stopped"]


@dataclass
class ChannelState:
    """How one loop or channel is doing, for `agentdeck channels` and the console."""

    name: str
    kind: str  # telegram, slack, webhook; or the loop's own name (server, pulse)
    loop: str  # poll, hook, server, pulse
    group: str = "chat"
    state: State = "starting"
    last_ok: float | None = None  # the last poll or delivery that went through
    last_error: str | None = None
    errors: int = 0  # consecutive
    received: int = 0  # messages made requests, this run
    rejected: int = 0  # deliveries refused (signature, size, form), this run
    lag: float | None = None  # seconds between a message's date and its request
    detail: dict[str, str] = field(default_factory=dict)
    # the channels' secrets out of an error (a bot token is in every Telegram URL)
    mask: Callable[[str], str] = field(default=str, repr=False, compare=False)

    def ok(self, at: float) -> None:
        self.state, self.last_ok, self.errors = "up", at, 0

    def fail(self, error: str) -> None:
        self.state, self.last_error = "failing", one_line(self.mask(error))[:300]
        self.errors += 1

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name, "kind": self.kind, "loop": self.loop, "group": self.group,
            "state": self.state, "last_ok": self.last_ok, "last_error": self.last_error,
            "errors": self.errors, "received": self.received, "rejected": self.rejected,
            "lag": self.lag, **({"detail": self.detail} if self.detail else {}),
        }  # fmt: skip


def message_of(inbound: Inbound, group: str) -> Message:
    """The turn request's message for `inbound` (InvalidMessage if it breaks a rule)."""
    return Message.parse(
        {
            "origin": "chat",
            "channel": inbound.channel,
            "sender": inbound.sender or "unknown",
            "thread_id": inbound.thread_id,
            "text": inbound.text,
            "meta": {"group": group, "reply": dict(inbound.reply)},
        }
    )


async def admit(rt: Runtime, inbound: Inbound, state: ChannelState) -> bool:
    """Make `inbound` a durable turn request (at most one per `dedup_key`); True when it
    is (or already was) one. A message no request can hold is logged and skipped (False);
    a store failure raises, and the caller does not acknowledge the message."""
    try:
        await rt.offer(message_of(inbound, state.group), key=inbound.dedup_key)
    except InvalidMessage as exc:
        log.warning("%s: a message was skipped: %s", state.name, exc)
        state.rejected += 1
        return False
    except Rejected as exc:  # recorded with its key: refused, durably, once
        log.warning("%s: a message's request was refused: %s", state.name, exc)
    state.received += 1
    if inbound.sent_at is not None:  # how long the message took to become a request
        state.lag = max(0.0, rt.clock() - inbound.sent_at)
    return True
