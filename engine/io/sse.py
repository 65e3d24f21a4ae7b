"""Server-sent events, parsed from the bytes (or the lines) of a streaming HTTP response.

Both real providers stream over SSE (OpenAI: bare `data:` lines ending with `[DONE]`;
Anthropic: named `event:` lines with JSON `data:`), and so does the room's own API (its
event stream). This is the one small parser they share, following the WHATWG
event-stream rules: fields `event`, `data` (repeated `data` lines join with a newline) and
`id` (the last one seen stays in effect, as `Last-Event-ID` does), comments (`:` lines,
keep-alives) ignored, a blank line ends an event. `retry` is accepted and dropped.

A stream is input from another process, so a line and an event have a size limit:
`sse_lines` splits bytes into lines without holding more than the limit (httpx's
`aiter_lines()` holds a whole line, however long, before it yields it).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass

DEFAULT_LIMIT = 8 * 1024 * 1024  # bytes of one line, and of one event's data


class SSEError(ValueError):
    """A stream sent a line or an event longer than its limit."""


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its name (`message` when unnamed) and its data text."""

    event: str
    data: str
    id: str = ""  # the last event id in effect when it was dispatched


async def sse_lines(
    chunks: AsyncIterable[bytes], limit: int = DEFAULT_LIMIT
) -> AsyncGenerator[str, None]:
    """The lines in `chunks` (as from `httpx.Response.aiter_bytes()`), without their ends.

    CRLF, LF or CR ends a line, also when a read splits a CRLF. A line longer than
    `limit` bytes raises SSEError as soon as that much of it has arrived.
    """
    buffer = bytearray()
    async for chunk in chunks:
        seen = len(buffer) - buffer.endswith(b"\r")  # the partial line has no end before
        buffer += chunk
        last = len(buffer) - buffer.endswith(b"\r")  # a CR at the end may begin a CRLF
        cut = max(buffer.rfind(b"\n", seen, last), buffer.rfind(b"\r", seen, last)) + 1
        if cut:
            for line in buffer[:cut].splitlines():  # bytes split at CRLF, LF and CR only
                if len(line) > limit:
                    raise SSEError(_too_long("a line", limit))
                yield line.decode("utf-8", "replace")
            del buffer[:cut]
        if len(buffer) - buffer.endswith(b"\r") > limit:
            raise SSEError(_too_long("a line", limit))
    if line := buffer.removesuffix(b"\r"):
        yield line.decode("utf-8", "replace")


async def parse_sse(
    lines: AsyncIterable[str], limit: int = DEFAULT_LIMIT
) -> AsyncGenerator[SSEEvent, None]:
    """Yield the events in `lines` (from `sse_lines`, or `httpx.Response.aiter_lines()`).

    A line, or an event's data, longer than `limit` raises SSEError.
    """
    event, last_id = "", ""
    data: list[str] = []
    size = 0
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if len(line) > limit:
            raise SSEError(_too_long("a line", limit))
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data), last_id)
            event, data, size = "", [], 0
            continue
        if line.startswith(":"):
            continue  # a comment: keep-alive or padding
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            event = value
        elif name == "data":
            size += len(value) + 1
            if size > limit:
                raise SSEError(_too_long("an event", limit))
            data.append(value)
        elif name == "id" and "\0" not in value:
            last_id = value
    if data:  # a last event without its blank line: lenient servers end this way
        yield SSEEvent(event or "message", "\n".join(data), last_id)


def _too_long(what: str, limit: int) -> str:
    return f"{what} longer than {limit} bytes"
