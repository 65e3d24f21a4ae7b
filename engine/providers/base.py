"""The provider interface: a request in, a stream of typed model events out.

Every provider (offline, OpenAI-compatible, Anthropic) streams the same events;
`AssistantAccumulator` folds them into one assistant `ConvMessage`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, Discriminator, Field

from engine.domain.decisions import MAX_DEPTH, storable
from engine.domain.messages import ConvMessage, ToolCallPart


class TextDelta(BaseModel):
    kind: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallDelta(BaseModel):
    """A piece of a tool call; `id` and `name` come with the first piece of an index."""

    kind: Literal["tool_call_delta"] = "tool_call_delta"
    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


# Tokens one usage report may count: more than any model takes, and summed over a turn
# still far inside the 64-bit integer SQLite stores (a server's 2**70 must not reach it).
MAX_TOKENS = 2**31 - 1


class UsageEvent(BaseModel):
    """Tokens one request used, or the growth of a count reported before."""

    kind: Literal["usage"] = "usage"
    input_tokens: int = Field(0, ge=0, le=MAX_TOKENS)
    output_tokens: int = Field(0, ge=0, le=MAX_TOKENS)
    # Input tokens the provider served from its prompt cache: a share of input_tokens, not
    # added to it, so that input_tokens stays the size of the prompt whatever was cached.
    cached_tokens: int = Field(0, ge=0, le=MAX_TOKENS)


class StopEvent(BaseModel):
    kind: Literal["stop"] = "stop"
    reason: str = "end_turn"  # end_turn | tool_use | max_tokens | refusal | ...


ModelEvent = Annotated[TextDelta | ToolCallDelta | UsageEvent | StopEvent, Discriminator("kind")]


@dataclass
class ModelRequest:
    """What one inference sees: the conversation and the tools it may call."""

    messages: list[ConvMessage]
    tools: list[dict[str, Any]] = field(default_factory=list)
    system: str | None = None
    # "answer" for a conversation; "plan" when a planner (plan_execute) asks for a JSON plan
    # ("summary": a compaction's, engine/turn/compaction.py)
    purpose: Literal["answer", "plan", "summary"] = "answer"
    # For this request only (a ToolRunner's parameters); None: the provider's own setting.
    # The HTTP providers send both; the offline model has one model and no token limit.
    max_tokens: int | None = None
    model: str | None = None


class ProviderError(RuntimeError):
    """A provider failed in a way retries did not fix; ends the turn with `error`."""


class ContextTooLong(ProviderError):
    """The provider refused the request as longer than the model's context window.

    A ProviderError still, so a caller that does not know it ends the turn as before; one
    that does can shorten the conversation and ask again. Its message quotes the provider.
    """


class Provider(Protocol):
    """A model behind one streaming interface."""

    name: str
    model: str

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]: ...


@dataclass
class AssistantAccumulator:
    """Folds a provider's event stream into one assistant message and its usage."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, str]] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    stop_reason: str | None = None

    def add(self, event: ModelEvent) -> None:
        match event:
            case TextDelta(text=t):
                self.text.append(t)
            case ToolCallDelta(index=i, id=cid, name=name, arguments=args):
                slot = self.calls.setdefault(i, {"id": "", "name": "", "arguments": ""})
                slot["id"] = cid or slot["id"]
                slot["name"] = name or slot["name"]
                slot["arguments"] += args
            case UsageEvent(input_tokens=it, output_tokens=ot, cached_tokens=ct):
                self.input_tokens += it
                self.output_tokens += ot
                self.cached_tokens += ct
            case StopEvent(reason=r):
                self.stop_reason = r

    def message(self) -> ConvMessage:
        """The answer; a call's arguments stay the model's text when they are not usable
        (`parse_arguments`), so that the call, not the turn, fails."""
        calls = []
        for _, slot in sorted(self.calls.items()):
            raw = slot["arguments"].strip()
            args, _ = parse_arguments(raw)
            calls.append(ToolCallPart(id=slot["id"], name=slot["name"],
                                      arguments=raw if args is None else args))  # fmt: skip
        return ConvMessage(
            role="assistant",
            text="".join(self.text),
            tool_calls=calls,
            refusal=self.stop_reason == "refusal",
        )


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str]:
    """A tool call's arguments text as a JSON object, or None and why it cannot be one.

    Refused: text that is not JSON, JSON that is not an object, and what a tool or
    execution.db cannot take (nesting past `MAX_DEPTH`, numbers Python will not print).
    """
    if not raw.strip():
        return {}, ""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"arguments must be a JSON object; the text is not JSON ({exc})"
    except RecursionError:
        return None, f"the arguments JSON is nested more than {MAX_DEPTH} deep"
    except ValueError:  # an integer longer than Python converts
        digits = sys.get_int_max_str_digits()
        return None, f"a number in the arguments has more than {digits} digits"
    if not isinstance(value, dict):
        kind = _JSON_TYPES.get(type(value), "null")
        return None, f"arguments must be a JSON object, got {kind}"
    try:
        storable(value, "the arguments JSON")
    except ValueError as exc:
        return None, str(exc)
    return value, ""
