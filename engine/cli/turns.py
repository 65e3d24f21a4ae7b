"""`invoke`, `decide`, `cancel` and `pending`: through the owner's API, or the room itself.

`decide CALL fail|rerun` answer a call under review after a crash (engine/decisions/review.py); a
rerun is bound to the arguments' hash as an approval is (engine/decisions/binding.py).
`decide CALL continue|step` answer a breakpoint's pause (engine/turn/breaks.py; `approve`
works as continue, `cancel` ends the turn), bound the same way to the pause's arguments as
`pending` shows them, or to the edited ones `--args`/`--args-file` give."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from engine.api.client import Conflict, Invalid, NotFound
from engine.cli.common import (
    EXIT_OK,
    EXIT_OTHER,
    UsageError,
    json_arg,
    report,
    room_client,
    room_reader,
    settled,
)
from engine.cli.light import owner_json
from engine.cli.pause_text import details, flat, headline, is_pause
from engine.room import Room

_FLAGS = {"thread_id": "--thread", "text": "the text"}  # SubmitBody's fields as invoke says them


def _flag(loc: tuple[int | str, ...], thread_word: str = "--thread") -> str:
    if loc and loc[0] == "thread_id":
        return thread_word
    return _FLAGS.get(str(loc[0]), str(loc[0])) if loc else ""


async def invoke(room: Room, args: argparse.Namespace) -> int:
    return await _one_turn(room, args.json, thread_id=args.thread, text=args.text,
                           strategy=args.strategy, refuse_if_waiting=True)  # fmt: skip


async def compact(room: Room, args: argparse.Namespace) -> int:
    """`agentdeck compact THREAD [--undo]`: compact the thread now (its turns after read a
    summary of its older part), or undo its last compaction; a turn of its own."""
    return await _one_turn(room, args.json, "THREAD", thread_id=args.thread_id,
                           text="undo the last compaction" if args.undo else "compact this thread",
                           strategy="uncompact" if args.undo else "compact")  # fmt: skip


async def _one_turn(room: Room, as_json: bool, thread_word: str = "--thread", **fields: Any) -> int:
    """Submit one turn of origin invoke and report how it ended; a request that does not
    fit (an empty or 600-character thread, a byte not UTF-8) is a usage error."""
    from pydantic import ValidationError

    from engine.api.models import SubmitBody

    try:
        body = SubmitBody(origin="invoke", sender="cli", **fields)
    except ValidationError as exc:
        raise UsageError("; ".join(
            f"{_flag(e['loc'], thread_word)}: {e['msg'].removeprefix('Value error, ')}"
            .removeprefix(": ") for e in exc.errors())) from None  # fmt: skip
    async with room_client(room, "invoke") as client:
        try:
            submitted = await client.submit(body)
        except (Conflict, Invalid) as exc:
            raise UsageError(str(exc)) from None
        outcome = await settled(client, submitted.turn_id)
    return report(outcome, as_json)


async def decide(room: Room, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from engine.decisions.binding import args_digest, runs_tool
    from engine.domain.decisions import Decision

    raw_args, flag = _args_text(args)
    edited = json_arg(raw_args, flag)
    result = json_arg(args.result, "--result")
    if edited is not None and not isinstance(edited, dict):
        raise UsageError(f"{flag} must be a JSON object")
    if args.action in ("cancel", "fail", "rerun") and (raw_args or args.result):
        raise UsageError(f"{args.action} takes no --args or --result")
    pause_word = args.action in PAUSE_WORDS
    if pause_word and (args.result or args.remember or args.outside_sandbox or args.network):
        raise UsageError(f"{args.action} goes on from a breakpoint's pause: it takes no "
                         "--result, --remember, --outside-sandbox or --network")  # fmt: skip
    if args.action in ("fail", "rerun") and args.remember:
        raise UsageError(f"{args.action} makes no rule: --remember is for approve and cancel")
    if args.action == "rerun" and args.reason:
        raise UsageError("rerun takes no --reason")
    if raw_args and args.result:
        raise UsageError("give --args or --result, not both")
    kw: dict[str, Any] = {"remember": args.remember, "decided_by": "operator"}
    if args.outside_sandbox or args.network:
        kw["sandbox"] = "outside" if args.outside_sandbox else "network"
    if args.args_hash is not None:
        if args.action in ("cancel", "fail") or args.result is not None:
            raise UsageError("--args-hash binds an approval (or a rerun) that runs the tool")
        if not re.fullmatch(r"[0-9a-f]{64}", args.args_hash):
            raise UsageError("--args-hash must be a SHA-256 in hex, as `pending --json` gives it")
        kw["args_hash"] = args.args_hash
    elif edited is not None:  # the operator approves what they wrote
        kw["args_hash"] = args_digest(edited)
    try:
        if args.action == "cancel":
            decision = Decision.cancel(args.call_id, args.reason, **kw)
        elif args.action == "fail":
            decision = Decision.fail(args.call_id, args.reason, **kw)
        elif args.action == "rerun":
            decision = Decision.rerun(args.call_id, **kw)
        elif args.action == "step":
            decision = Decision.step(args.call_id, args=edited, **kw)
        elif args.result is not None:
            decision = Decision.with_result(args.call_id, result, **kw)
        else:
            decision = Decision.approve(args.call_id, args=edited, **kw)
    except ValidationError as exc:  # the call stays waiting; nothing is recorded
        raise UsageError("; ".join(e["msg"].removeprefix("Value error, ")
                                   for e in exc.errors())) from None  # fmt: skip
    async with room_client(room, "decide") as client:
        if pause_word or (runs_tool(decision) and decision.args_hash is None):
            # bound to the arguments as the room shows them now (engine/decisions/binding.py)
            shown = [c for c in await client.pending() if c.call_id == args.call_id]
            if shown and pause_word and shown[0].awaiting != "breakpoint":
                raise UsageError(_not_a_pause(args.action, args.call_id, shown[0].awaiting))
            if shown and shown[0].awaiting == "breakpoint" and edited is not None:
                _check_edit(shown[0].args, edited, flag)
            if shown and decision.args_hash is None:
                decision = decision.model_copy(update={"args_hash": shown[0].args_hash})
        try:
            decided = await client.decide(decision)
        except NotFound:
            raise UsageError(f"no tool call {args.call_id} in {room.db}") from None
        if decided.status == "duplicate" and not args.json:
            print(f"agentdeck: call {args.call_id} was already decided ({decided.call_status})",
                  file=sys.stderr)  # fmt: skip
        if decided.status == "refused":  # nothing changed: where the turn stands now
            outcome = await client.outcome(decided.turn_id)  # (a turn a crash left may be
        else:  # `running` until a runtime resumes it: no waiting for it)
            outcome = await settled(client, decided.turn_id)
    said = {"decision": decided.model_dump(include={"decision_id", "status", "winner", "note"})}
    code = report(outcome, args.json, said)
    if decided.status == "refused":  # nothing ran; the call still waits for a decision
        print(f"agentdeck: decision refused: {decided.note}", file=sys.stderr)
        return EXIT_OTHER
    if decided.status == "duplicate":  # another decision won: this one changed nothing
        return EXIT_OTHER
    return code


PAUSE_WORDS = ("continue", "step")  # a breakpoint's pause's own (approve works as continue)
MAX_ARGS_FILE = 64 * 1024 * 1024  # bytes: the API takes no bigger body


def _args_text(args: argparse.Namespace) -> tuple[str | None, str]:
    """The edited arguments' JSON text, from --args or --args-file, and which one gave it."""
    if args.args_file is None:
        return args.args, "--args"
    if args.args is not None:
        raise UsageError("give --args or --args-file, not both")
    what = f"--args-file {args.args_file}"
    try:
        if args.args_file == "-":
            text = sys.stdin.read(MAX_ARGS_FILE + 1)
        else:
            with open(args.args_file, encoding="utf-8") as f:
                text = f.read(MAX_ARGS_FILE + 1)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{what}: cannot be read ({why})") from None
    if len(text) > MAX_ARGS_FILE:
        raise UsageError(f"{what}: more than {MAX_ARGS_FILE // 2**20} MiB")
    return text, what


