"""Server-sent events: any bytes are events or an SSEError, and a provider's stream of any
events is model events or a ProviderError, never another exception."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from hypothesis import given
from hypothesis import strategies as st

from engine.domain.messages import ConvMessage
from engine.io.sse import SSEError, parse_sse, sse_lines
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import AssistantAccumulator, ModelRequest, ProviderError, StopEvent
from engine.providers.http import RequestLimits
from engine.providers.openai import OpenAIProvider
from tests.fuzz.values import dumps, json_texts, json_values, texts

# -- engine/io/sse.py --------------------------------------------------------------------------

ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])
FIELDS = st.sampled_from([b"data", b"data:", b"data: ", b"event: ", b"id: ", b"retry: ", b":",
                          b"", b"dat", b"id: \x00", b"\xff\xfe"])  # fmt: skip
sse_line = st.tuples(FIELDS, st.binary(max_size=40), ENDS).map(b"".join)
sse_bodies = st.lists(sse_line | st.binary(max_size=30), max_size=12).map(b"".join)


@st.composite
def chunked(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A body and the same body cut into reads at arbitrary places."""
    body = draw(sse_bodies)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=8)))
    edges = [0, *cuts, len(body)]
    return body, [body[a:b] for a, b in zip(edges, edges[1:], strict=False)]


async def pieces(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def read(parts: list[bytes], limit: int) -> tuple[list[Any], str | None]:
    """The events of `parts` and the SSEError that ended them, if one did."""

    async def go() -> tuple[list[Any], str | None]:
        got: list[Any] = []
        try:
            async for event in parse_sse(sse_lines(pieces(parts), limit), limit):
                got.append(event)
        except SSEError as exc:
            return got, str(exc)
        return got, None

    return anyio.run(go)


@given(chunked(), st.integers(1, 64))
def test_sse_is_events_or_sse_error_however_the_bytes_are_cut(
    body_parts: tuple[bytes, list[bytes]], limit: int
) -> None:
    body, parts = body_parts
    events, error = read(parts, limit)
    for event in events:  # nothing held past the limit reaches a caller
        assert len(event.data) <= limit and len(event.id) <= limit
        assert len(event.event) <= limit or event.event == "message"  # the default name
    # Where the reads fall changes nothing: not the events, not the error.
    assert (events, error) == read([body], limit)


# -- the providers' stream decoding ---------------------------------------------------------

wild = st.sampled_from([None, "", "x", 0, 1, -1, 2**70, 1.5, True, [], {}, "stop",
                        "tool_calls", "tool_use", "end_turn"]) | json_values  # fmt: skip


def maybe(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A dictionary with any of `fields`."""
    return st.fixed_dictionaries({}, optional=fields)


openai_chunks = maybe(
    choices=st.lists(
        maybe(
            delta=maybe(
                content=wild | texts, refusal=wild,
                tool_calls=st.lists(
                    maybe(index=wild | st.integers(0, 3), id=wild | texts,
                          function=maybe(name=wild | texts, arguments=wild | json_texts)) | wild,
                    max_size=3,
                ) | wild,
            ) | wild,
            finish_reason=wild,
        ) | wild,
        max_size=2,
    ) | wild,
    usage=maybe(prompt_tokens=wild, completion_tokens=wild) | wild,
    error=wild,
)  # fmt: skip
ANTHROPIC_TYPES = st.sampled_from(["message_start", "content_block_start", "content_block_delta",
                                   "content_block_stop", "message_delta", "ping", "error"])  # fmt: skip
usage = maybe(input_tokens=wild, output_tokens=wild, cache_read_input_tokens=wild,
              cache_creation_input_tokens=wild) | wild  # fmt: skip
anthropic_events = maybe(
    type=ANTHROPIC_TYPES | wild,
    index=st.integers(0, 3) | wild,
    message=maybe(usage=usage) | wild,
    content_block=maybe(type=st.sampled_from(["tool_use", "text"]) | wild, id=wild | texts,
                        name=wild | texts, input=wild, text=wild | texts) | wild,
    delta=maybe(type=st.sampled_from(["text_delta", "input_json_delta"]) | wild,
                text=wild | texts, partial_json=wild | json_texts, stop_reason=wild) | wild,
    usage=usage,
)  # fmt: skip


def sse_body(datas: list[str], names: list[str | None]) -> bytes:
    lines = []
    for data, name in zip(datas, names, strict=False):
        if name:
            lines.append(f"event: {name}")
        lines += [f"data: {line}" for line in data.split("\n")] + [""]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


def stream(cls: type, body: bytes) -> tuple[list[Any], str | None]:
    """What `cls` makes of a 200 response with `body`: its events, or its ProviderError."""

    async def go() -> tuple[list[Any], str | None]:
        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=body)  # fmt: skip

        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            provider = cls("fuzz-model", "sk-fuzz-0123456789", client=client, max_retries=0,
                           limits=RequestLimits(max_event_bytes=4096))  # fmt: skip
            events: list[Any] = []
            acc = AssistantAccumulator()
            request = ModelRequest(messages=[ConvMessage(role="user", text="hi")])
            try:
                async for event in provider.stream(request):
                    events.append(event)
                    acc.add(event)
            except ProviderError as exc:
                return events, str(exc)
            acc.message().model_dump_json()  # what the conversation stores
            return events, None

    return anyio.run(go)


def provider_case(events: st.SearchStrategy[Any], end: str) -> st.SearchStrategy[bytes]:
    """Bodies of generated events (as JSON, or any text), usually with the proper end."""
    data = events.map(dumps) | json_texts
    return st.tuples(
        st.lists(st.tuples(data, st.none() | ANTHROPIC_TYPES | texts), max_size=6),
        st.sampled_from([end, end, ""]),
    ).map(lambda c: sse_body([d for d, _ in c[0]] + [c[1]], [n for _, n in c[0]] + [None]))


@given(provider_case(openai_chunks, "[DONE]"))
def test_openai_stream_is_events_or_a_provider_error(body: bytes) -> None:
    events, error = stream(OpenAIProvider, body)
    assert error is not None or isinstance(events[-1], StopEvent)
    assert error is None or "\n" not in error


@given(provider_case(anthropic_events, json.dumps({"type": "message_stop"})))
def test_anthropic_stream_is_events_or_a_provider_error(body: bytes) -> None:
    events, error = stream(AnthropicProvider, body)
    assert error is not None or isinstance(events[-1], StopEvent)
