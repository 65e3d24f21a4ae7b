"""A scripted model for engine tests: answers from a function of the conversation.

It streams the same events a real provider does (text deltas, tool calls split in
pieces, usage, stop), so the loop under test cannot tell it from one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from engine.domain.messages import ConvMessage
from engine.providers.base import (
    ModelEvent,
    ModelRequest,
    StopEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from engine.tools import tool


@dataclass
class Reply:
    """One assistant answer: text and/or tool calls (name, arguments)."""

    text: str = ""
    calls: list[tuple[str, Any]] = field(default_factory=list)
    refusal: bool = False


def after_tools(msgs: list[ConvMessage]) -> list[ConvMessage]:
    """The tool messages since the last assistant message."""
    out: list[ConvMessage] = []
    for m in reversed(msgs):
        if m.role != "tool":
            break
        out.append(m)
    return list(reversed(out))


def echo_results(request: ModelRequest) -> Reply:
    """Answer tool results by quoting them, one line each."""
    lines = [f"{m.tool_name}: {m.text}" for m in after_tools(request.messages)]
    return Reply(text="\n".join(lines))


class ScriptedModel:
    """A provider whose answers come from `script(request) -> Reply`."""

    name = "scripted"
    model = "scripted-1"

    def __init__(self, script: Callable[[ModelRequest], Reply]) -> None:
        self.script = script
        self.requests: list[ModelRequest] = []
        self._n = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        reply = self.script(request)
        self._n += 1
        if reply.text:
            for i in range(0, len(reply.text), 8):
                yield TextDelta(text=reply.text[i : i + 8])
        for i, (name, args) in enumerate(reply.calls):
            raw = args if isinstance(args, str) else json.dumps(args)
            half = len(raw) // 2
            yield ToolCallDelta(index=i, id=f"m{self._n}_{i}", name=name, arguments=raw[:half])
            yield ToolCallDelta(index=i, arguments=raw[half:])
        yield UsageEvent(input_tokens=10, output_tokens=5)
        yield StopEvent(
            reason="refusal" if reply.refusal else "tool_use" if reply.calls else "end_turn"
        )


def first_then(calls: list[tuple[str, Any]]) -> Callable[[ModelRequest], Reply]:
    """Call these tools for each new user message, then quote results as text."""

    def script(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "user":
            return Reply(text="working", calls=calls)
        return echo_results(request)

    return script


# Tools the engine tests share.


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool(approval="always")
def shell(command: str) -> str:
    """Pretend to run a command."""
    return f"ran {command}"


@tool
def boom() -> str:
    """Always raises."""
    raise RuntimeError("kaboom: the flux capacitor")
