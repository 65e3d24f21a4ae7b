"""Real providers against replayed stream transcripts (httpx.MockTransport) and loopback HTTP.

Transcripts in tests/transcripts/ are written from each provider's documented SSE format;
they are served in small byte pieces so events and lines straddle network reads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.config import Config, ModelConfig
from engine.domain.messages import ConvMessage, ToolCallPart
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import (
    AssistantAccumulator,
    ModelRequest,
    ProviderError,
    StopEvent,
    TextDelta,
    UsageEvent,
)
from engine.providers.offline import OfflineModel
from engine.providers.openai import OpenAIProvider
from engine.providers.select import make_provider

TRANSCRIPTS = Path(__file__).parent / "transcripts"
KEY = "sk-test-SECRETKEY1234567890"
REQUEST = ModelRequest(messages=[ConvMessage(role="user", text="hi")])
SSE = {"content-type": "text/event-stream"}


def transcript(name: str) -> bytes:
    return (TRANSCRIPTS / name).read_bytes()


class Pieces(httpx.AsyncByteStream):
    """A response body sent in 7-byte pieces; optionally cut (ReadError) or stalled after."""

    def __init__(self, body: bytes, then: str | None = None) -> None:
        self.body, self.then, self.closed = body, then, False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i in range(0, len(self.body), 7):
            yield self.body[i : i + 7]
        if self.then == "cut":
            raise httpx.ReadError("connection reset by peer")
        if self.then == "stall":
            await anyio.sleep_forever()

    async def aclose(self) -> None:
        self.closed = True


class Sleeps:
    """An injected sleep that records and returns at once."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def replay(*responses: httpx.Response | Exception) -> tuple[Callable[..., Any], list]:
    """A handler answering requests with `responses` in turn, and the requests it saw."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = responses[len(seen) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    return handler, seen


def ok(body: bytes, then: str | None = None) -> httpx.Response:
    return httpx.Response(200, headers=SSE, stream=Pieces(body, then))


@asynccontextmanager
async def provider(cls: type, handler: Callable[..., Any], sleeps: Sleeps | None = None, **kw):
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        yield cls("test-model", KEY, client=client, sleep=sleeps or Sleeps(), **kw)


async def collect(p: Any, request: ModelRequest = REQUEST) -> tuple[list, AssistantAccumulator]:
    events, acc = [], AssistantAccumulator()
    async for event in p.stream(request):
        events.append(event)
        acc.add(event)
    return events, acc


@pytest.mark.anyio
@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
async def test_plain_text_streaming_usage_and_headers(cls: type) -> None:
    name = "openai_text.txt" if cls is OpenAIProvider else "anthropic_text.txt"
    handler, seen = replay(ok(transcript(name)))
    async with provider(cls, handler) as p:
        events, acc = await collect(p)
    assert len([e for e in events if isinstance(e, TextDelta)]) >= 2  # streamed in pieces
    assert events[-1] == StopEvent(reason="end_turn")
    assert acc.message().text == "Hello, world!" and not acc.message().tool_calls
    assert (acc.input_tokens, acc.output_tokens) == ((12, 4) if cls is OpenAIProvider else (25, 15))
    request = seen[0]
    body = json.loads(request.content)
    assert body["stream"] is True and body["model"] == "test-model"
    if cls is OpenAIProvider:
        assert request.url == "https://api.openai.com/v1/chat/completions"
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert body["stream_options"] == {"include_usage": True}
    else:
        assert request.url == "https://api.anthropic.com/v1/messages"
        assert request.headers["x-api-key"] == KEY
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert body["max_tokens"] == 4096


@pytest.mark.anyio
@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
async def test_parallel_tool_calls_split_across_chunks(cls: type) -> None:
    name = "openai_parallel_tools.txt" if cls is OpenAIProvider else "anthropic_tools.txt"
    handler, _ = replay(ok(transcript(name)))
    async with provider(cls, handler) as p:
        events, acc = await collect(p)
    message = acc.message()
    assert [(c.name, c.arguments) for c in message.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("clock", {"tz": "Europe/Paris"}),
    ]
    assert all(c.id for c in message.tool_calls)
    assert sum(1 for e in events if getattr(e, "arguments", "")) >= 4  # streamed in pieces
    assert acc.stop_reason == "tool_use" and events[-1] == StopEvent(reason="tool_use")
    usage = (80, 41) if cls is OpenAIProvider else (472, 89)
    assert (acc.input_tokens, acc.output_tokens) == usage
    assert sum(isinstance(e, UsageEvent) for e in events) == (1 if cls is OpenAIProvider else 2)


def openai_chunk(delta: dict, finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return f"data: {json.dumps({'id': 'x', 'choices': [choice]})}\n\n"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("finish", "delta", "reason"),
    [
        ("length", {"content": "cut"}, "max_tokens"),
        ("content_filter", {"content": "no"}, "refusal"),
        ("stop", {"refusal": "I can't help with that."}, "refusal"),
        ("stop", {"content": "done"}, "end_turn"),
    ],
)
async def test_openai_stop_reasons(finish: str, delta: dict, reason: str) -> None:
    body = openai_chunk(delta) + openai_chunk({}, finish) + "data: [DONE]\n\n"
    async with provider(OpenAIProvider, replay(ok(body.encode()))[0]) as p:
        events, acc = await collect(p)
    assert events[-1] == StopEvent(reason=reason)
    assert acc.message().text == next(iter(delta.values()))
    assert acc.message().refusal == (reason == "refusal")


def anthropic_stream(stop: str, terminal: bool = True) -> bytes:
    """The Anthropic text transcript with another stop reason, or cut before message_stop."""
    body = transcript("anthropic_text.txt").replace(b'"end_turn"', f'"{stop}"'.encode())
    return body if terminal else body[: body.index(b"event: message_stop")]


@pytest.mark.anyio
@pytest.mark.parametrize("stop", ["end_turn", "tool_use", "max_tokens", "refusal"])
async def test_anthropic_stop_reasons_pass_through(stop: str) -> None:
    async with provider(AnthropicProvider, replay(ok(anthropic_stream(stop)))[0]) as p:
        events, _ = await collect(p)
    assert events[-1] == StopEvent(reason=stop)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("cls", "body", "match"),
    [
        (OpenAIProvider, transcript("openai_error_midstream.txt"), "server had an error"),
        (AnthropicProvider, transcript("anthropic_error_midstream.txt"), "Overloaded"),
        (OpenAIProvider, b'data: {"choices": [{"delta": {"content": "a"\n\n', "malformed"),
        (AnthropicProvider, b"event: message_start\ndata: {oops\n\n", "malformed"),
        (OpenAIProvider, openai_chunk({"content": "a"}).encode(), r"\[DONE\]"),
        (AnthropicProvider, anthropic_stream("end_turn", terminal=False), "message_stop"),
    ],
)
async def test_broken_streams_raise_provider_error(cls: type, body: bytes, match: str) -> None:
    handler, seen = replay(ok(body))
    async with provider(cls, handler) as p:
        with pytest.raises(ProviderError, match=match):
            await collect(p)
    assert len(seen) == 1  # a stream that started is never retried


# Valid JSON of the wrong shape (found by tests/fuzz): each was an AttributeError,
# TypeError or ValidationError out of the provider instead of a ProviderError.
WRONG_SHAPES = {
    "openai-choices-string": (OpenAIProvider, {"choices": "abc"}),
    "openai-delta-list": (OpenAIProvider, {"choices": [{"delta": [1]}]}),
    "openai-content-number": (OpenAIProvider, {"choices": [{"delta": {"content": 5}}]}),
    "openai-tool-call-string": (OpenAIProvider, {"choices": [{"delta": {"tool_calls": ["x"]}}]}),
    "openai-finish-list": (OpenAIProvider, {"choices": [{"finish_reason": [1]}]}),
    "openai-usage-2**70": (OpenAIProvider, {"usage": {"prompt_tokens": 2**70}}),
    "anthropic-delta-string": (AnthropicProvider, {"type": "content_block_delta", "delta": "x"}),
    "anthropic-block-list": (AnthropicProvider, {"type": "content_block_start",
                                                 "content_block": [1]}),
    "anthropic-index-list": (AnthropicProvider, {"type": "content_block_start", "index": [0],
                                                 "content_block": {"type": "tool_use"}}),
    "anthropic-stop-number": (AnthropicProvider, {"type": "message_delta",
                                                  "delta": {"stop_reason": 7}}),
    "anthropic-cache-text": (AnthropicProvider, {"type": "message_start", "message": {
        "usage": {"input_tokens": 1, "cache_read_input_tokens": "many"}}}),
}  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize(("cls", "chunk"), list(WRONG_SHAPES.values()), ids=list(WRONG_SHAPES))
async def test_a_chunk_of_the_wrong_shape_is_a_provider_error(cls: type, chunk: dict) -> None:
    end = "[DONE]" if cls is OpenAIProvider else json.dumps({"type": "message_stop"})
    body = f"data: {json.dumps(chunk)}\n\ndata: {end}\n\n".encode()
    handler, _ = replay(ok(body))
    async with provider(cls, handler) as p:
        with pytest.raises(ProviderError, match=r"malformed stream chunk \(.+\): '\{"):
            await collect(p)


@pytest.mark.anyio
@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
async def test_connection_cut_mid_stream(cls: type) -> None:
    name = "openai_text.txt" if cls is OpenAIProvider else "anthropic_text.txt"
    stream = Pieces(transcript(name)[:400], then="cut")
    handler, seen = replay(httpx.Response(200, headers=SSE, stream=stream))
    async with provider(cls, handler) as p:
        with pytest.raises(ProviderError, match="cut off") as info:
            await collect(p)
    assert KEY not in str(info.value) and len(seen) == 1 and stream.closed


@pytest.mark.anyio
async def test_429_retry_after_then_success() -> None:
    limited = httpx.Response(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}})
    handler, seen = replay(limited, ok(transcript("openai_text.txt")))
    sleeps = Sleeps()
    async with provider(OpenAIProvider, handler, sleeps) as p:
        _, acc = await collect(p)
    assert sleeps.calls == [2.0] and len(seen) == 2 and acc.message().text == "Hello, world!"


@pytest.mark.anyio
async def test_retry_after_http_date_and_connect_errors() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    handler, seen = replay(
        httpx.ConnectError("refused"),
        httpx.Response(503, headers={"retry-after": when}),
        ok(anthropic_stream("end_turn")),
    )
    sleeps = Sleeps()
    async with provider(AnthropicProvider, handler, sleeps) as p:
        await collect(p)
    assert len(seen) == 3 and 0 <= sleeps.calls[0] <= 0.5 and 25 < sleeps.calls[1] <= 30


@pytest.mark.anyio
async def test_5xx_retried_with_backoff_then_gives_up() -> None:
    failures = [httpx.Response(500 + i % 4, json={"error": {"message": "boom"}}) for i in range(5)]
    handler, seen = replay(*failures)
    sleeps = Sleeps()
    async with provider(OpenAIProvider, handler, sleeps, backoff=1.0) as p:
        with pytest.raises(ProviderError, match=r"HTTP 500 server error: boom.*after 5 attempts"):
            await collect(p)
    assert len(seen) == 5 and len(sleeps.calls) == 4
    assert all(0 <= s <= 2**i for i, s in enumerate(sleeps.calls))  # full jitter, doubling cap


@pytest.mark.anyio
@pytest.mark.parametrize("cls", [OpenAIProvider, AnthropicProvider])
async def test_401_is_clear_and_not_retried(cls: type) -> None:
    error = {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "auth_error"}}
    handler, seen = replay(httpx.Response(401, json=error))
    sleeps = Sleeps()
    async with provider(cls, handler, sleeps) as p:
        with pytest.raises(ProviderError) as info:
            await collect(p)
        assert KEY not in repr(p) and "test-model" in repr(p)
    text = str(info.value)
    assert "HTTP 401" in text and "Incorrect API key provided" in text and KEY not in text
    assert "SECRETKEY" not in text and len(seen) == 1 and not sleeps.calls


@pytest.mark.anyio
async def test_cancellation_closes_the_stream() -> None:
    stream = Pieces(openai_chunk({"content": "a"}).encode(), then="stall")
    handler, _ = replay(httpx.Response(200, headers=SSE, stream=stream))
    async with provider(OpenAIProvider, handler) as p:
        with anyio.CancelScope() as scope:
            async for event in p.stream(REQUEST):
                assert event == TextDelta(text="a")
                scope.cancel()
    assert scope.cancelled_caught and stream.closed


HISTORY = [
    ConvMessage(role="user", text="weather and time?"),
    ConvMessage(role="assistant", text="Checking.", tool_calls=[
        ToolCallPart(id="c1", name="get_weather", arguments={"city": "Paris"}),
        ToolCallPart(id="c2", name="clock", arguments="{not json"),
    ]),
    ConvMessage(role="tool", tool_call_id="c1", tool_name="get_weather", text="pending", pending=True),
    ConvMessage(role="tool", tool_call_id="c2", tool_name="clock", text="bad args", is_error=True),
    ConvMessage(role="tool", tool_call_id="c1", tool_name="get_weather", text="sunny"),
    ConvMessage(role="user", text="thanks"),
]  # fmt: skip
TOOLS = [{"name": "clock", "description": "Tell the time.", "parameters": {"type": "object"}}]


def test_openai_request_conversion() -> None:
    p = OpenAIProvider("m", KEY)
    body = p.body(ModelRequest(messages=HISTORY, tools=TOOLS, system="Be brief."))
    assert body["tools"] == [{"type": "function", "function": TOOLS[0]}]
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather and time?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "clock", "arguments": "{not json"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "pending"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: bad args"},
        {"role": "user", "content": "Result of call c1 (get_weather): sunny"},
        {"role": "user", "content": "thanks"},
    ]  # fmt: skip
    assert KEY not in repr(p)


def test_anthropic_request_conversion() -> None:
    history = [ConvMessage(role="system", text="Use metric.")] + HISTORY
    body = AnthropicProvider("m", KEY).body(
        ModelRequest(messages=history, tools=TOOLS, system="Be brief.")
    )
    assert body["system"] == [{"type": "text", "text": "Be brief.\n\nUse metric.",
                               "cache_control": {"type": "ephemeral"}}]  # fmt: skip
    assert body["tools"] == [
        {"name": "clock", "description": "Tell the time.", "input_schema": {"type": "object"}}
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "weather and time?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking.\n(call c2 to clock had invalid JSON arguments: {not json)"},
            {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "c2", "name": "clock", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "pending"},
            {"type": "tool_result", "tool_use_id": "c2", "content": "bad args", "is_error": True},
            {"type": "text", "text": "Result of call c1 (get_weather): sunny"},
            {"type": "text", "text": "thanks"},
        ]},
    ]  # fmt: skip


def choose(model: ModelConfig | None = None, **env: str):
    return make_provider(Config(model=model or ModelConfig()), env)


def test_make_provider_from_config_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(choose().provider, OfflineModel)
    assert choose().key_source == "none (offline model)"
    c = choose(ANTHROPIC_API_KEY=KEY, OPENAI_API_KEY="sk-other-key-000000")
    assert (c.provider.name, c.provider.model, c.key_source) == (
        "anthropic", "claude-sonnet-4-5", "env ANTHROPIC_API_KEY")  # fmt: skip
    c = choose(OPENAI_API_KEY=KEY, OPENAI_BASE_URL="https://proxy.example/v1")
    assert (c.provider.name, c.provider.base_url, c.key_source) == (
        "openai", "https://proxy.example/v1", "env OPENAI_API_KEY")  # fmt: skip
    local = ModelConfig(provider="openai", model="llama3.2", base_url="http://localhost:11434/v1")
    c = choose(local)
    assert (c.provider.model, c.provider.base_url, c.key_source) == (
        "llama3.2", "http://localhost:11434/v1", "none (local server)")  # fmt: skip
    assert isinstance(choose(ModelConfig(provider="offline"), OPENAI_API_KEY=KEY).provider,
                      OfflineModel)  # fmt: skip
    c = choose(ModelConfig(provider="anthropic", base_url="https://gw.example"))
    assert c.provider.url == "https://gw.example/v1/messages"
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the default env is the process environment
    c = make_provider(Config())
    assert c.provider.name == "openai" and c.key_source == "env OPENAI_API_KEY"
    assert KEY not in c.key_source and KEY not in repr(c) and KEY not in repr(c.provider)


@pytest.fixture
def sse_server(monkeypatch: pytest.MonkeyPatch):
    """A real HTTP server on 127.0.0.1 serving the OpenAI text transcript."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    bodies: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for line in transcript("openai_text.txt").splitlines(keepends=True):
                self.wfile.write(line)
                self.wfile.flush()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.anyio
