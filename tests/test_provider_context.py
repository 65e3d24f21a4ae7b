"""Instructions, prompt caching and the context window, over real loopback HTTP.

The servers are the ones tests/test_providers.py (`sse_server`, a fixed OpenAI stream that
records request bodies) and tests/test_provider_deadlines.py (`loopback`, any bytes) stand
up on 127.0.0.1; the payloads follow each API's documentation, cited where they are used.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import httpx
import pytest
from anyio.abc import SocketStream
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

import tests.test_providers as wire
from engine.config import Config, ModelConfig
from engine.domain.messages import ConvMessage
from engine.providers.anthropic import AnthropicProvider
from engine.providers.base import (
    MAX_TOKENS,
    AssistantAccumulator,
    ContextTooLong,
    ModelRequest,
    ProviderError,
    StopEvent,
    UsageEvent,
)
from engine.providers.http import HTTPProvider
from engine.providers.openai import OpenAIProvider, instruction_role
from engine.providers.select import make_provider
from engine.providers.windows import context_window, estimate_tokens
from tests.test_provider_deadlines import Respond, loopback
from tests.test_providers import KEY, TOOLS, collect, transcript

sse_server = wire.sse_server  # the fixture, for the tests here that take it
ASKED = ModelRequest(
    messages=[ConvMessage(role="system", text="Use metric."), ConvMessage(role="user", text="hi")],
    system="Be brief.",
)
TWO_TOOLS = [*TOOLS, {"name": "weather", "description": "Say the weather.", "parameters": None}]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def answer(status: int, body: bytes | dict, kind: str = "text/event-stream") -> Respond:
    """A `loopback` response: `status` and `body` (a dict is sent as JSON), whole.

    It has a length, so the client knows its end and closes; the server reads until then,
    so it never closes on a request body it has not read (which would reset the socket).
    """
    if isinstance(body, dict):
        body, kind = json.dumps(body).encode(), "application/json"

    async def respond(stream: SocketStream) -> None:
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: {kind}\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        await stream.send(head.encode() + body)
        while True:
            await stream.receive()  # until the client closes (EndOfStream ends `loopback`)

    return respond


@asynccontextmanager
async def served(
    cls: type[HTTPProvider], respond: Respond
) -> AsyncIterator[tuple[Any, list[dict]]]:
    """A provider of `cls` asking a loopback server that answers with `respond`, and the
    JSON bodies of the requests it sent."""
    bodies: list[dict] = []

    async def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    async with loopback(respond) as url:
        async with httpx.AsyncClient(trust_env=False, event_hooks={"request": [record]}) as client:
            yield cls("test-model", KEY, url, client=client), bodies


# -- instructions ------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "role"),
    [("gpt-4o-mini", "system"), ("o3", "developer"), ("llama3.1:8b", "system")],
)
async def test_openai_instructions_by_model_through_the_configured_provider(
    sse_server: tuple[str, list], model: str, role: str
) -> None:
    base_url, bodies = sse_server
    config = Config(model=ModelConfig(provider="openai", base_url=base_url, model=model))
    p = make_provider(config, {}).provider
    try:
        _, acc = await collect(p, ASKED)
    finally:
        await p.aclose()
    assert acc.message().text == "Hello, world!"
    assert bodies[0]["messages"] == [
        {"role": role, "content": "Be brief."},
        {"role": role, "content": "Use metric."},
        {"role": "user", "content": "hi"},
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "system_role", "request_model", "role"),
    [
        ("gpt-4o", "developer", None, "developer"),  # said, whatever the model
        ("o1", "system", None, "system"),
        ("gpt-4o", None, "gpt-5-mini", "developer"),  # the request's model decides
        ("o4-mini", None, "gpt-4.1", "system"),
    ],
)
async def test_openai_system_role_parameter(
    sse_server: tuple[str, list], model: str, system_role: str | None,
    request_model: str | None, role: str,
) -> None:  # fmt: skip
    base_url, bodies = sse_server
    p = OpenAIProvider(model, None, base_url, system_role=system_role)
    request = ModelRequest(messages=ASKED.messages, system="Be brief.", model=request_model)
    try:
        await collect(p, request)
    finally:
        await p.aclose()
    assert bodies[0]["messages"][0] == {"role": role, "content": "Be brief."}
    assert bodies[0]["model"] == (request_model or model)


@pytest.mark.parametrize(
    ("model", "role"),
    [
        ("o1", "developer"), ("o1-2024-12-17", "developer"), ("o3-mini", "developer"),
        ("o3-pro", "developer"), ("o4-mini-2025-04-16", "developer"), ("gpt-5", "developer"),
        ("gpt-5-nano", "developer"), ("gpt-5.1", "developer"), ("openai/o3", "developer"),
        ("GPT-5-MINI", "developer"), ("gpt-4o", "system"), ("gpt-4.1-mini", "system"),
        ("o10", "system"), ("gpt-50", "system"), ("llama3.2", "system"), ("qwen2.5:7b", "system"),
        ("gpt-oss-20b", "system"), ("", "system"),
    ],
)  # fmt: skip
def test_instruction_role(model: str, role: str) -> None:
    assert instruction_role(model) == role


@pytest.mark.anyio
async def test_anthropic_system_is_one_cached_block_after_the_tools() -> None:
    request = ModelRequest(messages=ASKED.messages, tools=TOOLS, system="Be brief.")
    async with served(AnthropicProvider, answer(200, transcript("anthropic_text.txt"))) as (
        p, bodies):  # fmt: skip
        _, acc = await collect(p, request)
    assert acc.message().text == "Hello, world!"
    # https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching: system as text
    # blocks, the breakpoint ({"type": "ephemeral"}) on the last; tools come before it.
    assert bodies[0]["system"] == [
        {"type": "text", "text": "Be brief.\n\nUse metric.", "cache_control": {"type": "ephemeral"}}
    ]
    assert bodies[0]["tools"] == [
        {"name": "clock", "description": "Tell the time.", "input_schema": {"type": "object"}}
    ]
    assert bodies[0]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


@pytest.mark.anyio
async def test_anthropic_without_a_system_marks_the_last_tool() -> None:
    request = ModelRequest(messages=[ConvMessage(role="user", text="hi")], tools=TWO_TOOLS)
    async with served(AnthropicProvider, answer(200, transcript("anthropic_text.txt"))) as (
        p, bodies):  # fmt: skip
        await collect(p, request)
    assert "system" not in bodies[0]
    assert [t.get("cache_control") for t in bodies[0]["tools"]] == [None, {"type": "ephemeral"}]
    assert "cache_control" not in TWO_TOOLS[-1]  # the caller's schemas are left alone
    plain = AnthropicProvider("m", KEY).body(ModelRequest(messages=request.messages))
    assert "system" not in plain and "tools" not in plain


# -- cached tokens ---------------------------------------------------------------------------

# https://platform.openai.com/docs/guides/prompt-caching: `usage.prompt_tokens_details.
# cached_tokens`, a share of prompt_tokens; with stream_options.include_usage the usage comes
# in a last chunk whose `choices` is empty
# (https://platform.openai.com/docs/api-reference/chat/streaming).
OPENAI_USAGE = b'"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}'
OPENAI_CACHED = json.dumps(
    {"usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
               "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
               "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                             "accepted_prediction_tokens": 0,
                                             "rejected_prediction_tokens": 0}}},
    separators=(",", ":"),
)[1:-1].encode()  # fmt: skip
# vLLM and other servers without a cache send the details as null, or not at all.
OPENAI_NULL = b'"usage":{"prompt_tokens":12,"completion_tokens":4,"prompt_tokens_details":null}'


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("usage", "counts"),
    [(OPENAI_CACHED, (2006, 300, 1920)), (OPENAI_NULL, (12, 4, 0)), (OPENAI_USAGE, (12, 4, 0))],
    ids=["cached", "null-details", "no-details"],
)
async def test_openai_cached_tokens_from_the_usage_chunk(usage: bytes, counts: tuple) -> None:
    body = transcript("openai_text.txt").replace(OPENAI_USAGE, usage)
    async with served(OpenAIProvider, answer(200, body)) as (p, _):
        events, acc = await collect(p)
    assert (acc.input_tokens, acc.output_tokens, acc.cached_tokens) == counts
    assert [e for e in events if isinstance(e, UsageEvent)] == [
        UsageEvent(input_tokens=counts[0], output_tokens=counts[1], cached_tokens=counts[2])
    ]
    assert events[-1] == StopEvent(reason="end_turn")


# https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching ("Tracking cache
# performance"): input_tokens counts only what was neither read from nor written to the
# cache; the three together are the prompt. message_start carries them; message_delta's
# counts are cumulative, and the API now repeats the input counts there too.
ANTHROPIC_START = b'"usage":{"input_tokens":25,"output_tokens":1}'
ANTHROPIC_DELTA = b'"usage":{"output_tokens":15}'
CACHE_USAGE = b'"input_tokens":25,"cache_creation_input_tokens":300,"cache_read_input_tokens":1800'


@pytest.mark.anyio
@pytest.mark.parametrize("repeated", [False, True], ids=["delta-output-only", "delta-cumulative"])
async def test_anthropic_cache_reads_are_cached_tokens(repeated: bool) -> None:
    body = transcript("anthropic_text.txt").replace(
        ANTHROPIC_START, b'"usage":{' + CACHE_USAGE + b',"output_tokens":1}'
    )
    if repeated:
        body = body.replace(ANTHROPIC_DELTA, b'"usage":{' + CACHE_USAGE + b',"output_tokens":15}')
    async with served(AnthropicProvider, answer(200, body)) as (p, _):
        events, acc = await collect(p)
    assert (acc.input_tokens, acc.output_tokens, acc.cached_tokens) == (25 + 300 + 1800, 15, 1800)
    assert events[0] == UsageEvent(input_tokens=2125, output_tokens=1, cached_tokens=1800)
    assert events[-1] == StopEvent(reason="end_turn")


@pytest.mark.anyio
async def test_a_cached_count_past_max_tokens_is_a_malformed_chunk() -> None:
    chunk = {"choices": [], "usage": {"prompt_tokens": 1,
                                      "prompt_tokens_details": {"cached_tokens": 2**70}}}  # fmt: skip
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    async with served(OpenAIProvider, answer(200, body)) as (p, _):
        with pytest.raises(ProviderError, match=r"malformed stream chunk .*cached_tokens"):
            await collect(p)


def test_usage_event_and_accumulator_count_cached_tokens() -> None:
    assert UsageEvent().cached_tokens == 0
    for wrong in (-1, MAX_TOKENS + 1):
        with pytest.raises(ValidationError):
            UsageEvent(cached_tokens=wrong)
    acc = AssistantAccumulator()
    acc.add(UsageEvent(input_tokens=100, output_tokens=1, cached_tokens=64))
    acc.add(UsageEvent(output_tokens=9))
    acc.add(UsageEvent(input_tokens=20, cached_tokens=6))
    assert (acc.input_tokens, acc.output_tokens, acc.cached_tokens) == (120, 10, 70)


# -- over the context window -------------------------------------------------------------------

# https://platform.openai.com/docs/guides/error-codes: {"error": {message, type, param, code}}
OPENAI_OVER = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 349303 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
OPENAI_OVER_CODE_ONLY = {
    "error": {  # the code decides, whatever the words
        "message": "Input tokens exceed the configured limit of 272000 tokens. Your messages "
        "resulted in 300000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
VLLM_OVER = {  # vLLM's error object, bare, with no such code
    "object": "error",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
    "message": "This model's maximum context length is 4096 tokens. However, you requested "
    "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the "
    "length of the messages or completion.",
}
LLAMA_CPP_OVER = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 5000,
        "n_ctx": 4096,
    }
}
LM_STUDIO_OVER = {
    "error": (
        "Trying to keep the first 5213 tokens when context the overflows. However, the model is "
        "loaded with context length of only 4096 tokens, which is not enough."
    )
}
OPENAI_OTHER_400 = [
    {
        "error": {
            "message": "Invalid value: 'robot'. Supported values are: 'system', "
            "'assistant', 'user', 'tool', 'function' and 'developer'.",
            "type": "invalid_request_error",
            "param": "messages[1].role",
            "code": "invalid_value",
        }
    },
    {
        "error": {
            "message": "max_tokens is too large: 100000. This model supports at most "
            "16384 completion tokens, whereas you provided 100000.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": None,
        }
    },
]
# https://docs.anthropic.com/en/api/errors: {"type": "error", "error": {type, message}};
# a prompt over the window is a 400 invalid_request_error saying so.
ANTHROPIC_OVER = [
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum",
        },
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    },
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
        },
    },
]
ANTHROPIC_OTHER = [
    (400, {"type": "error", "error": {"type": "invalid_request_error", "message":
        "messages: roles must alternate between \"user\" and \"assistant\""}}),
    (413, {"type": "error", "error": {"type": "request_too_large",
                                      "message": "Request exceeds the maximum size"}}),
]  # fmt: skip

OVER = [
    (OpenAIProvider, OPENAI_OVER, "maximum context length is 128000 tokens"),
    (OpenAIProvider, OPENAI_OVER_CODE_ONLY, "configured limit of 272000 tokens"),
    (OpenAIProvider, VLLM_OVER, "maximum context length is 4096 tokens"),
    (OpenAIProvider, LLAMA_CPP_OVER, "exceeds the available context size"),
    (OpenAIProvider, LM_STUDIO_OVER, "context length of only 4096 tokens"),
    (AnthropicProvider, ANTHROPIC_OVER[0], r"prompt is too long: 208310 tokens > 200000"),
    (AnthropicProvider, ANTHROPIC_OVER[1], r"exceed context limit: 197202 \+ 21333"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("cls", "error", "quote"), OVER,
                         ids=["openai", "openai-code", "vllm", "llama.cpp", "lm-studio",
                              "anthropic", "anthropic-max-tokens"])  # fmt: skip
async def test_a_prompt_over_the_window_is_context_too_long(
    cls: type[HTTPProvider], error: dict, quote: str
) -> None:
    async with served(cls, answer(400, error)) as (p, bodies):
        with pytest.raises(ContextTooLong, match=quote) as info:
            await collect(p)
    assert isinstance(info.value, ProviderError)  # what callers that know no better catch
    assert "(test-model): HTTP 400 the prompt is over the model's context window: " in str(
        info.value
    )
    assert len(bodies) == 1  # never retried


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("cls", "status", "error"),
    [(OpenAIProvider, 400, e) for e in OPENAI_OTHER_400]
    + [(AnthropicProvider, s, e) for s, e in ANTHROPIC_OTHER]
    + [(OpenAIProvider, 413, OPENAI_OVER)],  # only a 400 is read for it
)
async def test_another_refusal_stays_a_plain_provider_error(
    cls: type[HTTPProvider], status: int, error: dict
) -> None:
    async with served(cls, answer(status, error)) as (p, bodies):
        with pytest.raises(ProviderError, match=f"HTTP {status}") as info:
            await collect(p)
    assert type(info.value) is ProviderError and len(bodies) == 1


@pytest.mark.anyio
async def test_context_too_long_quotes_the_provider_cut_short() -> None:
    words = "prompt is too long: 999999 tokens > 200000 maximum; " + "details " * 500
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": words}}
    async with served(AnthropicProvider, answer(400, error)) as (p, _):
        with pytest.raises(ContextTooLong) as info:
            await collect(p)
    text = str(info.value)
    assert "999999 tokens > 200000 maximum" in text and len(text) < 450


# -- windows and estimates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000), ("gpt-4o-mini-2024-07-18", 128_000), ("gpt-4.1", 1_047_576),
        ("gpt-4.1-nano", 1_047_576), ("gpt-5", 400_000), ("gpt-5-mini", 400_000),
        ("gpt-5-chat-latest", 128_000), ("o1", 200_000), ("o1-mini", 128_000),
        ("o3-mini", 200_000), ("o4-mini", 200_000), ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4-0613", 8_192), ("gpt-3.5-turbo", 16_385), ("gpt-3.5-turbo-instruct", 4_096),
        ("claude-sonnet-4-5-20250929", 200_000), ("claude-3-5-haiku-latest", 200_000),
        ("llama3.1:8b", 128_000), ("llama3", 8_192), ("llama-3.3-70b-versatile", 128_000),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", 128_000), ("Qwen/Qwen2.5-7B-Instruct", 32_768),
        ("qwen2.5-coder:32b", 32_768), ("mistral", 32_768), ("mistral-nemo", 128_000),
        ("mistralai/Mistral-7B-Instruct-v0.3", 32_768), ("openai/GPT-4O", 128_000),
        ("CLAUDE-OPUS-4-1", 200_000), ("gpt-oss:20b", 131_072),
        ("phi4", None), ("my-finetune", None), ("", None), ("claude", None),
    ],
)  # fmt: skip
def test_context_window(model: str, window: int | None) -> None:
    assert context_window(model) == window


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0), ("a", 1), ("abcd", 1), ("abcde", 2), ("x" * 4000, 1000),
        ("def f(x):\n    return x\n", 6),
        ("привет", 5),  # 6 two-byte characters weigh 18
        ("日本語のテキスト", 10),  # 8 three-byte characters weigh 40
        ("👍", 2),  # 1 four-byte character weighs 7
        ("a\ud800", 2),  # a lone surrogate (from JSON) is counted, not an error
    ],
)  # fmt: skip
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


@given(st.text(), st.text())
def test_estimates_add_up(a: str, b: str) -> None:
    # Estimates of the messages, summed, never fall short of the whole's (so a conversation
    # counted message by message is not undercounted), and pass it by rounding at most.
    assert estimate_tokens(a) + estimate_tokens(b) - 1 <= estimate_tokens(a + b)
    assert estimate_tokens(a + b) <= estimate_tokens(a) + estimate_tokens(b)
    assert estimate_tokens(a) >= len(a) / 4
