"""`history` and `info`: reading the room, never owning it."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import Any

from engine import __version__
from engine.cli.common import EXIT_OK, UsageError
from engine.room import LOOP_FOLDERS, Room, describe, owner_of, shown
from engine.store.select import display, store_url


async def history(room: Room, args: argparse.Namespace) -> int:
    from engine.api.history import Filters, History, HistoryError, parse_time
    from engine.cli.history_text import hit_line, turn_line

    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    try:
        filters = Filters(
            status=args.status, origin=args.origin, group=args.group, thread=args.thread,
            tool=args.tool, since=parse_time(args.since) if args.since else None,
            until=parse_time(args.until) if args.until else None,
        )  # fmt: skip
        if args.turn and (args.search or args.after or not filters.empty):
            raise UsageError("--turn shows one turn; it takes no filters, --search or --after")
        if args.threads and (args.turn or args.search is not None
                             or not replace(filters, group=None).empty):  # fmt: skip
            raise UsageError("--threads lists threads; of the filters it takes only --group")
        async with History(room) as history:
            if args.threads:
                page = await history.threads(group=args.group, after=args.after,
                                             limit=args.limit)  # fmt: skip
                return _print_threads(await history.tree(page.items), page.next, args.json)
            if args.turn:
                return _print_turn(await history.turn(args.turn), args.json)
            if args.search is not None:
                page = await history.search(args.search, filters, after=args.after,
                                            limit=args.limit)  # fmt: skip
            else:
                page = await history.turns(filters, after=args.after, limit=args.limit)
    except HistoryError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(page.items))
        return EXIT_OK
    for item in page.items:
        print(hit_line(item) if args.search is not None else turn_line(item))
    if page.next:
        print(f"-- more: --after {page.next}", file=sys.stderr)
    return EXIT_OK


def _print_threads(rows: list[dict[str, Any]], after: str | None, as_json: bool) -> int:
    from engine.cli.history_text import thread_line

    if as_json:
        print(json.dumps(rows))
        return EXIT_OK
    for row in rows:
        print(thread_line(row))
    if after:
        print(f"-- more: --threads --after {after}", file=sys.stderr)
    return EXIT_OK


def _print_turn(detail: dict[str, Any], as_json: bool) -> int:
    from engine.cli.history_text import turn_lines

    print(json.dumps(detail) if as_json else "\n".join(turn_lines(detail)))
    return EXIT_OK


async def info(room: Room, args: argparse.Namespace) -> int:
    from engine.config import load_config
    from engine.providers.select import make_provider
    from engine.shell.sandbox import Sandbox

    config = load_config(room.config)
    choice = make_provider(config)
    print(f"agentdeck {__version__}")
    print(f"room:      {shown(room.path)}")
    url = store_url(config.store)
    if url is not None:  # never its password: display() leaves it out
        print(f"database:  {display(url)}")
    else:
        print(f"database:  {shown(room.db)}{'' if room.db.exists() else ' (not created yet)'}")
    print(f"config:    {shown(room.config)}"
          + ("" if room.config.exists() else " (not present; defaults)"))  # fmt: skip
    print(f"workspace: {shown(room.workspace)}")
    for name in LOOP_FOLDERS:  # what the pulse loop watches
        folder = room.path / name
        files = sum(1 for f in folder.iterdir() if f.is_file()) if folder.is_dir() else None
        state = "not made yet: a runtime makes it" if files is None else f"{files} files"
        print(f"{name + ':':<10} {shown(folder)}/ ({state})")
    print(f"model:     {choice.provider.name}:{choice.provider.model}")
    print(f"key from:  {choice.key_source}")
    print(f"store:     synchronous={config.store.synchronous}")
    box = Sandbox(config.sandbox.shell, config.sandbox.network, room.workspace)
    box.start(temporary=False)
    print(f"sandbox:   shell {box.describe()}"
          + ("; every shell call asks" if box.missing else ""))  # fmt: skip
    owner = owner_of(room)
    print(f"owner:     {describe(owner) if owner else 'none (the room is free)'}")
    print(
        f"api:       {shown(room.socket)}"
        + ("" if room.socket.exists() else " (not served)")
        + (f", and {config.server.listen} with {shown(room.token)}" if config.server.listen else "")
    )
    print("another:   agentdeck --room DIR, or AGENT_ROOM=DIR")
    return EXIT_OK
