"""What every channel shares: the inbound message, the hook's answer, the errors, the protocol.

A channel is the edge between the room and one outside service. Inbound, a hook channel
checks one HTTP delivery (`accept`) and a poll channel fetches a batch (`poll`); both only
turn what they got into `Inbound` records, which the runtime makes durable as turn
requests. Outbound, `deliver` sends one answer and raises `DeliveryError` saying whether a
retry can help. No text any of them raises or logs holds a secret.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import httpx

if TYPE_CHECKING:
    from engine.channels.config import HookSettings

Kind = Literal["telegram", "slack", "webhook"]
REDACTED = "[redacted]"


@dataclass(frozen=True)
class Inbound:
    """One message from outside, ready to become a turn request."""

    channel: str  # the channel's name
    thread_id: str  # stable per conversation: telegram:<chat>, slack:<channel>:<ts>, ...
    sender: str
    text: str
    dedup_key: str  # unique per message across channels: a retry of it has the same key
    reply: Mapping[str, str | int] = field(default_factory=dict)  # where the answer goes
    sent_at: float | None = None  # when the sender sent it (unix seconds), if the service says


@dataclass(frozen=True)
class HookReply:
    """What a hook answers the sender of an accepted delivery."""

    status: int = 200
    body: bytes | dict[str, Any] = b""
    content_type: str = "application/json"


class HookRejected(Exception):
    """A delivery the hook refuses; `reason` is safe to show the sender and to log."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status, self.reason = status, reason


class ChannelError(Exception):
    """A call to the service failed; the text is safe to log (it holds no secret)."""

    def __init__(self, message: str, *, permanent: bool, retry_after: float | None = None):
        super().__init__(message)
        self.permanent, self.retry_after = permanent, retry_after


class DeliveryError(ChannelError):
    """An answer was not delivered: `permanent` when retrying cannot help; `retry_after`
    is the wait in seconds the service asked for, if it asked."""


class PollError(ChannelError):
    """A poll for updates failed (the offset does not move)."""


@runtime_checkable
class Channel(Protocol):
    """A named channel in a thread group that can deliver an answer."""

    name: str
    group: str
    max_tries: int

    @property
    def kind(self) -> Kind:
        """telegram, slack or webhook (read-only: each class has its own)."""
        ...

    async def deliver(self, reply: Mapping[str, str | int], text: str, key: str) -> None:
        """Send `text` to where `reply` (an `Inbound.reply`) points; `key` is unique per
        answer. Raises DeliveryError."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP client the channel opened (an injected one stays open)."""
        ...


@runtime_checkable
class HookChannel(Channel, Protocol):
    """A channel whose messages arrive as signed HTTP deliveries."""

    @property
    def config(self) -> HookSettings:
        """Its settings (`max_body`: the bytes of one delivery it takes at most)."""
        ...

    def accept(
        self, headers: Mapping[str, str], body: bytes, now: float
    ) -> tuple[HookReply, list[Inbound]]:
        """Check one delivery and read its messages; raises HookRejected."""
        ...


@runtime_checkable
class PollChannel(Channel, Protocol):
    """A channel whose messages are fetched by polling."""

    @property
    def poll_wait(self) -> float:
        """Seconds the service is asked to hold a poll open when it has nothing."""
        ...

    async def poll(
        self, offset: int | None, wait: float
    ) -> tuple[list[tuple[int, Inbound | None]], int | None]:
        """Updates from `offset` on, the service waiting up to `wait` seconds for the first: each
        update's id with its message (None for one that is ignored or malformed), and the
        offset of the next poll. Raises PollError."""
        ...


class HttpChannel:
    """What every channel class shares: its settings, and the HTTP client it talks to its
    service with (its own, closed by `aclose`, or one injected and left open)."""

    def __init__(self, config: Any, client: httpx.AsyncClient | None) -> None:
        self.config, self.name, self.group = config, config.name, config.group
        self.max_tries: int = config.max_tries
        self._own = client is None
        self._client = client or httpx.AsyncClient()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    async def aclose(self) -> None:
        """Close the HTTP client the channel opened (an injected one stays open)."""
        if self._own:
            await self._client.aclose()


def lower_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with lower-case names (a plain dict is not case-insensitive)."""
    return {k.lower(): v for k, v in headers.items()}


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with each (non-empty) secret replaced by a mark."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def transport_error(what: str, exc: Exception, secrets: Iterable[str]) -> DeliveryError:
    """A transient DeliveryError for a request that got no answer (timeout, refused)."""
    detail = scrub(str(exc), secrets).splitlines()[0:1]
    name = type(exc).__name__
    return DeliveryError(f"{what}: {name}{': ' + detail[0] if detail else ''}", permanent=False)


def retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """The seconds a `Retry-After` header asks for (a number or an HTTP date), or None."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - now()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


def status_error(what: str, response: httpx.Response, detail: str = "") -> DeliveryError:
    """The DeliveryError for a non-2xx answer: 429 and 5xx transient (with the
    Retry-After it sent), any other status permanent."""
    status = response.status_code
    transient = status == 429 or status >= 500 or status == 408
    wait = retry_after(response.headers.get("retry-after")) if transient else None
    text = f"{what}: HTTP {status}{' ' + detail if detail else ''}"
    return DeliveryError(text, permanent=not transient, retry_after=wait)


def utf16_len(text: str) -> int:
    """`text`'s length in UTF-16 code units (how Telegram counts characters)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def split_text(text: str, limit: int, length: Callable[[str], int] = len) -> list[str]:
    """`text` cut into parts of at most `limit` (as `length` measures), joined back
    exactly by `"".join`; a cut falls after a newline in the part's second half, else
    after a space, else anywhere between two code points (never inside a surrogate
    pair)."""
    if limit < 2:
        raise ValueError("limit must be at least 2")
    parts: list[str] = []
    rest = text
    while rest:
        if length(rest) <= limit:
            parts.append(rest)
            break
        end = _fit(rest, limit, length)
        window = rest[:end]
        newline = window.rfind("\n") + 1
        cut = newline if newline > end // 2 else (_last_space(window) or newline or end)
        parts.append(rest[:cut])
        rest = rest[cut:]
    return parts


def _fit(text: str, limit: int, length: Callable[[str], int]) -> int:
    """The most leading code points of `text` whose length is at most `limit`."""
    lo, hi = 1, min(len(text), limit)  # every code point measures at least 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if length(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _last_space(window: str) -> int:
    """The index just after the last whitespace in `window`, or 0."""
    for i in range(len(window) - 1, 0, -1):
        if window[i].isspace():
            return i + 1
    return 0
