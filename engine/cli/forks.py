"""`agentdeck fork TURN STEP` and `agentdeck replay TURN` (engine/api/forkbook.py): a thread
made from another's record, through the owner's API when the room is owned, else the room
opened for this one command.

A fork copies the record up to a step (its id: `agentdeck history --turn TURN` lists a
turn's steps with theirs), optionally with user messages or tool results edited (`--edit
SEQ=TEXT`, `--edit-file SEQ=PATH`; SEQ is the entry's place in the thread, from 0), and
goes on from there in its own thread; a replay answers a turn's message again in a
scratch thread on the turn's recorded results (no tool runs), against another model,
strategy or instructions. Both print the new thread, where it came from and the turn
they started. With `--wait` the command waits for that turn and ends as `invoke` does
(0 done, 3 waiting for a decision, 1 any other end); without, 0 once the thread is made.
On a room nobody owns the turn runs in this process, so the command always waits for it.
Bad input (no such turn or step, an entry that cannot be edited, a thread that exists, an
unknown group or model) is one line and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.cli.common import EXIT_OK, UsageError, exit_code, report, room_client, settled
from engine.cli.pause_text import flat
from engine.room import Room

if TYPE_CHECKING:
    from engine.api.client import RoomClient
    from engine.domain.forks import Forked

MAX_FILE = 16 * 1024 * 1024  # bytes of an --edit-file or --instructions-file
_FLAGS = {"turn_id": "TURN", "step_id": "STEP", "group": "--group", "thread_id": "--thread",
          "edits": "--edit", "model": "--model", "strategy": "--strategy",
          "instructions": "--instructions"}  # fmt: skip


def add_parsers(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`fork` and `replay`, and their options."""
    sp = command("fork", "a new thread from a turn's record up to one of its steps, "
                 "optionally with a message or a tool result edited; it goes on from there")  # fmt: skip
    sp.add_argument("turn_id", metavar="TURN")
    sp.add_argument("step_id", metavar="STEP", help="the step's id (agentdeck history --turn "
                    "TURN lists them)")  # fmt: skip
    sp.add_argument("--edit", action="append", default=[], metavar="SEQ=TEXT",
                    help="the entry SEQ (a user message or a tool result) with this text; "
                    "again for another")  # fmt: skip
    sp.add_argument("--edit-file", action="append", default=[], metavar="SEQ=PATH",
                    help="--edit's text read from PATH (UTF-8)")  # fmt: skip
    _common(sp)
    sp = command("replay", "answer a turn's message again in a scratch thread on its "
                 "recorded results (no tool runs), against another model, strategy or "
                 "instructions")  # fmt: skip
    sp.add_argument("turn_id", metavar="TURN")
    sp.add_argument("--model", metavar="PROVIDER:MODEL",
                    help="e.g. offline:b, openai:gpt-4o (default: the thread's)")  # fmt: skip
    sp.add_argument("--strategy", choices=["react", "direct", "plan_execute"],
                    help="default: the turn's")  # fmt: skip
    told = sp.add_mutually_exclusive_group()
    told.add_argument("--instructions", metavar="TEXT", help="the scratch thread's own")
    told.add_argument("--instructions-file", metavar="FILE", help="--instructions read from FILE")
    _common(sp)


def _common(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--group", metavar="G", help="the new thread's group (default: the source "
                    "thread's)")  # fmt: skip
    sp.add_argument("--thread", metavar="ID", help="the new thread's id (default: one is made)")
    sp.add_argument("--wait", action="store_true",
                    help="wait for the turn it starts and end as invoke does")  # fmt: skip
    sp.add_argument("--json", action="store_true", help="print the new thread's record as JSON")


async def fork(room: Room, args: argparse.Namespace) -> int:
    from engine.api.fork_models import ForkBody

    if not args.step_id.isdigit():
        raise UsageError(f"STEP must be a step's id, a number (not {flat(args.step_id, 40)!r})")
    edits: dict[str, str] = {}
    said = [_edit(e, "--edit") for e in args.edit]
    for seq, text in said + [_edit(e, "--edit-file", _read) for e in args.edit_file]:
        if seq in edits:
            raise UsageError(f"entry {seq} is edited twice (--edit, --edit-file)")
        edits[seq] = text
    body = _body(ForkBody, turn_id=args.turn_id, step_id=int(args.step_id), group=args.group,
                 thread_id=args.thread, edits=edits, by="cli")  # fmt: skip
    return await _make(room, args, "fork", lambda client: client.fork(body))


