"""`agentdeck instructions [THREAD]`: what a new turn on the thread is told, part by part;
`--set TEXT`, `--file PATH` (- for stdin) or `--clear` change the thread's own part.
Through the owner's API when the room is owned, else the room opened for this command.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli.common import EXIT_OK, UsageError, room_client
from engine.cli.pause_text import flat
from engine.room import Room


def add_parser(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("thread_id", metavar="THREAD", nargs="?", default="chat:main",
                    help="the thread (default chat:main)")  # fmt: skip
    change = sp.add_mutually_exclusive_group()
    change.add_argument("--set", metavar="TEXT", help="set the thread's own instructions")
    change.add_argument("--file", metavar="PATH", help="... from a file (- reads stdin)")
    change.add_argument("--clear", action="store_true", help="the thread has none of its own")
    sp.add_argument("--json", action="store_true")


def _new_text(args: argparse.Namespace) -> tuple[bool, str | None]:
    """Whether the command changes the thread's own part, and to what."""
    if args.clear:
        return True, None
    if args.set is not None:
        return True, args.set
    if args.file is not None:
        try:
            text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--file {args.file}: cannot be read ({exc})") from None
        return True, text
    return False, None


async def instructions(room: Room, args: argparse.Namespace) -> int:
    changes, text = _new_text(args)
    async with room_client(room, "cli") as client:
        if changes:
            told = await client.set_instructions(args.thread_id, text)
        else:
            told = await client.instructions(args.thread_id)
    if args.json:
        print(told.model_dump_json(indent=2))
        return EXIT_OK
    print(f"{flat(told.thread_id, 120)} (group {told.group}): "
          + (f"{len(told.parts)} part{'s' if len(told.parts) != 1 else ''}, {told.hash}"
             if told.parts else "no instructions"))  # fmt: skip
    for part in told.parts:
        print(f"\n── from {part.source} ──\n{part.text}")
    return EXIT_OK