def _check_edit(shown: Any, edited: Any, flag: str) -> None:
    """An edit of a pause that cannot apply is bad input: refused here, nothing recorded."""
    from engine.domain.breakpoints import changes

    try:
        changes(shown, edited)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _not_a_pause(action: str, call_id: str, awaiting: str) -> str:
    waits = ("its review after a crash: fail or rerun it (or approve --result)"
             if awaiting == "review" else "an approval: approve or cancel it")  # fmt: skip
    return f"{action} is for a breakpoint's pause; call {call_id} waits for {waits}"


async def cancel(room: Room, args: argparse.Namespace) -> int:
    """Exit 0 when the turn was cancelled, 1 when it had already ended, 2 when unknown."""
    async with room_client(room, "cancel") as client:
        try:
            cancelled = await client.cancel(args.turn_id, args.reason)
        except NotFound:
            raise UsageError(f"no turn {args.turn_id} in {room.db}") from None
        outcome = await settled(client, args.turn_id)
    if not cancelled.cancelled and not args.json:
        print(f"agentdeck: turn {args.turn_id} had already ended", file=sys.stderr)
    report(outcome, args.json)
    return EXIT_OK if cancelled.cancelled else EXIT_OTHER


def pending_now(room: Room, args: argparse.Namespace) -> int | None:
    calls = owner_json(room, "pending")
    return None if calls is None else _pending(calls, args)


async def pending(room: Room, args: argparse.Namespace) -> int:
    async with room_reader(room, "pending") as client:
        calls = [c.model_dump(mode="json") for c in await client.pending()]
    return _pending(calls, args)


def _pending(calls: list[dict[str, Any]], args: argparse.Namespace) -> int:
    """Print the waiting calls (the API's JSON)."""
    if args.json:
        print(json.dumps(calls))
        return EXIT_OK
    if args.quiet:  # for a shell: agentdeck decide "$(agentdeck pending -q | head -n 1)" ...
        for c in calls:
            print(c["call_id"])
        return EXIT_OK
    now = time.time()
    for c in calls:
        deadline = c.get("deadline_at")
        waits = f"waiting {age(now - c['since'])}" + (
            "" if deadline is None else f", deadline in {age(deadline - now)}")  # fmt: skip
        if is_pause(c):  # a breakpoint's pause: where, what it holds, how to go on
            print(f"{c['call_id']}  {headline(c, c['turn_id'], c['thread_id'])}, "
                  f"{waits}")  # fmt: skip
            for line in details(c):
                print(f"    {line}")
            continue
        args_text = json.dumps(c["args"])
        args_text = args_text if len(args_text) <= 80 else args_text[:79] + "…"
        print(f"{c['call_id']}  {flat(c['tool'], 80)} {args_text}  on "
              f"{flat(c['thread_id'], 120)} (turn {c['turn_id']}), {waits}")  # fmt: skip
    if not calls:
        print("agentdeck: no call waits for a decision", file=sys.stderr)
    return EXIT_OK


def age(seconds: float) -> str:
    """How long ago, coarse: 5s, 3m, 2h, 4d."""
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