async def replay(room: Room, args: argparse.Namespace) -> int:
    from engine.api.fork_models import ReplayBody

    told = args.instructions
    if args.instructions_file is not None:
        path = args.instructions_file
        told = _read(path, f"--instructions-file {flat(path, 200)}")
    body = _body(ReplayBody, turn_id=args.turn_id, model=args.model, strategy=args.strategy,
                 instructions=told, group=args.group, thread_id=args.thread, by="cli")  # fmt: skip
    return await _make(room, args, "replay", lambda client: client.replay(body))


async def _make(room: Room, args: argparse.Namespace, kind: str,
                make: Callable[[RoomClient], Any]) -> int:  # fmt: skip
    """Make the thread through the room's client, say it, and wait for its turn when asked
    (or when the turn runs in this process)."""
    from engine.api.client import Conflict, Invalid, NotFound
    from engine.api.remote import RemoteClient

    async with room_client(room, kind) as client:
        try:
            made: Forked = await make(client)
        except (NotFound, Invalid, Conflict) as exc:
            raise UsageError(str(exc)) from None
        here = not isinstance(client, RemoteClient)  # the room opened here: its turn too
        outcome = None
        if made.turn_id is not None and (args.wait or here):
            if not args.json:
                _say(made)
            outcome = await settled(client, made.turn_id)
    if args.json:
        doc = made.model_dump(mode="json")
        if outcome is not None:
            doc["outcome"] = outcome.as_json()
        print(json.dumps(doc))
        return EXIT_OK if outcome is None else exit_code(outcome)
    if outcome is None:
        _say(made)
        return EXIT_OK
    code = report(outcome, False)
    if made.kind == "replay":
        print(f"   compare: agentdeck diff {made.from_turn} {made.turn_id}", file=sys.stderr)
    return code


def _say(made: Forked) -> None:
    """The new thread, where it came from and the turn it started (stdout)."""
    edited = f", entr{'y' if len(made.edited) == 1 else 'ies'} " \
        f"{', '.join(map(str, made.edited))} edited" if made.edited else ""  # fmt: skip
    print(f"{made.kind} {flat(made.thread_id, 200)}: {flat(made.origin(), 300)}, group "
          f"{flat(made.group, 80)}, {_entries(made.upto)} copied{edited}")  # fmt: skip
    if made.turn_id is not None:
        print(f"turn {made.turn_id} started on {flat(made.thread_id, 200)}")
    else:  # the record ends with an answer: nothing to go on with until a message comes
        print(f"no turn started (the record ends with an answer): agentdeck invoke --thread "
              f"{flat(made.thread_id, 200)} TEXT")  # fmt: skip


def _entries(n: int) -> str:
    return f"{n} entr{'y' if n == 1 else 'ies'}"


def _edit(
    said: str, flag: str, text_of: Callable[[str, str], str] | None = None
) -> tuple[str, str]:
    """`SEQ=TEXT` (or `SEQ=PATH`, read by `text_of`) as the body's ("SEQ", text)."""
    seq, eq, rest = said.partition("=")
    if not eq or not seq.strip().isdigit():
        want = "PATH" if text_of is not None else "TEXT"
        raise UsageError(f"{flag} {flat(said, 60)!r}: give SEQ={want}, SEQ an entry's number")
    seq = str(int(seq))
    return seq, rest if text_of is None else text_of(rest, f"{flag} {seq}={flat(rest, 200)}")


def _read(path: str, what: str) -> str:
    """A file's text (UTF-8), or a usage error that names `what` asked for it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_FILE + 1)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{what}: cannot be read ({why})") from None
    if len(text) > MAX_FILE:
        raise UsageError(f"{what}: more than {MAX_FILE // 2**20} MiB")
    return text


def _body(kind: Any, **fields: Any) -> Any:
    """The operation's body, or a usage error naming the option that does not fit."""
    from pydantic import ValidationError

    try:
        return kind(**fields)
    except ValidationError as exc:
        raise UsageError("; ".join(_said(e) for e in exc.errors())) from None


def _said(error: Any) -> str:
    msg = str(error["msg"]).removeprefix("Value error, ")
    loc = error.get("loc") or ()
    return f"{_FLAGS.get(str(loc[0]), str(loc[0]))}: {msg}" if loc else msg
