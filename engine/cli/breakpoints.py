"""`agentdeck break [list|add|rm]`: the room's breakpoints (engine/domain/breakpoints.py),
through the owner's API when the room is owned, else the room opened for this one command
(`add`, `rm`) or read from its store without opening a run (`list`); the same output
either way. `list` is answered off the owner's socket when it can (engine/cli/light.py).

`add` exits 0, or 2 for a breakpoint that cannot be used (an unknown tool or group, a bad
pattern, a thread scope without its thread); `rm` 0, or 2 for no such breakpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.cli.common import EXIT_OK, UsageError, room_client, room_reader, said, subcommands
from engine.cli.light import owner_json
from engine.cli.pause_text import flat
from engine.room import Room

if TYPE_CHECKING:
    from engine.api.client import RoomClient
    from engine.domain.breakpoints import Breakpoint, Scope

COLUMNS = ("id", "kind", "where", "scope", "hits", "last hit", "made by", "made at")
KINDS = ("inference", "call", "result")


def add_parser(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`break` and its subcommands (list when none is given)."""
    sp = command("break", "breakpoints: pause turns before an inference, before a call or "
                 "after a result (list, add, rm)")  # fmt: skip
    sp.add_argument("--json", action="store_true", help="print the models as JSON")
    action = subcommands(sp, "break_action")

    action("list", "every breakpoint: where it pauses, its scope, hits and last hit")
    sp = action("add", "set a breakpoint (stored in execution.db); a turn pauses there as a "
                "call waiting for `agentdeck decide CALL continue|step|cancel`")  # fmt: skip
    sp.add_argument("kind", choices=KINDS,
                    help="inference: before the model is asked; call: before a matching "
                    "call runs; result: after a matching call's result, before the model "
                    "reads it")  # fmt: skip
    sp.add_argument("--tool", help="call, result: only this tool's calls (default: any)")
    sp.add_argument("--pattern", help="call, result: only calls whose arguments match this "
                    "pattern (the rules' patterns; needs --tool)")  # fmt: skip
    sp.add_argument("--scope", choices=["once", "thread", "group", "room"],
                    help="once (the next pause it makes), thread, group or room; default: "
                    "thread with --thread, group with --group, else room")  # fmt: skip
    sp.add_argument("--thread", metavar="ID", help="the thread of a thread (or once) breakpoint")
    sp.add_argument("--group", metavar="G", help="the group of a group breakpoint (chat, task...)")
    sp.add_argument("--reason", default="", help="why it is set (listed with it)")
    sp = action("rm", "remove a breakpoint: no turn pauses at it from now on (the pauses it "
                "made still wait for their decision)")  # fmt: skip
    sp.add_argument("point_id", metavar="ID")


def breakpoints_now(room: Room, args: argparse.Namespace) -> int | None:
    """`break list` answered off the owner's socket (None: the full way)."""
    if (args.break_action or "list") != "list":
        return None
    points = owner_json(room, "breakpoints")
    return None if points is None else _print_list(points, args.json)


async def breakpoints(room: Room, args: argparse.Namespace) -> int:
    action = args.break_action or "list"
    if action == "add":
        return await _add(room, args)
    if action == "rm":
        return await _remove(room, args)
    async with room_reader(room, "break") as client:
        points = await _listed(client)
    return _print_list([p.model_dump(mode="json") for p in points], args.json)


async def _listed(client: RoomClient) -> list[Breakpoint]:
    """The breakpoints, from the owner, a runtime opened here, or a free room's store."""
    from engine.api.reading import RoomReader

    if not isinstance(client, RoomReader):
        return await client.breakpoints()
    # A room nobody owns: read as its runtime would load them (RoomReader answers the
    # operations it knows; the breakpoints are read here from a reader of our own).
    from engine.store import breakpoints as pointed
    from engine.store.reader import open_reader

    reads = await open_reader(client.room)
    if reads is None:  # no database yet: none was ever set
        return []
    try:
        return await pointed.load(reads)
    finally:
        await reads.close()


def _print_list(points: list[dict[str, Any]], as_json: bool) -> int:
    if as_json:
        print(json.dumps(points))
        return EXIT_OK
    if not points:
        print("agentdeck: no breakpoints (`agentdeck break add inference|call|result`)",
              file=sys.stderr)  # fmt: skip
        return EXIT_OK
    print(_table([cells(p) for p in points]))
    return EXIT_OK


