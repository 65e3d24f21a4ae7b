"""Server-sent events have a size limit: a line or an event past it is a clear error, and
nothing past it is held in memory on the way there."""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from engine.config import Config, ModelConfig
from engine.domain.messages import ConvMessage
from engine.io.sse import SSEError, SSEEvent, parse_sse, sse_lines
from engine.providers.base import ModelRequest, ProviderError
from engine.providers.http import RequestLimits
from engine.providers.openai import OpenAIProvider
from engine.providers.select import make_provider

pytestmark = pytest.mark.anyio

MiB = 1024 * 1024
PIECE = b"a" * 65536  # one network read's worth, sent again and again


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def long_line(total: int, head: bytes = b"data: ", tail: bytes = b"") -> AsyncIterator[bytes]:
    """A line of `total` bytes after `head`, made of one repeated piece (costs no memory)."""
    yield head
    for _ in range(total // len(PIECE)):
        yield PIECE
    yield tail


async def events(source: AsyncIterator[bytes], limit: int) -> list[SSEEvent]:
    return [e async for e in parse_sse(sse_lines(source, limit), limit)]


async def test_lines_end_with_crlf_lf_or_cr_even_across_reads() -> None:
    got = await events(chunks(b"data: a\r", b"\ndata: b\rdata: c\n", b"\nevent: x\r\nda",
                              b"ta: y\r", b"\r", b": comment\n\nid: 7\ndata: z"), 1024)  # fmt: skip
    assert got == [
        SSEEvent("message", "a\nb\nc"),
        SSEEvent("x", "y"),
        SSEEvent("message", "z", "7"),
    ]


async def test_a_huge_line_fails_without_being_held() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(SSEError, match=r"a line longer than 1048576 bytes"):
            await events(long_line(64 * MiB, tail=b"\n\n"), 1 * MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MiB  # the limit and a read or two, not the 64 MiB line


async def test_an_event_of_many_lines_past_the_limit_fails() -> None:
    line = b"data: " + b"x" * 1000 + b"\n"
    with pytest.raises(SSEError, match=r"an event longer than 65536 bytes"):
        await events(chunks(line * 100, b"\n"), 65536)
    # Comments and separate events add up to nothing: each event is measured alone.
    stream = (b": " + b"k" * 1000 + b"\n" + line + b"\n") * 100
    assert len(await events(chunks(stream), 65536)) == 100


async def test_parse_sse_keeps_taking_lines_and_limits_them() -> None:
    async def lines(*items: str) -> AsyncIterator[str]:
        for item in items:
            yield item

    assert [e async for e in parse_sse(lines("data: a", "", "data: b"))] == [
        SSEEvent("message", "a"), SSEEvent("message", "b")]  # fmt: skip
    with pytest.raises(SSEError, match="line longer than 10"):
        [e async for e in parse_sse(lines("data: " + "b" * 20), limit=10)]


class Endless(httpx.AsyncByteStream):
    """A response body: one `data:` line of `total` bytes, then the end of the stream."""

    def __init__(self, total: int) -> None:
        self.total = total

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in long_line(self.total, tail=b"\n\ndata: [DONE]\n\n"):
            yield piece


async def test_a_provider_stream_past_the_limit_is_a_clear_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              stream=Endless(64 * MiB))  # fmt: skip

    limits = RequestLimits(max_event_bytes=1 * MiB)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        p = OpenAIProvider("m", "sk-test", client=client, limits=limits)
        with anyio.fail_after(30), pytest.raises(ProviderError) as info:
            async for _ in p.stream(ModelRequest(messages=[ConvMessage(role="user", text="hi")])):
                pass
    text = str(info.value)
    assert "longer than 1048576 bytes" in text and "max_event_bytes" in text


def test_the_limit_is_a_model_setting() -> None:
    model = ModelConfig(provider="openai", base_url="http://127.0.0.1:9/v1", max_event_bytes=4096)
    provider = make_provider(Config(model=model), {}).provider
    assert isinstance(provider, OpenAIProvider) and provider.limits.max_event_bytes == 4096
    assert ModelConfig().max_event_bytes >= MiB
    for bad in (0, 10, 2**40):
        with pytest.raises(ValueError, match="max_event_bytes"):
            ModelConfig(max_event_bytes=bad)
