"""Anthropic Messages, streamed.

Only the wire format lives here: the conversation becomes a Messages request (system at
the top level, tool results as `tool_result` blocks of a user turn, tool calls as
`tool_use` blocks), and the named SSE events (message_start, content_block_*,
message_delta, message_stop, ping, error) become model events. HTTP, retries and errors
live in `engine.providers.http`.

Every request marks one prompt-cache breakpoint (`cache_control`) at the end of what stays
the same from one request of a conversation to the next: the tools and the system text,
which the API caches in that order. A later request with the same prefix reads it from
the cache (`cache_read_input_tokens`) instead of processing it again; a prefix shorter
than the model's minimum (1024 tokens, or 2048 for Haiku) is simply not cached.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from engine.providers.base import (
    ModelEvent,
    ModelRequest,
    StopEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from engine.providers.http import HTTPProvider, error_detail
from engine.providers.openai import late_result_text

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
STOP_REASONS = {"stop_sequence": "end_turn"}  # end_turn, tool_use, max_tokens, refusal: as is
CACHE_BREAKPOINT = {"type": "ephemeral"}
# The API's words for a prompt over the context window, in a 400 invalid_request_error:
# "prompt is too long: 208310 tokens > 200000 maximum", and, when max_tokens is what does
# not fit, "input length and `max_tokens` exceed context limit: 197202 + 21333 > 200000".
OVER_WINDOW = ("prompt is too long", "exceed context limit")


def anthropic_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas ({name, description, parameters}) as Messages tools."""
    return [
        {
            "name": t["name"],
            "description": t.get("description", ""),
            "input_schema": t.get("parameters") or {"type": "object", "properties": {}},
        }
        for t in tools
    ]


def anthropic_messages(request: ModelRequest) -> tuple[str, list[dict[str, Any]]]:
    """The system text and the conversation as Messages turns of content blocks.

    Consecutive messages of one role become one turn, so consecutive tool results form one
    user turn of `tool_result` blocks (placed before any text, as the API requires). A late
    result for a call already answered becomes a text block.
    """
    system = [request.system] if request.system else []
    turns: list[dict[str, Any]] = []
    answered: set[str] = set()

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for m in request.messages:
        if m.role == "system":
            if m.text:
                system.append(m.text)
        elif m.role == "user":
            add("user", [{"type": "text", "text": m.read_text}] if m.read_text else [])
        elif m.role == "assistant":
            notes, uses = [], []
            for tc in m.tool_calls:
                args = tc.arguments
                if isinstance(args, str):
                    notes.append(f"(call {tc.id} to {tc.name} had invalid JSON arguments: {args})")
                    args = {}
                uses.append({"type": "tool_use", "id": tc.id, "name": tc.name, "input": args})
            text = "\n".join(filter(None, [m.text.rstrip(), *notes]))
            add("assistant", ([{"type": "text", "text": text}] if text else []) + uses)
        elif m.tool_call_id in answered:
            add("user", [{"type": "text", "text": late_result_text(m)}])
        else:
            answered.add(m.tool_call_id or "")
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id}
            if m.text:
                block["content"] = m.text
            if m.is_error:
                block["is_error"] = True
            add("user", [block])
    for turn in turns:
        if turn["role"] == "user":  # stable: tool results first, text after
            turn["content"].sort(key=lambda b: b["type"] != "tool_result")
    return "\n\n".join(system), turns


