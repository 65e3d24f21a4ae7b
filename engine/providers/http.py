"""What every real provider needs from HTTP, written once: client, retries, errors, secrecy.

`HTTPProvider` owns one `httpx.AsyncClient` (created lazily, so a provider that is built
but never used, as by `agentdeck info`, opens nothing), posts a streaming request and
yields its server-sent events. It retries what is worth retrying (a connection that failed
before any of the body arrived, 429, 5xx) with exponential backoff and full jitter, honours
Retry-After, and turns everything else into a `ProviderError` an operator can act on.
The API key lives only in the request headers: never in messages, logs or reprs.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import anyio
import httpx

from engine.providers.base import ProviderError
from engine.sse import SSEEvent, parse_sse

DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
_REASONS = {
    400: "bad request",
    401: "authentication failed (check the API key)",
    403: "permission denied (check the API key's access to this model)",
    404: "not found (check the model name and base_url)",
    429: "rate limited",
}
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_*-]{3})[A-Za-z0-9_*-]{6,}")


def _safe_url(url: str) -> str:
    """`url` without user info, which could hold a credential."""
    try:
        return str(httpx.URL(url).copy_with(username=None, password=None))
    except (httpx.InvalidURL, TypeError):
        return "<invalid url>"


class HTTPProvider:
    """Base of the OpenAI-compatible and Anthropic providers (see the module docstring)."""

    name = "http"
    hosted_url = ""  # the vendor's own endpoint, which never answers without a key

    def __init__(
        self,
        model: str,
        api_key: str | None,
        base_url: str,
        client: httpx.AsyncClient | None = None,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        sleep: Callable[[float], Awaitable[Any]] = anyio.sleep,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        self.model = model
        self._api_key = api_key or None
        self.base_url = base_url.rstrip("/")
        self._client = client
        self._owns_client = client is None
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._sleep = sleep
        self.timeout = timeout

    def __repr__(self) -> str:
        key = "set" if self._api_key else "none"
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"base_url={_safe_url(self.base_url)!r}, api_key={key})"
        )

    @property
    def client(self) -> httpx.AsyncClient:
        """The provider's one client, created on first use unless one was injected."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout)
            self._owns_client = True
        return self._client

    async def aclose(self) -> None:
        """Close the client this provider created (an injected one belongs to its owner)."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()

    async def __aenter__(self) -> HTTPProvider:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def headers(self) -> dict[str, str]:
        """The request headers, credentials included; subclasses add theirs."""
        return {"accept": "text/event-stream"}

    def redact(self, text: str) -> str:
        """`text` with the key, and anything that looks like one, masked."""
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return _KEYLIKE.sub(r"\1***", text)

    def error(self, text: str) -> ProviderError:
        return ProviderError(self.redact(f"{self.name} ({self.model}): {text}"))

    def backoff_delay(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(max_backoff, backoff * 2**attempt)]."""
        return random.uniform(0.0, min(self.max_backoff, self.backoff * 2**attempt))

    async def events(self, url: str, body: dict[str, Any]) -> AsyncIterator[SSEEvent]:
        """POST `body` to `url` and yield the response's events, retrying what may be.

        Leaving the iteration (cancellation, an error, `aclose()`) closes the response.
        """
        if self._api_key is None and self.base_url == self.hosted_url:
            raise self.error(f"no API key is set ({self.key_hint()}); {self.base_url} needs one")
        attempt = 0
        while True:
            started = False
            delay = 0.0
            try:
                async with self.client.stream(
                    "POST", url, json=body, headers=self.headers(), timeout=self.timeout
                ) as response:
                    if response.status_code < 400:
                        async for event in parse_sse(response.aiter_lines()):
                            started = True
                            yield event
                        return
                    await response.aread()
                    retryable = response.status_code == 429 or response.status_code >= 500
                    if not retryable or attempt >= self.max_retries:
                        raise self.status_error(response, attempt + 1)
                    delay = self.retry_after(response)
                    if delay is None:
                        delay = self.backoff_delay(attempt)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise self.error(f"bad base_url {_safe_url(self.base_url)!r}: {exc}") from None
            except httpx.TransportError as exc:
                what = f"{type(exc).__name__}: {exc}".rstrip(": ")
                if started:
                    raise self.error(f"stream cut off mid-response ({what})") from None
                if attempt >= self.max_retries:
                    raise self.error(
                        f"cannot reach {_safe_url(url)} after {attempt + 1} attempts ({what})"
                    ) from None
                delay = self.backoff_delay(attempt)
            await self._sleep(delay)
            attempt += 1

    def retry_after(self, response: httpx.Response) -> float | None:
        """Seconds to wait from Retry-After (delta-seconds or an HTTP date), if given."""
        value = response.headers.get("retry-after", "").strip()
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())

    def status_error(self, response: httpx.Response, attempts: int) -> ProviderError:
        """A ProviderError naming the status, its meaning and the API's own message."""
        status = response.status_code
        reason = _REASONS.get(status) or ("server error" if status >= 500 else "request failed")
        text = f"HTTP {status} {reason}"
        if status == 401 and not self._api_key:
            text += f" [no API key is set: {self.key_hint()}]"
        detail = api_message(response)
        if detail:
            text += f": {detail}"
        if attempts > 1:
            text += f" (after {attempts} attempts)"
        return self.error(text)

    def key_hint(self) -> str:
        return "set the provider's API key"


def api_message(response: httpx.Response) -> str:
    """The error message in a provider's JSON error body, else the start of the body."""
    try:
        payload = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return " ".join(response.text.split())[:300]
    return error_detail(payload)[:500]


def error_detail(payload: Any) -> str:
    """`error.message` (with `error.type`) from OpenAI/Anthropic-shaped error objects."""
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict):
        message = str(err.get("message") or "")
        kind = err.get("type") or err.get("code")
        if kind and message:
            return f"{message} [{kind}]"
        return message or json.dumps(err)[:300]
    return str(err)
