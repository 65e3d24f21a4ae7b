"""`agentdeck channels`, `agentdeck deliveries [list|retry|drop]` and `agentdeck rooms`:
the room's loops and channels, its outbound deliveries, and the rooms of its bus. Through
the owner's API when the room is owned, else the room opened for this one command (whose
loops do not run: every channel reads `stopped`, and a retry or drop is refused).

Exit codes: 0 done; 2 for no such delivery (or bad usage); 1 for a delivery in a state
that cannot be retried or dropped, or no delivery worker to send it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from engine.api.client import NotFound
from engine.cli.common import EXIT_OK, UsageError, room_client
from engine.room import Room

if TYPE_CHECKING:
    from engine.api.models import ChannelsView, DeliveryRow, LoopState, RoomOverview

STATES = ("pending", "retrying", "sent", "dead", "dropped")
LOOP_COLUMNS = ("name", "loop", "kind", "group", "state", "last ok", "errors", "received",
                "rejected", "lag", "last error")  # fmt: skip
DELIVERY_COLUMNS = ("id", "state", "channel", "thread", "turn", "tries", "created", "sent",
                    "next try", "last error", "text")  # fmt: skip
ROOM_COLUMNS = ("name", "running", "waiting", "owner", "updated", "path")


def add_parsers(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The three commands, made by the main parser's `command(name, help)`."""

    def sub(name: str, help: str) -> argparse.ArgumentParser:
        sp = command(name, help)
        sp.add_argument("--json", action="store_true", help="print the models as JSON")
        return sp

    sub("channels", "the room's loops and channels, their states, and deliveries by state")
    sp = sub("deliveries", "the answers owed to channels; retry or drop a dead one")
    sp.add_argument("action", nargs="?", choices=["list", "retry", "drop"], default="list",
                    help="list (the default), retry ID (a dead one), drop ID (dead or retrying)")  # fmt: skip
    sp.add_argument("delivery_id", nargs="?", help="retry, drop: the delivery's id")
    sp.add_argument("--state", choices=STATES, help="list only those in this state")
    sp.add_argument("--limit", type=int, default=50, help="how many, newest first (default 50)")
    sub("rooms", "every room on the machine's bus, with its running and waiting turns")


async def channels(room: Room, args: argparse.Namespace) -> int:
    async with room_client(room, "channels") as client:
        view = await client.channels()
    if args.json:
        print(json.dumps(view.model_dump(mode="json")))
        return EXIT_OK
    print(channels_text(view, time.time()))
    return EXIT_OK


def channels_text(view: ChannelsView, now: float) -> str:
    rows = [loop_cells(s, now) for s in [*view.loops, *view.channels]]
    counts = "  ".join(f"{s} {view.deliveries.get(s, 0)}" for s in STATES)
    worker = "" if view.delivering else " (the delivery worker is not running)"
    lines = [table(LOOP_COLUMNS, rows), "", f"deliveries: {counts}{worker}"]
    if not view.channels:
        lines.append("no channels (channels.toml, hooks.toml in the room)")
    return "\n".join(lines)


def loop_cells(s: LoopState, now: float) -> tuple[str, ...]:
    where = " ".join(f"{k}={v}" for k, v in s.detail.items())
    error = s.last_error or ""
    last = "—" if s.kind == s.loop else ago(s.last_ok, now)  # a loop row has no last poll
    return (s.name, s.loop, s.kind, s.group or "—", s.state, last, str(s.errors),
            str(s.received), str(s.rejected), "—" if s.lag is None else f"{s.lag:.1f}s",
            error if error or not where else where)  # fmt: skip


async def deliveries(room: Room, args: argparse.Namespace) -> int:
    if args.action in ("retry", "drop"):
        return await _operate(room, args)
    if args.delivery_id is not None:
        raise UsageError("deliveries lists them: give no ID (or: retry ID, drop ID)")
    if not 1 <= args.limit <= 1000:
        raise UsageError(f"--limit {args.limit}: give 1 to 1000")
    async with room_client(room, "deliveries") as client:
        found = await client.deliveries(args.state, args.limit)
    if args.json:
        print(json.dumps([d.model_dump(mode="json") for d in found]))
        return EXIT_OK
    if not found:
        which = f" {args.state}" if args.state else ""
        print(f"agentdeck: no{which} deliveries", file=sys.stderr)
        return EXIT_OK
    now = time.time()
    print(table(DELIVERY_COLUMNS, [delivery_cells(d, now) for d in found]))
    return EXIT_OK


def delivery_cells(d: DeliveryRow, now: float) -> tuple[str, ...]:
    due = "—" if d.state not in ("pending", "retrying") else in_(d.next_at, now)
    text = d.text if len(d.text) <= 40 else d.text[:39] + "…"
    return (str(d.id), d.state, d.channel, d.thread_id, d.turn_id, str(d.tries),
            when(d.created_at), when(d.sent_at), due, (d.last_error or "")[:60], text)  # fmt: skip


async def _operate(room: Room, args: argparse.Namespace) -> int:
    if args.delivery_id is None or not args.delivery_id.isdigit():
        raise UsageError(f"deliveries {args.action} needs the delivery's ID (a number; "
                         "`agentdeck deliveries --state dead` lists them)")  # fmt: skip
    outbox_id = int(args.delivery_id)
    async with room_client(room, "deliveries") as client:
        try:
            if args.action == "retry":
                row = await client.retry_delivery(outbox_id)
            else:
                row = await client.drop_delivery(outbox_id)
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(row.model_dump(mode="json")))
    else:
        done = "sent again" if args.action == "retry" else "dropped"
        print(f"delivery {row.id} ({row.channel}, turn {row.turn_id}): {row.state}, {done}")
    return EXIT_OK


async def rooms(room: Room, args: argparse.Namespace) -> int:
    async with room_client(room, "rooms") as client:
        found = await client.rooms()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in found]))
        return EXIT_OK
    if not found:
        print("agentdeck: no room on the bus yet (a room is on it once its loops ran)",
              file=sys.stderr)  # fmt: skip
        return EXIT_OK
    print(table(ROOM_COLUMNS, [room_cells(r) for r in found]))
    return EXIT_OK


def room_cells(r: RoomOverview) -> tuple[str, ...]:
    owner = "—" if r.pid is None else f"pid {r.pid}" + ("" if r.alive else " (gone)")
    return (r.name + (" *" if r.this else ""), str(r.running), str(r.waiting), owner,
            when(r.updated_at), r.room)  # fmt: skip


def when(at: float | None) -> str:
    return "—" if at is None else datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


def ago(at: float | None, now: float) -> str:
    if at is None:
        return "never"
    seconds = max(0.0, now - at)
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago"


def in_(at: float, now: float) -> str:
    return "now" if at <= now else f"in {at - now:.0f}s"


def table(columns: Sequence[str], rows: list[tuple[str, ...]]) -> str:
    one_line = [tuple(c.replace("\n", "⏎") for c in row) for row in rows]
    widths = [max(len(c) for c in col) for col in zip(columns, *one_line, strict=True)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in [tuple(columns), *one_line])  # fmt: skip
