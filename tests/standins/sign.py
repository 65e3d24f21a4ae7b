"""Signing deliveries the way Slack and a webhook sender do, for tests."""

from __future__ import annotations

import hashlib
import hmac


def slack_headers(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The headers Slack sends with `body` at `timestamp` (seconds since the epoch)."""
    base = f"v0:{timestamp}:".encode() + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }


def hub_signature(secret: str, body: bytes) -> str:
    """GitHub's `X-Hub-Signature-256` value for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_headers(secret: str, body: bytes, delivery: str) -> dict[str, str]:
    """The headers a GitHub-style sender sends with `body`."""
    return {
        "X-Hub-Signature-256": hub_signature(secret, body),
        "X-GitHub-Delivery": delivery,
        "Content-Type": "application/json",
    }
