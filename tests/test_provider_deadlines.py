"""Deadlines of a model request and of a turn: nothing a model server does holds a turn.

The servers here are real loopback sockets written from the wire format (HTTP/1.1 and
server-sent events), so httpx's own timeouts take part as they would in production. Every
test runs under `anyio.fail_after` as a guard: a deadline that does not fire fails the
test instead of hanging it; no test asserts on how long anything took.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest
from anyio.abc import SocketAttribute, SocketStream

from engine.config import Config, ModelConfig
from engine.domain.messages import ConvMessage
from engine.providers.base import ModelEvent, ModelRequest, ProviderError, TextDelta
from engine.providers.http import RequestLimits
from engine.providers.openai import OpenAIProvider
from engine.providers.select import make_provider
from tests.helpers import msg, on, runtime
from tests.wait import PATIENCE

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

REQUEST = ModelRequest(messages=[ConvMessage(role="user", text="hi")])
GUARD = PATIENCE  # seconds before a test that did not end is failed
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"connection: close\r\n\r\n"
)
CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n'

Respond = Callable[[SocketStream], Awaitable[None]]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@asynccontextmanager
async def loopback(respond: Respond) -> AsyncIterator[str]:
    """A server on 127.0.0.1 that reads a request's first bytes, then runs `respond`."""

    async def handle(stream: SocketStream) -> None:
        async with stream:
            try:
                await stream.receive()
                await respond(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass  # the client gave up, as it should

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        yield f"http://127.0.0.1:{port}/v1"
        tg.cancel_scope.cancel()


async def never_answers(stream: SocketStream) -> None:
    await anyio.sleep_forever()


async def keepalives_forever(stream: SocketStream) -> None:
    await stream.send(SSE_HEAD)
    while True:
        await stream.send(b": keepalive\n\n")
        await anyio.sleep(0.02)  # the stream's pace: a byte well within every read gap


async def data_forever(stream: SocketStream) -> None:
    await stream.send(SSE_HEAD)
    while True:
        await stream.send(CHUNK)
        await anyio.sleep(0.02)  # the stream's pace: a byte well within every read gap


def openai(base_url: str, **settings: float) -> OpenAIProvider:
    """The provider the room would build from `[model]` with these settings."""
    model = ModelConfig(provider="openai", base_url=base_url, **settings)
    provider = make_provider(Config(model=model), {}).provider
    assert isinstance(provider, OpenAIProvider)
    return provider


async def drain(provider: OpenAIProvider) -> list[ModelEvent]:
    try:
        return [event async for event in provider.stream(REQUEST)]
    finally:
        await provider.aclose()


async def test_a_server_that_never_answers_fails_at_the_read_deadline() -> None:
    async with loopback(never_answers) as url:
        with anyio.fail_after(GUARD):
            with pytest.raises(ProviderError, match=r"no data from .* for 0.2s \(read_timeout\)"):
                await drain(openai(url, read_timeout=0.2, request_timeout=600))


@pytest.mark.parametrize("respond", [keepalives_forever, data_forever],
                         ids=["keepalive-comments", "data"])  # fmt: skip
async def test_an_endless_stream_fails_at_the_request_deadline(respond: Respond) -> None:
    # Bytes keep coming, so the read gap never passes: the total deadline ends it. (The read
    # gap is a second, not less: a loaded machine may not run the loop for a few tenths.)
    async with loopback(respond) as url:
        with anyio.fail_after(GUARD):
            with pytest.raises(ProviderError, match=r"longer than request_timeout \(1.5s\)"):
                await drain(openai(url, read_timeout=1.0, request_timeout=1.5))


class Sleeps:
    """An injected sleep that records and returns at once."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.mark.parametrize("value", ["86400", "1e400", "Sun, 06 Nov 2044 08:49:37 GMT"])
async def test_a_retry_after_beyond_the_cap_fails_instead_of_sleeping(value: str) -> None:
    limited = httpx.Response(
        429, headers={"retry-after": value}, json={"error": {"message": "slow"}}
    )
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return limited

    sleeps = Sleeps()
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        limits = RequestLimits(retry_after_max=60)
        p = OpenAIProvider("m", "sk-test", client=client, sleep=sleeps, limits=limits)
        with anyio.fail_after(GUARD), pytest.raises(ProviderError) as info:
            await drain(p)
    text = str(info.value)
    assert "HTTP 429" in text and "Retry-After" in text and "retry_after_max (60s)" in text
    assert sleeps.calls == [] and len(seen) == 1


async def test_a_retry_after_within_the_cap_is_still_honoured() -> None:
    answers = iter([httpx.Response(503, headers={"retry-after": "3"}),
                    httpx.Response(200, headers={"content-type": "text/event-stream"},
                                   content=CHUNK + b"data: [DONE]\n\n")])  # fmt: skip
    sleeps = Sleeps()
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: next(answers))) as c:
        limits = RequestLimits(retry_after_max=3)
        p = OpenAIProvider("m", "sk-test", client=c, sleep=sleeps, limits=limits)
        events = await drain(p)
    assert sleeps.calls == [3.0] and TextDelta(text="a") in events


def test_deadline_settings_reach_the_provider() -> None:
    p = openai("http://127.0.0.1:9/v1", connect_timeout=2, read_timeout=7, request_timeout=90,
               retry_after_max=5)  # fmt: skip
    assert (p.timeout.connect, p.timeout.read, p.timeout.pool) == (2, 7, 2)
    assert (p.limits.request_timeout, p.limits.retry_after_max) == (90, 5)
    defaults = ModelConfig()
    assert 0 < defaults.connect_timeout <= defaults.read_timeout <= defaults.request_timeout
    assert 0 < defaults.retry_after_max <= 600


@pytest.mark.parametrize("bad", [
    {"connect_timeout": 0}, {"read_timeout": -1}, {"request_timeout": float("inf")},
    {"read_timeout": float("nan")}, {"retry_after_max": -5}, {"request_timeout": 1e400},
])  # fmt: skip
def test_deadline_settings_are_validated(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        ModelConfig(**bad)


class StallsMidStream:
    """A model that starts answering and then goes quiet for ever."""

    name, model = "stalls", "stalls-1"

    def __init__(self) -> None:
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        try:
            yield TextDelta(text="thinking")
            await anyio.sleep_forever()
        finally:
            self.closed = True


async def test_turn_timeout_cuts_a_stream_in_flight(tmp_path) -> None:
    model = StallsMidStream()
    config = Config.model_validate({"runtime": {"turn_timeout": 0.3}})
    async with runtime(tmp_path, model, [], config=config) as rt:
        with anyio.fail_after(GUARD):
            out = await rt.run_turn(msg("go", thread="t"))
        assert (out.status, out.reason) == ("done", "stopped:timeout")
        assert "0.3s" in out.detail and model.closed
        steps = await on(rt.store).fetchall("SELECT kind, status FROM steps", ())
        assert [tuple(s) for s in steps] == [("inference", "failed")]


async def test_turn_timeout_bounds_a_provider_on_an_endless_stream(tmp_path) -> None:
    # The provider's own deadlines are generous; the turn's is what ends it.
    config = Config.model_validate({"runtime": {"turn_timeout": 0.5}})
    async with loopback(data_forever) as url:
        p = openai(url, read_timeout=60, request_timeout=600)
        async with runtime(tmp_path, p, [], config=config) as rt:
            with anyio.fail_after(GUARD):
                out = await rt.run_turn(msg("go", thread="t"))
    assert (out.status, out.reason) == ("done", "stopped:timeout")