class AnthropicProvider(HTTPProvider):
    """A Claude model behind the Messages API (`/v1/messages`), streamed."""

    name = "anthropic"
    hosted_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        *,
        max_tokens: int = 4096,
        **http: Any,
    ) -> None:
        super().__init__(model, api_key, base_url, **http)
        self.max_tokens = max_tokens

    def headers(self) -> dict[str, str]:
        headers = super().headers()
        headers["anthropic-version"] = API_VERSION
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def key_hint(self) -> str:
        return "set ANTHROPIC_API_KEY"

    @property
    def url(self) -> str:
        return self.base_url + ("/messages" if self.base_url.endswith("/v1") else "/v1/messages")

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON request body for `request`."""
        system, messages = anthropic_messages(request)
        body: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens or self.max_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            body["system"] = [
                {"type": "text", "text": system, "cache_control": dict(CACHE_BREAKPOINT)}
            ]
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)
            if not system:  # the breakpoint ends the tools instead, so they still cache
                body["tools"][-1]["cache_control"] = dict(CACHE_BREAKPOINT)
        return body

    def over_window(self, error: dict[str, Any]) -> bool:
        """The API's invalid_request_error for a prompt over the context window."""
        message = str(error.get("message") or "").lower()
        return error.get("type") == "invalid_request_error" and any(
            phrase in message for phrase in OVER_WINDOW
        )

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Text, tool-call pieces, usage, then one StopEvent at message_stop."""
        seen = _Seen()
        async with aclosing(self.events(self.url, self.body(request))) as events:
            async for sse in events:
                data = self.decode(sse.data)
                kind = data.get("type") or sse.event
                if kind == "error" or sse.event == "error":
                    raise self.error(f"error mid-stream: {error_detail(data)}")
                if kind == "message_stop":
                    break
                for event in self.shaped(_event_events, kind, data, seen, data=sse.data):
                    yield event
            else:
                raise self.error("stream ended without message_stop (cut off?)")
        yield StopEvent(reason=seen.reason)

    def decode(self, data: str) -> dict[str, Any]:
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, a huge number, absurd nesting
            raise self.error(f"malformed stream event (not JSON): {data[:200]!r}") from None
        if not isinstance(event, dict):
            raise self.error(f"malformed stream event (not an object): {data[:200]!r}")
        return event


@dataclass
class _Seen:
    """What a stream's events said so far that later events depend on."""

    tools: dict[int, int] = field(default_factory=dict)  # content block index -> call index
    usage: dict[str, int] = field(  # cumulative counts already emitted
        default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
    )
    reason: str = "end_turn"


def _event_events(kind: Any, data: dict[str, Any], seen: _Seen) -> Iterator[ModelEvent]:
    """The model events of one stream event (run by `HTTPProvider.shaped`, which turns an
    event of the wrong shape into a ProviderError)."""
    tools = seen.tools
    if kind == "message_start":
        usage = _usage((data.get("message") or {}).get("usage"), seen.usage)
        if usage:
            yield usage
    elif kind == "content_block_start":
        block = data.get("content_block") or {}
        if block.get("type") == "tool_use":
            index = tools.setdefault(data.get("index", len(tools)), len(tools))
            given = block.get("input")
            yield ToolCallDelta(
                index=index,
                id=block.get("id") or None,
                name=block.get("name") or None,
                arguments=json.dumps(given) if given else "",
            )
        elif block.get("type") == "text" and block.get("text"):
            yield TextDelta(text=block["text"])
    elif kind == "content_block_delta":
        delta = data.get("delta") or {}
        if delta.get("type") == "text_delta" and delta.get("text"):
            yield TextDelta(text=delta["text"])
        elif delta.get("type") == "input_json_delta" and data.get("index") in tools:
            piece = delta.get("partial_json") or ""
            if piece:
                yield ToolCallDelta(index=tools[data["index"]], arguments=piece)
    elif kind == "message_delta":
        stop = (data.get("delta") or {}).get("stop_reason")
        if stop:
            if not isinstance(stop, str):
                raise TypeError(f"stop_reason is a {type(stop).__name__}, not a string")
            seen.reason = STOP_REASONS.get(stop, stop)
        usage = _usage(data.get("usage"), seen.usage)
        if usage:
            yield usage
    # ping, content_block_stop and unknown events carry nothing we need


def _usage(usage: Any, seen: dict[str, int]) -> UsageEvent | None:
    """The growth of Anthropic's cumulative token counts since the last report.

    The API's `input_tokens` leaves out the tokens written to and read from the cache;
    here input_tokens is the whole prompt (all three) and cached_tokens the reads.
    """
    if not isinstance(usage, dict):
        return None
    totals = {"output_tokens": usage.get("output_tokens")}
    if usage.get("input_tokens") is not None:
        read = usage.get("cache_read_input_tokens") or 0
        written = usage.get("cache_creation_input_tokens") or 0
        totals["input_tokens"] = usage["input_tokens"] + written + read
        totals["cached_tokens"] = read
    grown = {}
    for key, total in totals.items():
        if isinstance(total, int) and total > seen[key]:
            grown[key] = total - seen[key]
            seen[key] = total
    return UsageEvent(**grown) if grown else None
