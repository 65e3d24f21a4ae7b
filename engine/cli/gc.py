"""`agentdeck gc`: prune finished turns now, as `[retention]` says (or `--days`, `--gb`).

Through the owner's API when the room is owned (safe while it runs turns: a pass prunes a
batch per transaction through the owner's one writer); else the room is opened here for the
pass. `--dry-run` says what would go and changes nothing.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

from engine.cli.common import EXIT_OK, UsageError, room_client
from engine.room import Room


def add_parser(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`gc`, made by the cli's `command(name, help)`."""
    sp = command("gc", "prune finished turns' steps and events as [retention] says; "
                 "their summaries and decisions stay")  # fmt: skip
    sp.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    sp.add_argument("--days", type=float, metavar="N",
                    help="finished turns older than N days (this time, over [retention] days)")  # fmt: skip
    sp.add_argument("--gb", type=float, metavar="N",
                    help="the oldest finished turns while the store uses more than N GB")  # fmt: skip
    sp.add_argument("--vacuum", action="store_true",
                    help="give all freed space back to the disk (a room made before retention: "
                    "rewrites execution.db, holding the room's writes meanwhile)")  # fmt: skip
    sp.add_argument("--json", action="store_true")


async def gc(room: Room, args: argparse.Namespace) -> int:
    for name in ("days", "gb"):
        value = getattr(args, name)
        if value is not None and not (0 < value < math.inf):
            raise UsageError(f"--{name} {value}: give a number above 0")
    if args.dry_run and args.vacuum:
        raise UsageError("--dry-run changes nothing: it takes no --vacuum")
    async with room_client(room, "gc") as client:
        report = await client.gc(dry_run=args.dry_run, vacuum=args.vacuum, days=args.days,
                                 gb=args.gb)  # fmt: skip
    if args.json:
        print(report.model_dump_json(indent=2))
        return EXIT_OK
    for line in report_lines(report):
        print(line)
    return EXIT_OK


def report_lines(report: object) -> list[str]:
    """A pass as a few lines of text (`GcReport`, engine/domain/retention.py)."""
    from engine.domain.retention import GcReport

    assert isinstance(report, GcReport)
    r = report
    limits = " and ".join(x for x in (
        f"finished more than {r.days:g} days ago" if r.days is not None else "",
        f"the oldest while the store uses more than {r.gb:g} GB" if r.gb is not None else "",
    ) if x)  # fmt: skip
    if not limits:
        return ["nothing to prune: [retention] in agentdeck.toml sets no days or gb, and "
                "neither --days nor --gb was given"]  # fmt: skip
    verb = "would prune" if r.dry_run else "pruned"
    out = [f"{verb} {r.turns} turn{'s' if r.turns != 1 else ''} ({limits})"]
    if r.turns:
        span = f"ended {_day(r.oldest_ended_at)} .. {_day(r.newest_ended_at)}"
        out.append(f"  {span}: {r.steps} steps and {r.events} events deleted, {r.calls} calls "
                   f"kept without results, {r.messages} conversation entries' outputs; "
                   f"about {size(r.freed_estimate)}")  # fmt: skip
    b = r.before
    if r.after is None:
        out.append(f"  store: {size(b.file_bytes)} on disk, its data {size(b.used_bytes)}")
    else:
        a = r.after
        out.append(f"  store: {size(b.file_bytes)} -> {size(a.file_bytes)} on disk, its data "
                   f"{size(b.used_bytes)} -> {size(a.used_bytes)}"
                   + (" (vacuumed)" if r.vacuumed else ""))  # fmt: skip
        if b.bus_bytes or a.bus_bytes:
            out.append(f"  bus: {size(b.bus_bytes)} -> {size(a.bus_bytes)}, "
                       f"{r.bus_events} events deleted")  # fmt: skip
    if r.note:
        out.append(f"  note: {r.note}")
    return out


def size(n: int) -> str:
    """Bytes as a person reads them: 512 B, 4.1 KB, 12.3 MB, 2.00 GB."""
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}" if unit == "GB" else f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _day(at: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(at)) if at else "-"
