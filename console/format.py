"""Small text helpers shared by the panes: times, durations, one-line previews."""

from __future__ import annotations

import json
import re
import time
from typing import Any


def clock_time(at: float) -> str:
    """Local wall time of an event, HH:MM:SS."""
    return time.strftime("%H:%M:%S", time.localtime(at))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "…"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"


def age(seconds: float) -> str:
    """How long ago, coarse: 5s, 3m, 2h, 4d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f}{unit}"
    return f"{seconds:.0f}s"


def one_line(value: Any, limit: int = 60) -> str:
    """A value on one line, cut to `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pretty(value: Any) -> str:
    """A value as indented JSON (or the text itself) for detail views."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


_LONG_ID = re.compile(r"([a-z]+_[0-9a-f]{8})[0-9a-f]+")


def short_id(ident: str) -> str:
    """An engine id as a list shows it, like a short git hash: t_33c21d0b1125381b ->
    t_33c21d0b. Detail views show it whole (it is what `agentdeck decide` takes)."""
    match = _LONG_ID.fullmatch(ident)
    return match.group(1) if match else ident
