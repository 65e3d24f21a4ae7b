"""The `agentdeck` command line: the console by default, and invoke, decide, history, info.

`--json` output and exit codes are a contract: 0 done/natural, 3 waiting, 1 any other end,
2 bad usage or input.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio

from engine import __version__
from engine.config import ConfigError, load_config
from engine.decisions import Decision
from engine.events import CallChanged, Event, TurnChanged, TurnStarted
from engine.messages import InvalidMessage, Message
from engine.outcome import TurnOutcome
from engine.room import Room, RoomBusy
from engine.runtime import Runtime
from engine.scheduler import Rejected
from engine.store import StoreError
from engine.strategies import UnknownStrategy

EXIT_OK, EXIT_OTHER, EXIT_USAGE, EXIT_WAITING = 0, 1, 2, 3


class UsageError(Exception):
    """Bad usage or input: exit 2 with the message."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentdeck", description="An agent runtime with an operator console."
    )
    p.add_argument("--version", action="version", version=f"agentdeck {__version__}")
    p.add_argument("--room", help="the agent room (default: $AGENT_ROOM, then a per-user room)")
    sub = p.add_subparsers(dest="command")

    def room_arg(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--room", default=argparse.SUPPRESS, help="the agent room")

    sp = sub.add_parser("console", help="open the operator console (the default)")
    room_arg(sp)
    sp = sub.add_parser("run", help="run the runtime loops in the foreground, logging turns")
    room_arg(sp)
    sp = sub.add_parser("invoke", help="run one turn (origin invoke); no runtime loops start")
    room_arg(sp)
    sp.add_argument("--thread", default="invoke:default")
    sp.add_argument("--strategy", choices=["react", "direct", "plan_execute"])
    sp.add_argument("--json", action="store_true")
    sp.add_argument("text")
    sp = sub.add_parser("decide", help="decide a suspended call and continue its turn")
    room_arg(sp)
    sp.add_argument("call_id")
    sp.add_argument("action", choices=["approve", "cancel"])
    sp.add_argument("--args", help="approve with these arguments (a JSON object)")
    sp.add_argument("--result", help="approve with this result instead of running (JSON)")
    sp.add_argument("--reason", default="", help="cancel: the reason the model sees")
    sp.add_argument("--remember", choices=["thread", "room"])
    sp.add_argument("--json", action="store_true")
    sp = sub.add_parser("history", help="turns, newest first; filters, search, one turn")
    room_arg(sp)
    sp.add_argument("--thread")
    sp.add_argument("--limit", type=int, default=20)
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--status", help="running, waiting, done, failed, denied or cancelled")
    sp.add_argument("--origin", help="invoke, chat, task, chore or will")
    sp.add_argument("--group", help="the thread group (chat, task, chore, will...)")
    sp.add_argument("--tool", help="turns that called this tool")
    sp.add_argument("--since", help="ISO date/time, or an age: 30m, 2h, 3d")
    sp.add_argument("--until", help="ISO date/time, or an age: 30m, 2h, 3d")
    sp.add_argument("--search", metavar="TEXT", help="full text of messages and tool calls")
    sp.add_argument("--turn", metavar="ID", help="one turn: its steps, calls and decisions")
    sp.add_argument("--after", metavar="CURSOR", help="the next page: a row's `cursor`")
    sp = sub.add_parser("info", help="where things are and which model is in use")
    room_arg(sp)
    return p


def main(argv: list[str] | None = None, run_console: Callable[[Room], int] | None = None) -> int:
    """Run a command. The console is handed in by its package: the engine never imports it."""
    args = _parser().parse_args(argv)
    room = Room.at(getattr(args, "room", None))
    command = args.command or "console"
    try:
        if command == "console":
            if run_console is None:
                raise UsageError("the console is not installed; use `python -m console`")
            return run_console(room)
        handler = {
            "run": _run,
            "invoke": _invoke,
            "decide": _decide,
            "history": _history,
            "info": _info,
        }
        return anyio.run(handler[command], room, args)
    except (UsageError, InvalidMessage, ConfigError, UnknownStrategy) as exc:
        print(f"agentdeck: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (RoomBusy, StoreError, Rejected) as exc:
        print(f"agentdeck: {exc}", file=sys.stderr)
        return EXIT_OTHER
    except KeyboardInterrupt:
        return 130


def _exit_code(outcome: TurnOutcome) -> int:
    if outcome.status == "done" and outcome.reason == "natural":
        return EXIT_OK
    return EXIT_WAITING if outcome.status == "waiting" else EXIT_OTHER


def _report(outcome: TurnOutcome, as_json: bool) -> int:
    if as_json:
        print(json.dumps(outcome.as_json()))
    else:
        if outcome.text:
            print(outcome.text)
        state = outcome.status + (f"/{outcome.reason}" if outcome.reason else "")
        print(f"-- turn {outcome.turn_id} on {outcome.thread_id}: {state}", file=sys.stderr)
        for p in outcome.pending:
            print(
                f"   pending {p['call_id']}: {p['tool']} {json.dumps(p['args'])}\n"
                f"   decide: agentdeck decide {p['call_id']} approve|cancel",
                file=sys.stderr,
            )
    return _exit_code(outcome)


def _log_line(event: Event) -> str | None:
    """One line per thing an operator watching `agentdeck run` wants to see."""
    stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
    match event:
        case TurnStarted():
            text = " ".join(event.text.split())[:70]
            return f"{stamp} {event.thread_id} {event.turn_id} started ({event.origin}): {text}"
        case TurnChanged(status="done" | "waiting"):
            detail = f" ({event.detail})" if event.detail else ""
            return (
                f"{stamp} {event.thread_id} {event.turn_id} {event.status}/{event.reason}{detail}"
            )
        case CallChanged(status="suspended"):
            return (f"{stamp} {event.thread_id} {event.turn_id} {event.call_id} {event.tool} "
                    f"waits for a decision: agentdeck decide {event.call_id} approve|cancel")  # fmt: skip
    return None


async def _run(room: Room, args: argparse.Namespace) -> int:
    # notices (a bad task file, a failed submit) reach the log; turns reach stdout
    logging.basicConfig(format="%(asctime)s %(levelname)s: %(message)s", datefmt="%H:%M:%S")
    # SIGTERM (systemd, docker, kill) stops as Ctrl-C does: the run is marked ended, and a
    # turn still running resumes at the next start. The receiver stays until the room is
    # closed, so a second SIGTERM (`timeout` sends two) cannot kill the shutdown midway.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async with Runtime.open(room, kind="run") as rt:

            def log(event: Event) -> None:
                if (line := _log_line(event)) is not None:
                    print(line, flush=True)

            rt.subscribe(log)
            rt.start_loops()
            print(f"agentdeck run {rt.run_id} on {room.path} "
                  f"({rt.provider.name}:{rt.provider.model}); Ctrl-C stops", flush=True)  # fmt: skip
            async for received in signals:
                print(f"agentdeck run: {signal.Signals(received).name}, stopping", flush=True)
                break
    return EXIT_OK


async def _invoke(room: Room, args: argparse.Namespace) -> int:
    message = Message.parse(
        {"origin": "invoke", "sender": "cli", "thread_id": args.thread, "text": args.text}
    )
    async with Runtime.open(room, kind="invoke", resume="none") as rt:
        waiting = rt.waiting_turn(message.thread_id)
        if waiting is not None:
            raise UsageError(
                f"thread {message.thread_id} has a turn waiting for a decision ({waiting}); "
                "decide its calls with `agentdeck decide`, or use --thread"
            )
        handle = await rt.submit(message, strategy=args.strategy)
        outcome = await rt.wait_turn(handle.turn_id)
    return _report(outcome, args.json)


def _json_arg(text: str | None, what: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc}") from None


async def _decide(room: Room, args: argparse.Namespace) -> int:
    edited = _json_arg(args.args, "--args")
    result = _json_arg(args.result, "--result")
    if edited is not None and not isinstance(edited, dict):
        raise UsageError("--args must be a JSON object")
    if args.action == "cancel" and (args.args or args.result):
        raise UsageError("cancel takes no --args or --result")
    if args.args and args.result:
        raise UsageError("give --args or --result, not both")
    kw: dict[str, Any] = {"remember": args.remember, "decided_by": "operator"}
    if args.action == "cancel":
        decision = Decision.cancel(args.call_id, args.reason, **kw)
    elif args.result is not None:
        decision = Decision.with_result(args.call_id, result, **kw)
    else:
        decision = Decision.approve(args.call_id, args=edited, **kw)
    async with Runtime.open(room, kind="decide", resume="none") as rt:
        row = await rt.store.fetchone(
            "SELECT turn_id, status FROM tool_calls WHERE id=?", (args.call_id,)
        )
        if row is None:
            raise UsageError(f"no tool call {args.call_id} in {room.db}")
        status = await rt.decide(decision)
        if status == "duplicate" and not args.json:
            print(f"agentdeck: call {args.call_id} was already decided ({row['status']})",
                  file=sys.stderr)  # fmt: skip
        outcome = await rt.wait_turn(row["turn_id"])
    return _report(outcome, args.json)


async def _history(room: Room, args: argparse.Namespace) -> int:
    from engine.history import Filters, History, HistoryError, parse_time
    from engine.history_text import hit_line, turn_line

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
        async with History(room) as history:
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


def _print_turn(detail: dict[str, Any], as_json: bool) -> int:
    from engine.history_text import turn_lines

    print(json.dumps(detail) if as_json else "\n".join(turn_lines(detail)))
    return EXIT_OK


async def _info(room: Room, args: argparse.Namespace) -> int:
    from engine.providers.select import make_provider

    config = load_config(room.config)
    choice = make_provider(config)
    print(f"agentdeck {__version__}")
    print(f"room:      {room.path}")
    print(f"database:  {room.db}{'' if room.db.exists() else ' (not created yet)'}")
    print(f"config:    {room.config}{'' if room.config.exists() else ' (not present; defaults)'}")
    print(f"workspace: {room.workspace}")
    print(f"model:     {choice.provider.name}:{choice.provider.model}")
    print(f"key from:  {choice.key_source}")
    print(f"store:     synchronous={config.store.synchronous}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
