"""Server-sent events, parsed from the lines of a streaming HTTP response.

Both real providers stream over SSE (OpenAI: bare `data:` lines ending with `[DONE]`;
Anthropic: named `event:` lines with JSON `data:`), and so does the room's own API (its
event stream). This is the one small parser they share, following the WHATWG
event-stream rules: fields `event`, `data` (repeated `data` lines join with a newline) and
`id` (the last one seen stays in effect, as `Last-Event-ID` does), comments (`:` lines,
keep-alives) ignored, a blank line ends an event. `retry` is accepted and dropped.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its name (`message` when unnamed) and its data text."""

    event: str
    data: str
    id: str = ""  # the last event id in effect when it was dispatched


async def parse_sse(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    """Yield the events in `lines` (as from `httpx.Response.aiter_lines()`)."""
    event, last_id = "", ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data), last_id)
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
        elif name == "id" and "\0" not in value:
            last_id = value
    if data:  # a last event without its blank line: lenient servers end this way
        yield SSEEvent(event or "message", "\n".join(data), last_id)