async def test_real_http_on_loopback(sse_server: tuple[str, list]) -> None:
    base_url, bodies = sse_server
    choice = make_provider(Config(model=ModelConfig(provider="openai", base_url=base_url)), {})
    p = choice.provider
    try:
        events, acc = await collect(p)
    finally:
        await p.aclose()
    assert acc.message().text == "Hello, world!" and events[-1] == StopEvent(reason="end_turn")
    assert bodies[0]["model"] == "gpt-4o-mini" and bodies[0]["messages"][-1]["content"] == "hi"


@pytest.mark.anyio
async def test_bad_base_url_fails_at_once() -> None:
    sleeps = Sleeps()
    p = OpenAIProvider("m", None, base_url="localhost:11434/v1", sleep=sleeps)
    try:
        with pytest.raises(ProviderError, match="bad base_url"):
            await collect(p)
    finally:
        await p.aclose()
    assert not sleeps.calls


@pytest.mark.anyio
@pytest.mark.parametrize(("cls", "var"), [(OpenAIProvider, "OPENAI_API_KEY"),
                                          (AnthropicProvider, "ANTHROPIC_API_KEY")])  # fmt: skip
async def test_hosted_endpoint_without_a_key_fails_before_any_request(cls: type, var: str) -> None:
    handler, seen = replay()
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        p = cls("test-model", None, client=client, sleep=Sleeps())
        with pytest.raises(ProviderError, match=f"no API key is set \\(set {var}\\)"):
            await collect(p)
    assert not seen
    # A local server (any other base_url) is asked without a key.
    handler, seen = replay(httpx.Response(401, json={"error": {"message": "who?"}}))
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        p = cls("test-model", None, "http://127.0.0.1:9/v1", client=client, sleep=Sleeps())
        with pytest.raises(ProviderError, match="HTTP 401"):
            await collect(p)
    assert len(seen) == 1
