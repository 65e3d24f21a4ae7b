"""`agentdeck audit`: every decision of the room, oldest first (engine/domain/audit.py says
what an entry is), through the owner's API when the room is owned, else read from its
store without opening a run; the same output either way.

Printed a page at a time as it is read (a room may hold hundreds of thousands), as a table
on a terminal and JSON lines otherwise, or as `--format` says: `table`, `jsonl` (one
entry's JSON a line, what `GET /v1/audit` answers), `csv` (a header, then one row an
entry). Exit 0; 2 for a time, a position or a filter that cannot be read, or no room at
the path.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_OK, UsageError, room_reader
from engine.room import Room

if TYPE_CHECKING:
    from engine.domain.audit import AuditEntry

FORMATS = ("table", "jsonl", "csv")
COLUMNS = (("when", 19), ("decided by", 32), ("action", 6), ("status", 10), ("tool", 10),
           ("call", 14), ("thread", 14))  # fmt: skip


def add_parser(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`audit` and its options."""
    sp = command("audit", "every decision of the room, oldest first: who (an operator, a "
                 "rule, the deadline), when, on what, and what became of it")  # fmt: skip
    sp.add_argument("--since", metavar="WHEN", help="ISO date/time, or an age: 30m, 2h, 3d")
    sp.add_argument("--thread", metavar="ID", help="only the decisions of this thread")
    sp.add_argument("--decided-by", metavar="WHO",
                    help="only those decided by WHO, as an entry names it: an operator, "
                         "deadline, 'rule 12', 'agentdeck.toml rule <fingerprint>'")  # fmt: skip
    sp.add_argument("--kind", choices=["decision", "rule"],
                    help="decision: the decisions table's rows; rule: rules' verdicts at the gate")  # fmt: skip
    sp.add_argument("--format", choices=FORMATS,
                    help="table (the default on a terminal), jsonl (the default otherwise), csv")  # fmt: skip
    sp.add_argument("--after", metavar="CURSOR",
                    help="only entries after this one (an entry's `cursor`)")  # fmt: skip


async def audit(room: Room, args: argparse.Namespace) -> int:
    from engine.api.audit import pages
    from engine.domain.audit import AuditError, parse_cursor, parse_when

    since = None
    try:
        if args.since is not None:
            since = parse_when(args.since)
    except AuditError as exc:
        raise UsageError(f"--since: {exc}") from None
    try:
        if args.after is not None:
            parse_cursor(args.after)
    except AuditError as exc:
        raise UsageError(f"--after: {exc}") from None
    for name in ("thread", "decided_by"):
        if getattr(args, name) == "":
            raise UsageError(f"--{name.replace('_', '-')}: give a value")
    if not room.path.exists():  # a mistyped --room is no room without decisions
        raise UsageError(f"no room at {room.path} (--room DIR, or AGENT_ROOM)")
    form = args.format or ("table" if sys.stdout.isatty() else "jsonl")
    out = _Out(form, screen=sys.stdout.isatty())
    async with room_reader(room, "audit") as client:
        try:
            async for entries in pages(client, since=since, thread=args.thread,
                                       decided_by=args.decided_by, kind=args.kind,
                                       after=args.after):  # fmt: skip
                out.write(entries)
            out.write([])  # a CSV's header, a table's, when nothing was found
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            _quiet_stdout()
            return EXIT_OK
    if out.count == 0:
        print("agentdeck: no decisions" + (" match" if _filtered(args) else " in this room"),
              file=sys.stderr)  # fmt: skip
    return EXIT_OK


def _filtered(args: argparse.Namespace) -> bool:
    return any(getattr(args, n) is not None
               for n in ("since", "thread", "decided_by", "kind", "after"))  # fmt: skip


class _Out:
    """Entries printed in one format, a page at a time (a header before the first)."""

    def __init__(self, form: str, screen: bool) -> None:
        self.form, self.screen, self.count, self._started = form, screen, 0, False

    def write(self, entries: list[AuditEntry]) -> None:
        from engine.domain.audit import csv_text, json_line

        head = not self._started
        self._started = True
        if self.form == "jsonl":
            text = "".join(json_line(e) + "\n" for e in entries)
        elif self.form == "csv":
            text = csv_text(entries, header=head)
            if self.screen:  # a terminal runs control characters: shown as escapes there
                text = _visible(text)
        else:
            text = "".join(line + "\n" for line in table(entries, header=head))
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()
        self.count += len(entries)


def table(entries: Iterable[AuditEntry], header: bool = False) -> list[str]:
    """Entries as lines of a table, every text on one line and printable."""
    lines = []
    if header:
        lines.append(" ".join(f"{name:<{width}}" for name, width in COLUMNS) + " why")
    for e in entries:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.recorded_at))
        cells = (when, e.decided_by, e.action, e.status, e.tool or "-", e.call_id,
                 e.thread_id or "-")  # fmt: skip
        row = " ".join(f"{_line(str(c), w):<{w}}" for c, (_, w) in zip(cells, COLUMNS, strict=True))
        lines.append(f"{row} {_line(_why(e), 200)}".rstrip())
    return lines


def _why(e: AuditEntry) -> str:
    parts = []
    if e.edited:
        parts.append("edited arguments")
    if e.use_result:
        parts.append("with a result")
    if e.sandbox not in (None, "default"):
        parts.append(f"sandbox: {e.sandbox}")
    if e.remember:
        parts.append(f"remembered ({e.remember}" + (f": {e.pattern})" if e.pattern else ")"))
    elif e.kind == "rule" and e.pattern:
        parts.append(f"pattern {e.pattern}")
    parts += [t for t in (e.reason, e.note) if t]
    return "; ".join(parts)


def _line(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters, as text (no control characters)."""
    flat = "".join(c if c.isprintable() else " " for c in " ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _visible(text: str) -> str:
    """Control characters but the CSV's own line breaks as escapes (\\x1b), for a terminal."""
    return "".join(c if c.isprintable() or c in "\r\n" else repr(c)[1:-1] for c in text)


def _quiet_stdout() -> None:
    """After a closed pipe: stdout to /dev/null, so the interpreter's last flush is quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
