"""`agentdeck review`: the calls whose outcome a crash left unknown, with what is known of
them (engine/decisions/review.py), and `review kill CALL`, which ends a call's surviving process
group. Through the owner's API when the room is owned, the room itself otherwise; the
output and exit codes are the same either way. Each call is answered with
`agentdeck decide CALL fail|rerun` or `decide CALL approve --result JSON`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from engine.api.client import NotFound
from engine.cli.common import EXIT_OK, EXIT_OTHER, UsageError, room_client, room_reader
from engine.cli.pause_text import flat
from engine.cli.turns import age
from engine.domain.review import Review, file_text, process_text
from engine.room import Room


async def review(room: Room, args: argparse.Namespace) -> int:
    if args.what == "kill":
        return await _kill(room, args)
    if args.call_id is not None:
        raise UsageError("review lists every call under review: give no CALL_ID (or: kill CALL)")
    async with room_reader(room, "review") as client:
        reviews = await client.reviews()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in reviews]))
        return EXIT_OK
    now = time.time()
    for r in reviews:
        print(_text(r, now))
    if not reviews:
        print("agentdeck: no call waits for a review", file=sys.stderr)
    return EXIT_OK


def _text(r: Review, now: float) -> str:
    lines = [
        f"{r.call_id}  {flat(r.tool, 80)} {flat(r.args, 300)}",
        f"   on {flat(r.thread_id, 120)} (turn {r.turn_id}); it was running when agentdeck stopped, "
        f"started {_when(r.started_at)}, under review for {age(now - r.since)}",
    ]
    if r.process is not None:
        lines.append(f"   {process_text(r.process)}")
    lines.extend(f"   file {f}" for f in map(file_text, r.files))
    lines.append(f"   decide: agentdeck decide {r.call_id} approve --result JSON (it succeeded)"
                 " | fail [--reason TEXT] | rerun (it may then have run twice)")  # fmt: skip
    if r.process is not None and r.process.alive:
        lines.append(f"   kill:   agentdeck review kill {r.call_id}")
    return "\n".join(lines)


async def _kill(room: Room, args: argparse.Namespace) -> int:
    """Exit 0 when nothing of the group is left alive (`gone`: nothing was), 1 when it
    survived or may not be ended from here (the reason on stderr), 2 for no such call."""
    if args.call_id is None:
        raise UsageError("review kill needs the CALL_ID whose process group to end")
    async with room_client(room, "review") as client:
        try:
            killed = await client.kill_orphan(args.call_id)
        except NotFound:
            raise UsageError(f"no tool call {args.call_id} in {room.db}") from None
    if args.json:
        print(json.dumps(killed.model_dump(mode="json")))
    else:
        print(f"process group {killed.pgid} of call {killed.call_id}: {killed.result}")
    return EXIT_OTHER if killed.result == "survived" else EXIT_OK


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
