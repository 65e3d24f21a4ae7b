"""Small text helpers shared by the panes: times, durations, one-line previews, and text
from outside made safe to draw."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from typing import Any

from rich.table import Table
from rich.text import Text

# Characters a terminal may act on instead of showing: C0 controls, DEL, C1 controls (CSI
# among them), and the bidirectional overrides that reorder what is shown ("Trojan
# Source"). They are drawn as their escapes (`\x1b`, `\u202e`), never sent raw.
_CONTROL = [*range(0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROL}
_ONE_LINE = str.maketrans(_ESCAPES)
_LINES = str.maketrans({c: e for c, e in _ESCAPES.items() if c not in (0x09, 0x0A)})


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


def counted(n: int, word: str) -> str:
    """`n` and `word`, plural unless `n` is 1: "1 time", "2 times", "0 times"."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def visible(text: str, *, lines: bool = False) -> str:
    """`text` with every control character shown as its escape (`\x1b[31m` reads as
    those characters), so text from a model, a tool, a channel user or a file is drawn,
    never acted on by the terminal. `lines`: newlines and tabs stay as they are."""
    return text.translate(_LINES if lines else _ONE_LINE)


def plain(text: str, style: str = "", *, lines: bool = False) -> Text:
    """`text` as a Rich Text to draw: never read as markup, its control characters shown
    escaped (`visible`)."""
    return Text(visible(text, lines=lines), style=style)


def facts(rows: Iterable[tuple[str, str | Text]]) -> Table:
    """A name and a value a line, as the detail views list what is known: text, never
    markup (a Rich table reads a string as markup)."""
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for name, value in rows:
        table.add_row(plain(name), value if isinstance(value, Text) else plain(value))
    return table


def set_title(widget: Any, title: str) -> None:
    """Give `widget` the border title `title`, drawn as text (Textual reads a string there
    as markup); nothing is redrawn when it is the title shown."""
    if getattr(widget, "_title_text", None) != title:
        widget._title_text = title
        widget.border_title = plain(title)


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
