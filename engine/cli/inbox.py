"""`agentdeck inbox`: every room on this machine and every waiting call of them, needs
input first (engine/api/machine.py says the order), whichever room the command names.

The rooms are those the machine's registry holds (engine/rooms_registry.py: every console
hosting a room, `agentdeck run` and `agentdeck start` register theirs while they serve);
each serving room is read through its own owner's socket. A room whose owner died shows
`owner gone` (its lock is free), and `--prune` removes such entries first. `--json` prints
the `MachineInbox`. Text from models and tools is printed on one line, control characters
as spaces. Exit 0, with or without calls.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.cli.common import EXIT_OK
from engine.cli.diff import cut, flat
from engine.room import Room, shown

if TYPE_CHECKING:
    from engine.api.machine import InboxCall, MachineInbox, MachineRoom

MIN_WIDTH = 80


def add_parser(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`inbox` and its options."""
    sp = command("inbox", "every room on this machine and their waiting calls, needs input "
                 "first (the nearest deadline, then the longest waiting)")  # fmt: skip
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--prune", action="store_true",
                    help="first remove the entries of rooms whose owner is gone")  # fmt: skip


async def inbox(room: Room, args: argparse.Namespace) -> int:
    import anyio

    from engine import rooms_registry
    from engine.api.machine import read_machine

    if args.prune:
        removed = await anyio.to_thread.run_sync(rooms_registry.prune)
        said = ", ".join(flat(str(r.room)) for r in removed) or "none was gone"
        print(f"agentdeck: pruned {len(removed)} room{'' if len(removed) == 1 else 's'} "
              f"whose owner is gone ({said})", file=sys.stderr)  # fmt: skip
    view = await read_machine()
    for problem in view.problems:  # a file in the registry that is not an entry: left alone
        print(f"agentdeck: {flat(problem)}", file=sys.stderr)
    width = max(MIN_WIDTH, shutil.get_terminal_size((100, 24)).columns)
    lines = [view.model_dump_json(indent=2)] if args.json else text(view, time.time(), width)
    for line in lines:
        print(line)
    return EXIT_OK


def text(view: MachineInbox, now: float, width: int) -> list[str]:
    """The rooms, then their calls needs input first, each cut to `width` cells."""
    if not view.rooms:
        return ["no room on this machine is registered: an owner registers its room while it "
                "serves it (agentdeck run, agentdeck start, or a console hosting it)"]  # fmt: skip
    lines = [summary(view), "", room_header(width)]
    for r in view.rooms:
        lines += room_lines(r, now, width)
    if not view.calls:
        lines += ["", "no call waits for the operator in any room"]
        return [line.rstrip() for line in lines]
    lines += ["", f"{len(view.calls)} waiting, needs input first (the nearest deadline, then "
              "the longest waiting):"]  # fmt: skip
    for n, call in enumerate(view.calls, 1):
        lines += call_lines(n, call, now, width)
    first = view.calls[0]
    lines += ["", f"decide: agentdeck --room {flat(shown(Path(first.room)))} decide CALL "
              "approve|cancel   (or in the console: o, the rooms and their inbox)"]  # fmt: skip
    return [line.rstrip() for line in lines]


def summary(view: MachineInbox) -> str:
    rooms = view.rooms
    serving = sum(r.owner == "serving" for r in rooms)
    parts = [f"{len(rooms)} room{'' if len(rooms) == 1 else 's'}", f"{serving} serving"]
    gone = sum(r.owner == "owner gone" for r in rooms)
    if gone:
        parts.append(f"{gone} owner gone (agentdeck inbox --prune forgets them)")
    if other := len(rooms) - serving - gone:
        parts.append(f"{other} not serving")
    counts = [sum(getattr(r, k) or 0 for r in rooms) for k in ("running", "waiting", "decisions")]
    return " · ".join([*parts, f"{counts[0]} running, {counts[1]} waiting, {counts[2]} to decide"])


COLUMNS = ((6, "kind"), (8, "pid"), (14, "owner"), (8, "running"), (8, "waiting"),
           (8, "decide"), (9, "since"))  # fmt: skip


def room_header(width: int) -> str:
    room = width - sum(w + 1 for w, _ in COLUMNS)
    return cut("room", room) + "".join(" " + cut(name, w) for w, name in COLUMNS)


def room_lines(r: MachineRoom, now: float, width: int) -> list[str]:
    room = width - sum(w + 1 for w, _ in COLUMNS)
    cells = (r.kind, str(r.pid), r.owner, *(_count(getattr(r, k)) for k in
             ("running", "waiting", "decisions")), age(now - r.started_at))  # fmt: skip
    line = cut(flat(r.label), room) + "".join(
        " " + cut(flat(c), w) for (w, _), c in zip(COLUMNS, cells, strict=True)
    )
    return [line, "    " + cut(flat(r.why), width - 4)] if r.why else [line]


def call_lines(n: int, entry: InboxCall, now: float, width: int) -> list[str]:
    c = entry.call
    waits = f"waiting {age(now - c.since)}"
    if c.deadline_at is not None:
        then = "approved" if c.on_deadline == "approve" else "cancelled"
        waits += f", {then} in {age(c.deadline_at - now)} unless decided"
    what = "review" if c.awaiting == "review" else c.tool
    head = f"{n:>3}. {flat(entry.label)}  {c.call_id}  {flat(what)} on {flat(c.thread_id)}"
    args = json.dumps(c.args, ensure_ascii=False)
    return [cut(f"{head}, {waits}", width), "     " + cut(flat(args), width - 5)]


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def age(seconds: float) -> str:
    """How long, coarse: 5s, 3m, 2h, 4d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
