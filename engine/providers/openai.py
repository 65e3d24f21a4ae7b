"""OpenAI-compatible Chat Completions, streamed: OpenAI and the servers that speak it.

Ollama, vLLM, llama.cpp and LM Studio serve the same `/chat/completions` API, so one
provider reaches them all (a local server needs no key). This module is only the wire
format: conversation -> request body, SSE chunks -> model events. HTTP, retries and errors
live in `engine.providers.http`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.domain.messages import ConvMessage
from engine.providers.base import (
    ModelEvent,
    ModelRequest,
    StopEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from engine.providers.http import HTTPProvider, error_detail

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# OpenAI's reasoning models take their instructions as "developer" messages; every other
# model takes "system" (OpenAI converts one to the other, a local server may refuse it).
DEVELOPER_MODELS = ("o1", "o3", "o4-mini", "gpt-5")
# How OpenAI-compatible servers that send no `context_length_exceeded` code word a prompt
# over the context window: OpenAI, vLLM, Mistral, DeepSeek ("maximum context length"),
# llama.cpp (its type "exceed_context_size_error"), older vLLM ("is too long and exceeds
# limit"); and, for the rest, the context's length, size or window said to be exceeded.
OVER_WINDOW = ("maximum context length", "exceed_context_size_error", "context_length_exceeded",
               "prompt is too long", "is too long and exceeds limit")  # fmt: skip
CONTEXT = re.compile(r"\bcontext[ _](?:length|size|window|limit)")
EXCEEDED = ("exceed", "too long", "too many tokens", "longer than", "greater than", "not enough")
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}


def late_result_text(message: ConvMessage) -> str:
    """A second result for one call, as plain text (the APIs take one result per call)."""
    error = " (error)" if message.is_error else ""
    return f"Result of call {message.tool_call_id} ({message.tool_name}){error}: {message.text}"


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas ({name, description, parameters}) as Chat Completions functions."""
    out = []
    for tool in tools:
        if tool.get("type") == "function":
            out.append(tool)  # already in wire format
            continue
        function = {"name": tool["name"], "description": tool.get("description", "")}
        function["parameters"] = tool.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def instruction_role(model: str) -> Literal["system", "developer"]:
    """The role instructions go in for `model`: "developer" for OpenAI's reasoning models
    (the o1, o3, o4-mini and gpt-5 families, with or without a provider prefix such as
    `openai/`), "system" for every other model and server."""
    name = model.rsplit("/", 1)[-1].lower()
    for family in DEVELOPER_MODELS:
        if name == family or name.startswith((f"{family}-", f"{family}.", f"{family}:")):
            return "developer"
    return "system"


def openai_messages(
    request: ModelRequest, system_role: Literal["system", "developer"] = "system"
) -> list[dict[str, Any]]:
    """The conversation as Chat Completions messages, instructions first in `system_role`
    (the request's `system`, then any system message of the conversation in its place).

    A late result (a second tool message for a call already answered, e.g. after a
    "pending" placeholder) becomes a user message, sent after the run of tool messages it
    arrived in so that the tool messages still directly follow their assistant message.
    """
    out: list[dict[str, Any]] = []
    if request.system:
        out.append({"role": system_role, "content": request.system})
    answered: set[str] = set()
    late: list[str] = []

    def flush_late() -> None:
        if late:
            out.append({"role": "user", "content": "\n\n".join(late)})
            late.clear()

    for m in request.messages:
        if m.role != "tool":
            flush_late()
        if m.role == "system":
            out.append({"role": system_role, "content": m.text})
        elif m.role == "user":
            out.append({"role": "user", "content": m.read_text})
        elif m.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {
                            "name": tc.name,
                            "arguments": tc.arguments
                            if isinstance(tc.arguments, str)
                            else json.dumps(tc.arguments, ensure_ascii=False),
                        },
                    }
                    for tc in m.tool_calls
                ]
            elif entry["content"] is None:
                entry["content"] = ""
            out.append(entry)
        elif m.tool_call_id in answered:
            late.append(late_result_text(m))
        else:
            answered.add(m.tool_call_id or "")
            text = f"Error: {m.text}" if m.is_error else m.text
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": text})
    flush_late()
    return out


