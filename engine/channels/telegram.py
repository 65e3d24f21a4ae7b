"""Telegram, by the Bot API (https://core.telegram.org/bots/api): getUpdates in, sendMessage out.

Every method is `<api_url>/bot<token>/<method>`, answered with `{"ok": bool, "result": ...}`
or `{"ok": false, "error_code": ..., "description": ..., "parameters": {"retry_after": ...}}`.
The token sits in the URL's path, so nothing here puts a URL in an error, and a filter on
httpx's logger masks it in the request lines httpx logs.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal

import httpx

from engine.channels.base import (
    REDACTED,
    ChannelError,
    DeliveryError,
    HttpChannel,
    Inbound,
    PollError,
    scrub,
    split_text,
    utf16_len,
)
from engine.channels.config import Secret, TelegramConfig

log = logging.getLogger(__name__)

LIMIT = 4096  # characters of one message, counted in UTF-16 code units
KEPT_KEYS = 1024  # answers whose sent parts are remembered, so a retry resumes
_TOKEN_IN_PATH = re.compile(r"/bot[^/\s'\"]+/")


class _MaskTokens(logging.Filter):
    """Masks `/bot<token>/` in the records of the loggers it sits on."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "/bot" in text:
            record.msg, record.args = _TOKEN_IN_PATH.sub(f"/bot{REDACTED}/", text), None
        return True


_MASK = _MaskTokens()


def _mask_http_logs() -> None:
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if _MASK not in logger.filters:
            logger.addFilter(_MASK)


