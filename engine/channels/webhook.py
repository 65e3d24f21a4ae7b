"""A generic signed webhook: JSON deliveries in, each answer POSTed as JSON out.

Inbound, a delivery carries `<signature_header>: sha256=<hex HMAC-SHA256 of the raw body>`
keyed with the shared secret (GitHub's `X-Hub-Signature-256` form) and a delivery id
header that makes it unique (a redelivery has the same id, so it is admitted once). That
signature does not cover the id: a captured delivery replayed under a new id is a new
message. With `timestamp_header` set, the signature is of `<timestamp>.<id>.<body>` and a
timestamp older than `max_age` is refused, so a replay fails either way. Dotted
paths in the config pick the message text, the conversation and the sender out of the body.

Outbound, `{"thread", "text", "channel", "key"}` is POSTed to `deliver_url`, signed the same
way, with `Idempotency-Key: <key>` so the receiver can drop a delivery it already has.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Literal

import httpx

from engine.channels.base import (
    DeliveryError,
    HookRejected,
    HookReply,
    HttpChannel,
    Inbound,
    lower_headers,
    status_error,
    transport_error,
)
from engine.channels.config import Secret, WebhookConfig

log = logging.getLogger(__name__)

MAX_ID = 200  # characters of a delivery id or a thread value


def signed_content(body: bytes, stamp: str | None, delivery: str) -> bytes:
    """What is signed: the body, or with a timestamp header `<timestamp>.<id>.<body>`."""
    return body if stamp is None else f"{stamp}.{delivery}.".encode() + body


def hub_signature(secret: str, body: bytes) -> str:
    """`sha256=` and the hex HMAC-SHA256 of `body` keyed with `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def pick(body: Any, path: str) -> Any:
    """The value at dotted `path` in `body` (a number steps into a list), or None."""
    value = body
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _plain(value: Any) -> str | None:
    """A string or integer value as text, or None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) else None


class WebhookChannel(HttpChannel):
    """A signed webhook: its deliveries become messages, its answers are POSTed back."""

    kind: Literal["webhook"] = "webhook"

    def __init__(
        self, config: WebhookConfig, secret: Secret, client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(config, client)
        self.config: WebhookConfig = config
        self._secret = secret

    def accept(
        self, headers: Mapping[str, str], body: bytes, now: float
    ) -> tuple[HookReply, list[Inbound]]:
        """Verify one delivery and read its message; HookRejected when it is unsigned,
        wrongly signed, too big, has no delivery id, or has no text or thread."""
        config = self.config
        if len(body) > config.max_body:
            raise HookRejected(413, f"body over {config.max_body} bytes")
        headers = lower_headers(headers)
        given = headers.get(config.signature_header.lower())
        if not given:
            raise HookRejected(401, f"{config.signature_header} missing")
        delivery = headers.get(config.delivery_header.lower(), "").strip()
        stamp = self._timestamp(headers, now)
        content = signed_content(body, stamp, delivery)
        expected = hub_signature(self._secret.reveal(), content)
        if not hmac.compare_digest(expected.encode(), given.strip().encode("utf-8", "replace")):
            raise HookRejected(401, f"{config.signature_header} does not match")
        if not delivery:
            raise HookRejected(400, f"{config.delivery_header} missing")
        if len(delivery) > MAX_ID or not delivery.isprintable():
            raise HookRejected(400, f"{config.delivery_header} is not a short printable id")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            raise HookRejected(400, "body is not JSON") from None
        if headers.get("x-github-event") == "ping":  # GitHub's check of a new hook
            return HookReply(200, {"ok": True}), []
        text = pick(payload, config.text)
        if not isinstance(text, str) or not text.strip():
            raise HookRejected(422, f"body has no text at {config.text}")
        thread = _plain(pick(payload, config.thread))
        if not thread or len(thread) > MAX_ID or not thread.isprintable():
            raise HookRejected(422, f"body has no thread (a short string or number) at "
                                    f"{config.thread}")  # fmt: skip
        sender = _plain(pick(payload, config.sender)) if config.sender else None
        inbound = Inbound(
            channel=self.name,
            thread_id=f"webhook:{self.name}:{thread}",
            sender=sender or self.name,
            text=text,
            dedup_key=f"webhook:{self.name}:{delivery}",
            reply={"thread": thread},
        )
        return HookReply(202, {"ok": True, "delivery": delivery}), [inbound]

    def _timestamp(self, headers: Mapping[str, str], now: float) -> str | None:
        """The delivery's signed timestamp (None when the config names no header);
        HookRejected when it is missing, not Unix seconds, or older than `max_age`."""
        name = self.config.timestamp_header
        if name is None:
            return None
        stamp = headers.get(name.lower(), "").strip()
        if not stamp:
            raise HookRejected(401, f"{name} missing")
        if not stamp.isdigit() or len(stamp) > 12:
            raise HookRejected(401, f"{name} is not Unix seconds")
        if abs(now - int(stamp)) > self.config.max_age:
            raise HookRejected(401, f"{name} too far from now (a replay?)")
        return stamp

    async def deliver(self, reply: Mapping[str, str | int], text: str, key: str) -> None:
        """POST the answer to `deliver_url`, signed, with `key` as its Idempotency-Key."""
        what = f"{self.name}: POST"
        url = self.config.deliver_url
        if url is None:
            raise DeliveryError(f"{self.name}: no deliver_url configured", permanent=True)
        if not key or not key.isascii() or not key.isprintable():
            raise DeliveryError(f"{self.name}: key is not printable ASCII", permanent=True)
        body = json.dumps(
            {"thread": reply.get("thread"), "text": text, "channel": self.name, "key": key},
            ensure_ascii=False,
            separators=(",", ":"),
        ).encode()
        secret = self._secret.reveal()
        stamp = None if self.config.timestamp_header is None else str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            self.config.signature_header: hub_signature(secret, signed_content(body, stamp, key)),
            "Idempotency-Key": key,
            "User-Agent": "agentdeck",
        }
        if self.config.timestamp_header is not None and stamp:
            headers[self.config.timestamp_header] = stamp
        try:
            response = await self._client.post(
                url, content=body, headers=headers, timeout=self.config.timeout
            )
        except httpx.HTTPError as exc:
            raise transport_error(what, exc, [secret]) from None
        if not 200 <= response.status_code < 300:
            raise status_error(what, response)
