"""Slack: Events API deliveries in (signed, https://api.slack.com/authentication/verifying-
requests-from-slack), chat.postMessage out (https://api.slack.com/methods/chat.postMessage).

A request is Slack's when `X-Slack-Signature` is `v0=` and the hex HMAC-SHA256, keyed with
the signing secret, of `v0:<X-Slack-Request-Timestamp>:<raw body>`, and its timestamp is
within `max_age` of now (an old one is a replay). The Web API answers HTTP 200 with
`{"ok": false, "error": "..."}` for most failures, so the error's name decides a retry.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
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
    retry_after,
    scrub,
    split_text,
    status_error,
    transport_error,
)
from engine.channels.config import Secret, SlackConfig

log = logging.getLogger(__name__)

LIMIT = 40_000  # characters of one message's text
EVENTS = ("message", "app_mention")
# Errors of chat.postMessage that a retry can fix; any other error is permanent
# (channel_not_found, not_in_channel, invalid_auth, msg_too_long, is_archived, ...).
TRANSIENT = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The `X-Slack-Signature` of `body` sent at `timestamp`."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class SlackChannel(HttpChannel):
    """A Slack app: messages and mentions in by the Events API, answers in their thread."""

    kind: Literal["slack"] = "slack"

    def __init__(
        self,
        config: SlackConfig,
        signing_secret: Secret,
        token: Secret,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(config, client)
        self.config: SlackConfig = config
        self._signing, self._token = signing_secret, token

    def accept(
        self, headers: Mapping[str, str], body: bytes, now: float
    ) -> tuple[HookReply, list[Inbound]]:
        """Verify one Events API request and read its message; HookRejected if it is not
        Slack's, too old, too big or not JSON."""
        if len(body) > self.config.max_body:
            raise HookRejected(413, f"body over {self.config.max_body} bytes")
        headers = lower_headers(headers)
        stamp = headers.get("x-slack-request-timestamp")
        given = headers.get("x-slack-signature")
        if not stamp or not given:
            raise HookRejected(401, "X-Slack-Signature or X-Slack-Request-Timestamp missing")
        try:
            sent = int(stamp)
        except ValueError:
            raise HookRejected(401, "X-Slack-Request-Timestamp is not a number") from None
        if abs(now - sent) > self.config.max_age:
            raise HookRejected(401, "X-Slack-Request-Timestamp too far from now (a replay?)")
        expected = signature(self._signing.reveal(), stamp, body)
        if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace")):
            raise HookRejected(401, "X-Slack-Signature does not match")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            raise HookRejected(400, "body is not JSON") from None
        if not isinstance(payload, dict):
            raise HookRejected(400, "body is not a JSON object")
        kind = payload.get("type")
        if kind == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str):
                raise HookRejected(400, "url_verification without a challenge")
            return HookReply(200, {"challenge": challenge}), []
        if kind != "event_callback":
            return HookReply(200, {"ok": True}), []  # app_rate_limited and the like
        event_id = payload.get("event_id")
        if not isinstance(event_id, str) or not event_id:
            raise HookRejected(400, "event_callback without an event_id")
        inbound = self._inbound(event_id, payload.get("event"))
        return HookReply(200, {"ok": True}), [inbound] if inbound else []

    def _inbound(self, event_id: str, event: Any) -> Inbound | None:
        if not isinstance(event, dict) or event.get("type") not in EVENTS:
            return None
        if "bot_id" in event or "subtype" in event:
            return None  # a bot's message (ours too), an edit, a join: no turn
        fields = {k: event.get(k) for k in ("channel", "ts", "text")}
        missing = [k for k, v in fields.items() if not isinstance(v, str) or not v]
        if missing:
            log.warning("%s: event %s skipped: no %s", self.name, event_id, ", ".join(missing))
            return None
        thread = event.get("thread_ts")
        thread = thread if isinstance(thread, str) and thread else fields["ts"]
        user = event.get("user")
        return Inbound(
            channel=self.name,
            thread_id=f"slack:{fields['channel']}:{thread}",
            sender=user if isinstance(user, str) and user else "unknown",
            text=str(fields["text"]),
            # one message, one key: a retry of the event (same event_id) and the
            # `app_mention` Slack sends beside the `message` (another event_id) share it
            dedup_key=f"slack:{self.name}:{fields['channel']}:{fields['ts']}",
            reply={"channel": str(fields["channel"]), "thread_ts": str(thread)},
            sent_at=_seconds(fields["ts"]),
        )

    async def deliver(self, reply: Mapping[str, str | int], text: str, key: str) -> None:
        """chat.postMessage `text` into `reply`'s channel and thread, in parts of at most
        40,000 characters."""
        channel = reply.get("channel")
        if not isinstance(channel, str) or not channel:
            raise DeliveryError(f"{self.name}: the reply has no channel", permanent=True)
        parts = [p for p in split_text(text, LIMIT) if p.strip()]
        if not parts:
            log.info("%s: answer %s is empty; nothing sent", self.name, key)
            return
        for part in parts:
            payload: dict[str, Any] = {"channel": channel, "text": part}
            if reply.get("thread_ts"):
                payload["thread_ts"] = str(reply["thread_ts"])
            await self._post("chat.postMessage", payload)

    async def _post(self, method: str, payload: dict[str, Any]) -> None:
        what = f"{self.name}: {method}"
        token = self._token.reveal()
        headers = {"Authorization": f"Bearer {token}"}
        try:
            response = await self._client.post(
                f"{self.config.api_url}/{method}",
                json=payload,
                headers=headers,
                timeout=self.config.timeout,
            )
        except httpx.HTTPError as exc:
            raise transport_error(what, exc, [token]) from None
        if not 200 <= response.status_code < 300:
            raise status_error(what, response)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
            raise DeliveryError(f"{what}: answer is not a Web API answer", permanent=False)
        if body["ok"]:
            return
        error = body.get("error")
        error = scrub(error, [token])[:100] if isinstance(error, str) else "unknown error"
        wait = retry_after(response.headers.get("retry-after"))
        if error == "ratelimited" and wait is None:
            wait = 1.0
        raise DeliveryError(f"{what}: {error}", permanent=error not in TRANSIENT, retry_after=wait)


def _seconds(ts: str | None) -> float | None:
    """A Slack `ts` ("1355517523.000005") as unix seconds."""
    try:
        return float(ts) if ts else None
    except ValueError:
        return None
