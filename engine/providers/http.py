"""What every real provider needs from HTTP, written once: client, retries, errors, secrecy.

`HTTPProvider` owns one `httpx.AsyncClient` (created lazily, so a provider that is built
but never used, as by `agentdeck info`, opens nothing), posts a streaming request and
yields its server-sent events. It retries what is worth retrying (a connection that failed
before any of the body arrived, 429, 5xx) with exponential backoff and full jitter, honours
Retry-After up to a cap, and turns everything else into a `ProviderError` an operator can
act on. Every request has deadlines (`RequestLimits`): to connect, between two reads, and
for the whole response, so no server, silent or endlessly talking, holds a turn.
The API key lives only in the request headers: never in messages, logs or reprs.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    Awaitable,
    Callable,
    Iterable,
)
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import anyio
import httpx
from pydantic import ValidationError

from engine.io.sse import DEFAULT_LIMIT, SSEError, SSEEvent, parse_sse, sse_lines
from engine.providers.base import ContextTooLong, ModelEvent, ProviderError

T = TypeVar("T")
ERROR_BODY = 65_536  # bytes of an error response read for its message
_REASONS = {
    400: "bad request",
    401: "authentication failed (check the API key)",
    403: "permission denied (check the API key's access to this model)",
    404: "not found (check the model name and base_url)",
    429: "rate limited",
}
_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_*-]{3})[A-Za-z0-9_*-]{6,}")


@dataclass(frozen=True)
class RequestLimits:
    """How long one request may take, and the longest Retry-After worth waiting for.

    A read timeout alone never ends a stream of keep-alive comments, so the whole
    response has a deadline of its own.
    """

    connect_timeout: float = 10.0
    read_timeout: float = 60.0  # the longest gap between bytes (or before the first)
    request_timeout: float = 600.0  # from sending the request to the response's last byte
    retry_after_max: float = 60.0  # a server asking to wait longer fails the attempt
    max_event_bytes: int = DEFAULT_LIMIT  # one server-sent event, and any line of the stream

    @property
    def timeout(self) -> httpx.Timeout:
        """httpx's share: connecting, and each read and write of the socket."""
        gap = self.read_timeout
        return httpx.Timeout(connect=self.connect_timeout, read=gap, write=gap,
                             pool=self.connect_timeout)  # fmt: skip


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
        limits: RequestLimits = RequestLimits(),  # noqa: B008 (frozen, so safe to share)
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
        self.limits = limits

    @property
    def timeout(self) -> httpx.Timeout:
        return self.limits.timeout

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

    def error(self, text: str, kind: type[ProviderError] = ProviderError) -> ProviderError:
        return kind(self.redact(f"{self.name} ({self.model}): {text}"))

    def shaped(
        self, read: Callable[..., Iterable[ModelEvent]], *args: Any, data: str
    ) -> list[ModelEvent]:
        """`read(*args)`: the model events of one stream chunk (`data`, decoded in `args`).

        A chunk is JSON from another process: valid JSON with a string where an object
        belongs, or a number where text does, fails inside `read` as AttributeError,
        TypeError or a model's ValidationError. It is a malformed chunk, as bad JSON is.
        """
        try:
            return list(read(*args))
        except ValidationError as exc:  # first: it is a ValueError too
            first = exc.errors()[0]
            why = f"{exc.title} {'.'.join(map(str, first['loc']))}: {first['msg']}"
            raise self.error(f"malformed stream chunk ({why}): {data[:200]!r}") from None
        except (AttributeError, TypeError, ValueError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise self.error(f"malformed stream chunk ({why}): {data[:200]!r}") from None

    def backoff_delay(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(max_backoff, backoff * 2**attempt)]."""
        return random.uniform(0.0, min(self.max_backoff, self.backoff * 2**attempt))

    async def events(self, url: str, body: dict[str, Any]) -> AsyncGenerator[SSEEvent, None]:
        """POST `body` to `url` and yield the response's events, retrying what may be.

        Leaving the iteration (cancellation, an error, `aclose()`) closes the response.
        """
        if self._api_key is None and self.base_url == self.hosted_url:
            raise self.error(f"no API key is set ({self.key_hint()}); {self.base_url} needs one")
        attempt = 0
        while True:
            started = False
            deadline = anyio.current_time() + self.limits.request_timeout
            try:
                response = await self._send(url, body, deadline)
                try:
                    if response.status_code < 400:
                        limit = self.limits.max_event_bytes
                        chunks = self._within(response.aiter_bytes(), url, deadline)
                        async for event in parse_sse(sse_lines(chunks, limit), limit):
                            started = True
                            yield event
                        return
                    text = await self._error_body(response, url, deadline)
                    retryable = response.status_code == 429 or response.status_code >= 500
                    if not retryable or attempt >= self.max_retries:
                        raise self.status_error(response, attempt + 1, text)
                    delay = self.retry_after(response)
                    if delay is not None and delay > self.limits.retry_after_max:
                        note = self.wait_refused(response, delay)
                        raise self.status_error(response, attempt + 1, text, note)
                    if delay is None:
                        delay = self.backoff_delay(attempt)
                finally:
                    await response.aclose()
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise self.error(f"bad base_url {_safe_url(self.base_url)!r}: {exc}") from None
            except SSEError as exc:
                raise self.error(f"the stream sent {exc} ([model] max_event_bytes)") from None
            except (httpx.ReadTimeout, httpx.WriteTimeout):  # the server took the request:
                raise self.silent(url) from None  # asking again would only wait again
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

    async def _send(self, url: str, body: dict[str, Any], deadline: float) -> httpx.Response:
        """Send the request and wait for the response's head, by the request's deadline."""
        request = self.client.build_request(
            "POST", url, json=body, headers=self.headers(), timeout=self.timeout
        )
        with anyio.CancelScope(deadline=deadline):
            return await self.client.send(request, stream=True)
        raise self.overdue()

    async def _within(
        self, items: AsyncIterable[T], url: str, deadline: float
    ) -> AsyncGenerator[T, None]:
        """`items`, each awaited at most the read gap, and none after the request's deadline.

        httpx times each socket read too; this holds with any transport, and its deadline
        ends a server that keeps sending (comments, data) for ever.
        """
        iterator = aiter(items)
        while True:
            gap = anyio.current_time() + self.limits.read_timeout
            with anyio.CancelScope(deadline=min(gap, deadline)) as scope:
                try:
                    item = await anext(iterator)
                except StopAsyncIteration:
                    return
            if scope.cancelled_caught:
                raise self.overdue() if deadline <= gap else self.silent(url)
            yield item

    async def _error_body(self, response: httpx.Response, url: str, deadline: float) -> bytes:
        """The start of an error response's body, read within the request's deadlines."""
        body = bytearray()
        async with aclosing(self._within(response.aiter_bytes(), url, deadline)) as chunks:
            async for chunk in chunks:
                body += chunk
                if len(body) >= ERROR_BODY:
                    break
        return bytes(body[:ERROR_BODY])

    def wait_refused(self, response: httpx.Response, delay: float) -> str:
        """Why a Retry-After is not waited for: it asks for longer than the cap."""
        asked = response.headers["retry-after"].strip()[:40]
        cap = self.limits.retry_after_max
        return (
            f"the server asks to wait {delay:g}s (Retry-After: {asked}),"
            f" longer than retry_after_max ({cap:g}s)"
        )

    def silent(self, url: str) -> ProviderError:
        gap = self.limits.read_timeout
        return self.error(f"no data from {_safe_url(url)} for {gap:g}s (read_timeout)")

    def overdue(self) -> ProviderError:
        total = self.limits.request_timeout
        return self.error(f"the response took longer than request_timeout ({total:g}s)")

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

    def status_error(
        self, response: httpx.Response, attempts: int, body: bytes, note: str = ""
    ) -> ProviderError:
        """A ProviderError naming the status, its meaning and the API's own message."""
        status = response.status_code
        too_long = status == 400 and self.over_window(api_error(body))
        reason = _REASONS.get(status) or ("server error" if status >= 500 else "request failed")
        if too_long:
            reason = "the prompt is over the model's context window"
        text = f"HTTP {status} {reason}"
        if status == 401 and not self._api_key:
            text += f" [no API key is set: {self.key_hint()}]"
        detail = api_message(body)
        if detail:
            text += f": {detail[:300] if too_long else detail}"
        if note:
            text += f"; {note}"
        if attempts > 1:
            text += f" (after {attempts} attempts)"
        return self.error(text, ContextTooLong if too_long else ProviderError)

    def over_window(self, error: dict[str, Any]) -> bool:
        """Whether a 400's error object says the prompt is over the model's context window.

        Each API says so in its own words, so each provider answers for its own; a 400 it
        does not recognise stays a plain ProviderError.
        """
        return False

    def key_hint(self) -> str:
        return "set the provider's API key"


def api_message(body: bytes) -> str:
    """The error message in a provider's JSON error body, else the start of the body."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (nor UTF-8), huge numbers, deep nesting
        return " ".join(body[:4096].decode("utf-8", "replace").split())[:300]
    return error_detail(payload)[:500]


def api_error(body: bytes) -> dict[str, Any]:
    """The error object of an error body: `error` of a JSON body, the body itself where
    a server (vLLM) sends it bare, or `{"message": text}` for a body that is not JSON."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return {"message": body[:4096].decode("utf-8", "replace")}
    err = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(err, dict):
        return err
    return {"message": err} if isinstance(err, str) else {}


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
