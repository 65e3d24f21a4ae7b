"""What the commands share: exit codes, the report of a turn, and the room's client."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from engine.api.client import RoomClient
from engine.cli.pause_text import details, flat, headline, is_pause
from engine.domain.outcome import TurnOutcome
from engine.room import Room, RoomBusy

EXIT_OK, EXIT_OTHER, EXIT_USAGE, EXIT_WAITING, EXIT_BUSY = 0, 1, 2, 3, 4
POLL = 30.0  # seconds of one wait for an outcome (the owner answers sooner when it can)


class UsageError(Exception):
    """Bad usage or input: exit 2 with the message."""


def subcommands(
    command: argparse.ArgumentParser, dest: str
) -> Callable[[str, str], argparse.ArgumentParser]:
    """A command's subcommands (`rules list`, `break add`): each takes --room and --json as
    the command itself does."""
    sub = command.add_subparsers(dest=dest)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help)
        sp.add_argument("--room", default=argparse.SUPPRESS, help="the agent room")
        sp.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print the models as JSON")  # fmt: skip
        return sp

    return action


def said(model: Any, as_json: bool, text: str) -> int:
    """Print what a command did: the room's answer as JSON, or its sentence; exit 0."""
    print(json.dumps(model.model_dump(mode="json")) if as_json else text)
    return EXIT_OK


def exit_code(outcome: TurnOutcome) -> int:
    if outcome.status == "done" and outcome.reason == "natural":
        return EXIT_OK
    return EXIT_WAITING if outcome.status == "waiting" else EXIT_OTHER


def _line(text: str, limit: int = 300) -> str:
    """A detail on one line, as text (a model's or a tool's words: no control characters)."""
    flat = "".join(c if c.isprintable() else " " for c in " ".join(text.split()))
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def report(outcome: TurnOutcome, as_json: bool, extra: dict[str, Any] | None = None) -> int:
    """Print where a turn stands (the `--json` object, with `extra`'s keys, or text) and
    return its exit code."""
    if as_json:
        print(json.dumps({**outcome.as_json(), **(extra or {})}))
    else:
        if outcome.text:
            print(outcome.text)
        state = outcome.status + (f"/{outcome.reason}" if outcome.reason else "")
        why = f" ({_line(outcome.detail)})" if outcome.detail and outcome.status == "done" else ""
        print(f"-- turn {outcome.turn_id} on {flat(outcome.thread_id, 120)}: "
              f"{state}{why}", file=sys.stderr)  # fmt: skip
        for p in outcome.pending:
            if is_pause(p):  # a breakpoint's pause
                head = headline(p, outcome.turn_id, outcome.thread_id)
                print(f"   pending {p['call_id']}: {head}", file=sys.stderr)
                for line in details(p):
                    print(f"     {line}", file=sys.stderr)
                continue
            how = ("approve|cancel" if p.get("awaiting") != "review" else  # after a crash
                   "fail|rerun (or approve --result JSON); what is known: agentdeck review")  # fmt: skip
            print(
                f"   pending {p['call_id']}: {p['tool']} {json.dumps(p['args'])}\n"
                f"   decide: agentdeck decide {p['call_id']} {how}",
                file=sys.stderr,
            )
    return exit_code(outcome)


def json_arg(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"{what} is nested too deeply") from None
    except ValueError as exc:  # bad JSON, or a number of more than 4,300 digits
        raise UsageError(f"{what} is not valid JSON: {exc}") from None


async def settled(client: RoomClient, turn_id: str) -> TurnOutcome:
    """The turn's outcome once it no longer runs (done, or waiting for a decision). While
    its request waits in the queue, stderr says so and why (a paused group, a full budget),
    again whenever the reason changes."""
    said, wait = None, 0.0  # the first look does not wait: a queued request is said at once
    while True:
        outcome = await client.outcome(turn_id, wait=wait)
        wait = POLL
        if outcome.status == "queued" and outcome.reason != said:
            said = outcome.reason
            print(f"agentdeck: queued on {flat(outcome.thread_id, 120)}: {said}; it "
                  "starts once that clears (Ctrl-C leaves it queued)", file=sys.stderr)  # fmt: skip
        if outcome.status not in ("running", "queued"):
            return outcome


@asynccontextmanager
async def room_client(room: Room, kind: str) -> AsyncIterator[RoomClient]:
    """The owner's API when the room is owned; else the room, opened here for this one
    command: no runtime loops, no turn but the ones it starts, nothing left running."""
    async with AsyncExitStack() as stack:
        yield await _client(room, kind, stack)


@asynccontextmanager
async def room_reader(room: Room, kind: str) -> AsyncIterator[RoomClient]:
    """`room_client` for a command that only reads: a room nobody owns is read without
    opening a run (engine/api/reading.py), unless a dead run left calls to put up for
    review (a write), which opening it does first."""
    async with AsyncExitStack() as stack:
        yield await _client(room, kind, stack, read_only=True)


async def _client(room: Room, kind: str, stack: AsyncExitStack,
                  read_only: bool = False) -> RoomClient:  # fmt: skip
    from engine.api.connect import connect

    for attempt in range(2):
        remote = await connect(room, say=lambda text: print(f"agentdeck: {text}", file=sys.stderr))
        if remote is not None:
            return await stack.enter_async_context(remote)
        if read_only:
            from engine.api.reading import RoomReader

            reader = await RoomReader.open(room)
            if reader is not None:
                stack.push_async_callback(reader.aclose)
                return reader
        from engine.api.local import LocalClient  # (the runtime: only for a room nobody owns)
        from engine.runtime import Runtime

        try:
            rt = await stack.enter_async_context(Runtime.open(room, kind=kind, resume="none"))
        except RoomBusy:
            if attempt:
                raise
            continue  # someone took the room meanwhile: ask them
        return LocalClient(rt)
    raise AssertionError("unreachable")