class TelegramChannel(HttpChannel):
    """A Telegram bot: polled for text messages, answering in the chat they came from."""

    kind: Literal["telegram"] = "telegram"

    def __init__(
        self, config: TelegramConfig, token: Secret, client: httpx.AsyncClient | None = None
    ) -> None:
        super().__init__(config, client)
        self.config: TelegramConfig = config
        self._token = token
        self._sent: OrderedDict[str, int] = OrderedDict()
        _mask_http_logs()

    @property
    def poll_wait(self) -> float:
        """`poll_timeout` of channels.toml."""
        return float(self.config.poll_timeout)

    async def poll(
        self, offset: int | None, wait: float
    ) -> tuple[list[tuple[int, Inbound | None]], int | None]:
        """getUpdates from `offset`, Telegram holding the request up to `wait` seconds
        until there is one: each update's id with its text message (None for anything
        else), and the next offset."""
        seconds = max(0, round(wait))
        payload: dict[str, Any] = {"timeout": seconds, "allowed_updates": ["message"]}
        if offset is not None:
            payload["offset"] = offset
        limit = self.config.timeout
        deadline = httpx.Timeout(limit, read=seconds + limit)
        result = await self._call("getUpdates", payload, deadline, PollError)
        if not isinstance(result, list):
            raise PollError(f"{self.name}: getUpdates: result is not a list", permanent=False)
        updates: list[tuple[int, Inbound | None]] = []
        for index, item in enumerate(result):
            update_id = item.get("update_id") if isinstance(item, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool) or update_id < 0:
                log.warning("%s: getUpdates: item %d has no update_id; skipped", self.name, index)
                continue
            updates.append((update_id, self._inbound(update_id, item)))
        next_offset = offset
        if updates:
            top = max(u for u, _ in updates) + 1
            next_offset = top if offset is None else max(offset, top)
        return updates, next_offset

    def _inbound(self, update_id: int, item: dict[str, Any]) -> Inbound | None:
        message = item.get("message")
        if message is None:
            return None  # an update of another type
        why = _unreadable(message)
        if why:
            log.warning("%s: update %d skipped: %s", self.name, update_id, why)
            return None
        sender = message.get("from")
        if isinstance(sender, dict) and sender.get("is_bot") is True:
            return None
        if not isinstance(message.get("text"), str):
            return None  # a photo, a sticker, a join: not a text message
        chat_id = message["chat"]["id"]
        return Inbound(
            channel=self.name,
            thread_id=f"telegram:{chat_id}",
            sender=_sender(sender, message["chat"]),
            text=message["text"],
            dedup_key=f"telegram:{self.name}:{update_id}",
            reply={"chat_id": chat_id},
            sent_at=float(date) if isinstance(date := message.get("date"), int) else None,
        )

    async def deliver(self, reply: Mapping[str, str | int], text: str, key: str) -> None:
        """sendMessage `text` to `reply["chat_id"]`, in parts of at most 4096 characters;
        a retry with the same `key` resumes after the parts already sent."""
        chat_id = reply.get("chat_id")
        if isinstance(chat_id, bool) or not isinstance(chat_id, int | str) or chat_id == "":
            raise DeliveryError(f"{self.name}: the reply has no chat_id", permanent=True)
        parts = [p for p in split_text(text, LIMIT, utf16_len) if p.strip()]
        if not parts:
            log.info("%s: answer %s is empty; nothing sent", self.name, key)
            return
        done = self._sent.get(key, 0)
        for index in range(done, len(parts)):
            payload = {"chat_id": chat_id, "text": parts[index]}
            await self._call("sendMessage", payload, httpx.Timeout(self.config.timeout))
            self._sent[key] = index + 1
            self._sent.move_to_end(key)
            while len(self._sent) > KEPT_KEYS:
                self._sent.popitem(last=False)
        self._sent.pop(key, None)

    async def _call(
        self,
        method: str,
        payload: dict[str, Any],
        deadline: httpx.Timeout,
        error: type[ChannelError] = DeliveryError,
    ) -> Any:
        """The `result` of one Bot API call, or `error` saying whether a retry can help."""
        what = f"{self.name}: {method}"
        url = f"{self.config.api_url}/bot{self._token.reveal()}/{method}"
        try:
            response = await self._client.post(url, json=payload, timeout=deadline)
        except httpx.HTTPError as exc:
            lines = self._scrub(str(exc)).splitlines()[:1]
            failed = f"{what}: {type(exc).__name__}{': ' + lines[0] if lines else ''}"
            raise error(failed, permanent=False) from None
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("ok"), bool):
            transient = status >= 500 or status == 429 or 200 <= status < 300
            raise error(f"{what}: HTTP {status}, not a Bot API answer", permanent=not transient)
        if body["ok"] and 200 <= status < 300:
            return body.get("result")
        code = body.get("error_code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else status
        description = body.get("description")
        detail = self._scrub(description)[:200] if isinstance(description, str) else ""
        text = f"{what}: {code}{' ' + detail if detail else ''}"
        if code == 429:
            parameters = body.get("parameters")
            wait = parameters.get("retry_after") if isinstance(parameters, dict) else None
            seconds = float(wait) if isinstance(wait, int | float) and wait >= 0 else None
            raise error(text, permanent=False, retry_after=seconds)
        raise error(text, permanent=not (code >= 500 or status >= 500))

    def _scrub(self, text: str) -> str:
        return _TOKEN_IN_PATH.sub(f"/bot{REDACTED}/", scrub(text, [self._token.reveal()]))


def _unreadable(message: Any) -> str:
    """Why a `message` object is malformed, or ""."""
    if not isinstance(message, dict):
        return "message is not an object"
    chat = message.get("chat")
    if not isinstance(chat, dict):
        return "message has no chat"
    chat_id = chat.get("id")
    if not isinstance(chat_id, int) or isinstance(chat_id, bool):
        return "message's chat has no id"
    return ""


def _sender(user: Any, chat: dict[str, Any]) -> str:
    """Who wrote: the user's @name, else their name, else their id, else the chat's title."""
    if isinstance(user, dict):
        if isinstance(user.get("username"), str) and user["username"]:
            return "@" + user["username"]
        names = [user.get(k) for k in ("first_name", "last_name")]
        name = " ".join(n for n in names if isinstance(n, str) and n)
        if name:
            return name
        if isinstance(user.get("id"), int):
            return str(user["id"])
    title = chat.get("title")
    return title if isinstance(title, str) and title else str(chat["id"])