async def _add(room: Room, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from engine.api.break_models import NewBreakpoint
    from engine.api.client import Invalid

    scope: Scope = args.scope or ("group" if args.group else "thread" if args.thread else "room")
    if scope == "thread" and not args.thread:
        raise UsageError("--scope thread needs --thread ID")
    if scope == "group" and not args.group:
        raise UsageError("--scope group needs --group G")
    if args.group and scope != "group":
        raise UsageError(f"--group is for a group breakpoint, not a {scope} one")
    if args.thread and scope not in ("thread", "once"):
        raise UsageError(f"--thread is for a thread (or once) breakpoint, not a {scope} one")
    if args.kind == "inference" and (args.tool or args.pattern):
        raise UsageError("an inference breakpoint pauses before any inference: it takes no "
                         "--tool or --pattern")  # fmt: skip
    if args.pattern is not None and not args.tool:
        raise UsageError("--pattern matches one tool's arguments: give --tool too")
    try:
        body = NewBreakpoint(kind=args.kind, tool=args.tool, pattern=args.pattern, scope=scope,
                             thread_id=args.thread, group=args.group, reason=args.reason,
                             made_by="operator")  # fmt: skip
    except ValidationError as exc:
        raise UsageError("; ".join(_said(e) for e in exc.errors())) from None
    async with room_client(room, "break") as client:
        try:
            point = await client.add_breakpoint(body)
        except Invalid as exc:
            raise UsageError(str(exc)) from None
    return said(point, args.json, f"breakpoint {point.id} set: {flat(point.where(), 300)}")


_FLAGS = {"tool": "--tool", "pattern": "--pattern", "thread_id": "--thread", "group": "--group",
          "reason": "--reason"}  # fmt: skip


def _said(error: Any) -> str:
    """One of NewBreakpoint's errors, naming the option it is about."""
    msg = str(error["msg"]).removeprefix("Value error, ")
    loc = error.get("loc") or ()
    return f"{_FLAGS.get(str(loc[0]), str(loc[0]))}: {msg}" if loc else msg


async def _remove(room: Room, args: argparse.Namespace) -> int:
    from engine.api.client import NotFound

    async with room_client(room, "break") as client:
        try:
            removed = await client.remove_breakpoint(args.point_id, "operator")
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    point = removed.breakpoint
    return said(removed, args.json, f"breakpoint {point.id} removed: {flat(point.where(), 300)}")


def cells(point: dict[str, Any]) -> tuple[str, ...]:
    """One breakpoint (its JSON) as the list's columns (COLUMNS)."""
    return (str(point.get("id")), str(point.get("kind")), where(point), scope(point),
            str(point.get("hits", 0)), _when(point.get("last_hit"), "never"),
            str(point.get("made_by")), _when(point.get("made_at")))  # fmt: skip


def where(point: dict[str, Any]) -> str:
    """What it pauses at: `shell 'rm *'`, `any tool`, or `—` (an inference's: each one)."""
    if point.get("kind") == "inference":
        return "—"
    tool = point.get("tool") or "any tool"
    pattern = point.get("pattern")
    return tool if pattern is None else f"{tool} {json.dumps(pattern, ensure_ascii=False)}"


def scope(point: dict[str, Any]) -> str:
    kind = point.get("scope")
    text = {"thread": f"thread {point.get('thread_id')}", "group": f"group {point.get('group')}"}
    said = text.get(str(kind), str(kind))
    if kind == "once":
        if point.get("thread_id"):
            said += f" (thread {point.get('thread_id')})"
        if int(point.get("hits") or 0) >= 1:
            said += ", spent"
    return said


def _when(at: Any, none: str = "—") -> str:
    if not isinstance(at, int | float) or not at:
        return none
    return datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


def _table(rows: list[tuple[str, ...]]) -> str:
    shown = [tuple(flat(c, 80) for c in row) for row in rows]
    widths = [max(len(c) for c in col) for col in zip(COLUMNS, *shown, strict=True)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in [COLUMNS, *shown])  # fmt: skip
