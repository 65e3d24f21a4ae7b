"""`agentdeck diff TURN_A TURN_B`: two turns side by side (engine/domain/turn_diff.py).

Read from the room's history as `agentdeck history` reads it (engine/api/diffs.py): the
same whether someone owns the room or nobody does, never opening a run. `--json` prints the
`TurnDiff` (what `GET /v1/diff` answers); otherwise a header with both turns' facts, a `~`
before each that differs, then the rows, each marked `=` the same, `~` changed (a line
under a call says what changed), `<` only in A, `>` only in B. Text from models and tools is
drawn on one line, its control characters as spaces, cut to the terminal's width. Exit 0;
2 for a turn the room does not have.
"""

from __future__ import annotations

import argparse
import shutil
import time
import unicodedata
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from engine.cli.common import EXIT_OK
from engine.room import Room

if TYPE_CHECKING:
    from engine.domain.turn_diff import Side, TurnDiff

LABEL = 10  # the width of a row's label: a fact's name, a row's kind or tool
MIN_WIDTH = 60
SAID = {"same": "same", "changed": "changed", "only_a": "only in A", "only_b": "only in B"}
# A header line per fact: its name and the facts it says (a `~` when one differs).
FACT_LINES = (("thread", ("group",)), ("model", ("model",)), ("strategy", ("strategy",)),
              ("outcome", ("status", "reason")), ("started", ()), ("time", ()),
              ("tokens", ("input_tokens", "output_tokens", "cached_tokens")),
              ("cost", ("cost", "unpriced")), ("steps", ("steps", "rounds", "calls")),
              ("asked", ("text",)), ("answer", ("answer",)))  # fmt: skip


def add_parser(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`diff` and its options."""
    sp = command("diff", "two turns side by side (a replay and its original, or any two): "
                 "messages, calls, arguments, results, decisions, tokens, cost, time")  # fmt: skip
    sp.add_argument("turn_a", metavar="TURN_A")
    sp.add_argument("turn_b", metavar="TURN_B")
    sp.add_argument("--json", action="store_true", help="the diff as JSON (GET /v1/diff's)")


async def diff(room: Room, args: argparse.Namespace) -> int:
    from engine.api.diffs import read_diff

    found = await read_diff(room, args.turn_a, args.turn_b)
    if args.json:
        print(found.model_dump_json())
        return EXIT_OK
    width = max(MIN_WIDTH, shutil.get_terminal_size((100, 24)).columns)
    for line in lines(found, width):
        print(line)
    return EXIT_OK


# -- text -------------------------------------------------------------------------------------


def _cells(c: str) -> int:
    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def flat(text: Any) -> str:
    """`text` on one line, every control character a space."""
    joined = " ".join(str("" if text is None else text).split())
    return "".join(c if c.isprintable() else " " for c in joined)


def cut(text: str, width: int) -> str:
    """`text` (one line) in `width` terminal cells, padded; cut with an ellipsis."""
    used, out = 0, []
    total = sum(_cells(c) for c in text)
    for c in text:
        cells = _cells(c)
        if total > width and used + cells > width - 1:
            out.append("…")
            used += 1
            break
        out.append(c)
        used += cells
    return "".join(out) + " " * max(0, width - used)


def _pair(mark: str, label: str, a: str, b: str, column: int) -> str:
    line = f"{mark} {cut(flat(label), LABEL)} {cut(flat(a), column)} │ {cut(flat(b), column)}"
    return line.rstrip()


def _seconds(value: float | None) -> str:
    if value is None:
        return "not ended"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.1f}s"


def _clock(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at)) if at else "-"


def _fact(side: Side, name: str) -> str:
    if name == "thread":
        return f"{side.thread_id} ({side.group or '?'}, {side.origin or '?'})"
    if name == "outcome":
        return side.status + (f"/{side.reason}" if side.reason else "")
    if name == "started":
        return _clock(side.started_at)
    if name == "time":
        return _seconds(side.duration)
    if name == "tokens":
        cached = f" ({side.cached_tokens} cached)" if side.cached_tokens else ""
        return f"{side.input_tokens} in{cached}, {side.output_tokens} out"
    if name == "cost":
        return side.spent
    if name == "steps":
        return f"{side.steps} ({side.rounds} inferences, {side.calls} calls)"
    if name == "asked":
        return side.text
    return str(getattr(side, name) or "-")


def lines(found: TurnDiff, width: int) -> Iterator[str]:
    """The diff as text `width` cells wide."""
    column = (width - LABEL - 5) // 2
    a, b = found.a, found.b
    yield _pair(" ", "turn", f"A {a.turn_id}", f"B {b.turn_id}", column)
    differ = set(found.facts_changed) | {n for n in ("text", "answer")
                                         if getattr(a, n) != getattr(b, n)}  # fmt: skip
    for name, facts in FACT_LINES:
        mark = "~" if differ & set(facts) else " "
        yield _pair(mark, name, _fact(a, name), _fact(b, name), column)
    counts = found.counts()
    said = ", ".join(f"{counts[m]} {SAID[m]}" for m in SAID)
    yield ""
    yield cut(f"rows: {said}   (= same  ~ changed  < only in A  > only in B)", width).rstrip()
    for row in found.rows:
        a_text, b_text = (e.summary() if e is not None else "" for e in (row.a, row.b))
        yield _pair(row.symbol, row.label, a_text, b_text, column)
        if row.mark == "changed" and row.kind == "call":
            yield cut(f"{' ' * (LABEL + 2)} {flat(row.what_changed())}", width).rstrip()