class OpenAIProvider(HTTPProvider):
    """A model behind an OpenAI-compatible `/chat/completions` endpoint, streamed.

    `system_role` is the role instructions are sent in: "system" or "developer"; None (the
    default) chooses by the model of each request (`instruction_role`): "developer" for
    OpenAI's reasoning models (o1, o3, o4-mini, gpt-5), "system" otherwise, which is what
    local servers (Ollama, vLLM, llama.cpp) understand.
    """

    name = "openai"
    hosted_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        *,
        max_tokens: int | None = None,
        system_role: Literal["system", "developer"] | None = None,
        **http: Any,
    ) -> None:
        super().__init__(model, api_key, base_url, **http)
        self.max_tokens = max_tokens
        self.system_role = system_role

    def headers(self) -> dict[str, str]:
        headers = super().headers()
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def key_hint(self) -> str:
        return "set OPENAI_API_KEY"

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON request body for `request`."""
        model = request.model or self.model
        role = self.system_role or instruction_role(model)
        body: dict[str, Any] = {
            "model": model,
            "messages": openai_messages(request, role),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = openai_tools(request.tools)
        if max_tokens := request.max_tokens or self.max_tokens:
            body["max_tokens"] = max_tokens
        return body

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Text, tool-call pieces (parallel calls by index), usage, then one StopEvent."""
        url = f"{self.base_url}/chat/completions"
        seen = _Seen()
        async with aclosing(self.events(url, self.body(request))) as events:
            async for sse in events:
                if sse.data.strip() == "[DONE]":
                    break
                chunk = self.decode(sse.data)
                if sse.event == "error" or chunk.get("error"):
                    raise self.error(f"error mid-stream: {error_detail(chunk)}")
                for event in self.shaped(_chunk_events, chunk, seen, data=sse.data):
                    yield event
            else:
                raise self.error("stream ended without its [DONE] marker (cut off?)")
        reason = STOP_REASONS.get(seen.finish or "stop", seen.finish or "end_turn")
        if seen.refused:
            reason = "refusal"
        elif seen.tool and reason == "end_turn":
            reason = "tool_use"  # some local servers finish tool calls with "stop"
        yield StopEvent(reason=reason)

    def over_window(self, error: dict[str, Any]) -> bool:
        """OpenAI's `context_length_exceeded` code, or the words of servers without it."""
        if error.get("code") == "context_length_exceeded":
            return True
        words = f"{error.get('message') or ''} {error.get('type') or ''}".lower()
        if any(phrase in words for phrase in OVER_WINDOW):
            return True
        return bool(CONTEXT.search(words)) and any(word in words for word in EXCEEDED)

    def decode(self, data: str) -> dict[str, Any]:
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, a huge number, absurd nesting
            raise self.error(f"malformed stream chunk (not JSON): {data[:200]!r}") from None
        if not isinstance(chunk, dict):
            raise self.error(f"malformed stream chunk (not an object): {data[:200]!r}")
        return chunk


@dataclass
class _Seen:
    """What a stream's chunks said so far that its StopEvent depends on."""

    finish: str | None = None
    refused: bool = False
    tool: bool = False
    ids: dict[str, int] = field(default_factory=dict)  # call id -> index, when `index` is omitted


def _chunk_events(chunk: dict[str, Any], seen: _Seen) -> Iterator[ModelEvent]:
    """The model events of one chunk (run by `HTTPProvider.shaped`, which turns a chunk of
    the wrong shape into a ProviderError)."""
    usage = chunk.get("usage")
    if isinstance(usage, dict):
        # prompt_tokens counts the cached tokens too; servers without a cache send no
        # details, or null (vLLM)
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        yield UsageEvent(
            input_tokens=usage.get("prompt_tokens") or 0,
            output_tokens=usage.get("completion_tokens") or 0,
            cached_tokens=cached or 0,
        )
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            yield TextDelta(text=delta["content"])
        if delta.get("refusal"):
            seen.refused = True
            yield TextDelta(text=delta["refusal"])
        for pos, tc in enumerate(delta.get("tool_calls") or []):
            seen.tool = True
            function = tc.get("function") or {}
            yield ToolCallDelta(
                index=_call_index(tc, pos, seen.ids),
                id=tc.get("id") or None,
                name=function.get("name") or None,
                arguments=function.get("arguments") or "",
            )
        if finish := choice.get("finish_reason"):
            if not isinstance(finish, str):
                raise TypeError(f"finish_reason is a {type(finish).__name__}, not a string")
            seen.finish = finish


def _call_index(tc: dict[str, Any], pos: int, ids: dict[str, int]) -> int:
    """The call's index; servers that omit it get one per distinct call id."""
    if isinstance(tc.get("index"), int):
        index = tc["index"]
    elif tc.get("id") and tc["id"] not in ids:
        index = len(ids)
    elif tc.get("id"):
        index = ids[tc["id"]]
    else:
        index = max(ids.values(), default=pos)
    if tc.get("id"):
        ids.setdefault(tc["id"], index)
    return index
