"""Server-sent events, parsed from the lines of a streaming HTTP response.

Both real providers stream over SSE (OpenAI: bare `data:` lines ending with `[DONE]`;
Anthropic: named `event:` lines with JSON `data:`). This is the one small parser they
share, following the WHATWG event-stream rules: fields `event` and `data` (repeated `data`
lines join with a newline), comments (`:` lines, keep-alives) ignored, a blank line ends an
event. `id` and `retry` are accepted and dropped: a model stream is never resumed.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its name (`message` when unnamed) and its data text."""

    event: str
    data: str


async def parse_sse(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    """Yield the events in `lines` (as from `httpx.Response.aiter_lines()`)."""
    event = ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue  # a comment: keep-alive or padding
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:  # a last event without its blank line: lenient servers end this way
        yield SSEEvent(event or "message", "\n".join(data))
