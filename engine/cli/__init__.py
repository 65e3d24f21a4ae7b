"""The `agentdeck` command line: the console by default, the runtime's processes, turns,
decisions and history.

`--json` output and exit codes are a contract: 0 done/natural, 3 waiting, 1 any other end,
2 bad usage or input, 4 the room is held by another process that cannot take this now (a
one-off that serves no API, an owner that stopped answering): try again. Commands that act on turns (`invoke`, `decide`, `cancel`, `pending`,
`review`), `rules`, `break`, `channels`, `deliveries`, `rooms`, `gc`, `audit`, `fork` and `replay` go through the owner's API when the room is owned, and open the room themselves only when
nobody owns it; their output is the same either way.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Awaitable, Callable

from engine import __version__
from engine.cli.common import EXIT_BUSY, EXIT_OTHER, EXIT_USAGE, UsageError
from engine.room import Room

# httpx imports its own command line when it can (click, pygments and rich: about as long
# as the rest of httpx); agentdeck never runs it, and a None here makes that import fail
# as httpx expects when they are missing (it then defines a stub `main`).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentdeck", description="An agent runtime with an operator console."
    )
    p.add_argument("--version", action="version", version=f"agentdeck {__version__}")
    p.add_argument("--room", help="the agent room (default: $AGENT_ROOM, then a per-user room)")
    sub = p.add_subparsers(dest="command")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help)
        sp.add_argument("--room", default=argparse.SUPPRESS, help="the agent room")
        return sp

    command("console", "open the operator console (the default)")
    sp = command("run", "run the runtime in the foreground (loops and API), logging turns")
    sp.add_argument("--detached", action="store_true", help=argparse.SUPPRESS)  # from `start`
    command("start", "run the runtime in the background (log: agent.log in the room)")
    sp = command("stop", "stop the room's runtime (as SIGTERM does) and wait until it has; "
                 "a console hosting the room only with --force")  # fmt: skip
    sp.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (default 30)")
    sp.add_argument("--force", action="store_true",
                    help="stop it even when a console hosts it (that console closes)")  # fmt: skip
    sp = command("status", "who owns the room, since when, and what runs and waits")
    sp.add_argument("--json", action="store_true")
    sp = command("invoke", "run one turn (origin invoke); no runtime loops start")
    sp.add_argument("--thread", default="invoke:default")
    sp.add_argument("--strategy", choices=["react", "direct", "plan_execute"])
    sp.add_argument("--json", action="store_true")
    sp.add_argument("text")
    sp = command("decide", "decide a suspended call and continue its turn")
    sp.add_argument("call_id")
    sp.add_argument(
        "action", choices=["approve", "cancel", "fail", "rerun", "continue", "step"],
        help="fail and rerun answer a call under review after a crash (`agentdeck review`): "
        "it failed, or run it again (it may then have run twice); mark it succeeded with "
        "approve --result. continue and step answer a breakpoint's pause: go on, or go one "
        "inference or tool round and pause again (cancel ends its turn)",
    )  # fmt: skip
    sp.add_argument("--args", help="approve with these arguments (a JSON object); on a "
                    "pause, its whole arguments as `pending --json` shows them, edited")  # fmt: skip
    sp.add_argument("--args-file", metavar="FILE", help="--args read from FILE (- for stdin)")
    sp.add_argument("--result", help="approve with this result instead of running (JSON)")
    sp.add_argument("--reason", default="", help="cancel, fail: the reason the model sees")
    sp.add_argument("--remember", choices=["thread", "room"])
    where = sp.add_mutually_exclusive_group()
    where.add_argument(
        "--outside-sandbox",
        action="store_true",
        help="approve: run this shell call outside the sandbox (never remembered)",
    )
    where.add_argument(
        "--network",
        action="store_true",
        help="approve: run this shell call in the sandbox with the network",
    )
    sp.add_argument(
        "--args-hash",
        help="approve only the arguments of this hash (from "
        "`pending --json`); default: the call's arguments as pending shows them",
    )
    sp.add_argument("--json", action="store_true")
    sp = command("cancel", "cancel a running or waiting turn (it ends done/cancelled)")
    sp.add_argument("turn_id")
    sp.add_argument("--reason", default="cancelled by operator")
    sp.add_argument("--json", action="store_true")
    sp = command("pending", "the calls waiting for a decision, oldest first")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("-q", "--quiet", action="store_true", help="only their call ids, one a line")
    from engine.cli.rules import add_parser

    add_parser(command("rules", "the rules that allow, ask for or deny calls: list, add, revoke"))
    from engine.cli.channels import add_parsers

    add_parsers(command)
    sp = command("review", "the calls whose outcome a crash left unknown, with what is known")
    sp.add_argument("what", nargs="?", choices=["list", "kill"], default="list",
                    help="list (the default), or kill CALL: end its surviving process group")  # fmt: skip
    sp.add_argument("call_id", nargs="?", help="kill: the call whose process group to end")
    sp.add_argument("--json", action="store_true")
    sp = command("history", "turns, newest first; filters, search, one turn")
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
    sp.add_argument("--threads", action="store_true", help="threads instead of turns, forks "
                    "and replays beneath the thread they came from")  # fmt: skip
    sp.add_argument("--after", metavar="CURSOR", help="the next page: a row's `cursor`")
    command("info", "where things are and which model is in use")
    sp = command("compact", "compact a thread's conversation now (a summary of its older part)")
    sp.add_argument("thread_id", metavar="THREAD")
    sp.add_argument("--undo", action="store_true", help="undo the thread's last compaction")
    sp.add_argument("--json", action="store_true")
    from engine.cli.instructions import add_parser as instructions_parser

    instructions_parser(command("instructions", "what a thread's turns are told; set its own"))
    from engine.cli.spending import add_parsers as spending_parsers

    spending_parsers(command)
    from engine.cli.gc import add_parser as gc_parser

    gc_parser(command)
    from engine.cli.breakpoints import add_parser as break_parser

    break_parser(command)
    from engine.cli.audit import add_parser as audit_parser

    audit_parser(command)
    from engine.cli.diff import add_parser as diff_parser

    diff_parser(command)
    from engine.cli.forks import add_parsers as fork_parsers

    fork_parsers(command)
    from engine.cli.inbox import add_parser as inbox_parser

    inbox_parser(command)
    sp = command("tools", "every tool: built in or from an MCP server, approval, rules, use")
    sp.add_argument("--json", action="store_true")
    return p


def main(argv: list[str] | None = None, run_console: Callable[[Room], int] | None = None) -> int:
    """Run a command. The console is handed in by its package: the engine never imports it."""
    args = _parser().parse_args(argv)
    command = args.command or "console"
    try:
        room = Room.at(getattr(args, "room", None))
        if (name := _undecodable(args)) is not None:
            what = _POSITIONAL.get(name, f"--{name.replace('_', '-')}")
            raise UsageError(f"{what}: not UTF-8 text ({getattr(args, name)[:60]!r})")
        if command == "console":
            if run_console is None:
                raise UsageError("the console is not installed; use `python -m console`")
            return run_console(room)
        if command in ("start", "stop"):
            from engine.cli import process

            if command == "start":
                return process.start(room)
            return process.stop(room, args.timeout, args.force)
        if (now := _quick(command)) is not None and (code := now(room, args)) is not None:
            return code  # the owner answered off its socket (engine/cli/light.py)
        import anyio

        return anyio.run(_handler(command), room, args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # its reader went (`agentdeck status | head -1`): say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # (as a shell says of a command SIGPIPE ended)
    except Exception as exc:
        if (code := _exit_code(exc)) is None:
            raise
        print(f"agentdeck: {exc}", file=sys.stderr)
        return code


# The errors a command ends with, one line, and their exit codes (the first that matches):
# bad usage or input 2, the room held by another process 4, any other refusal 1. Each is
# looked for only once its module is loaded (none of its errors can have been raised
# before), so a command loads only what it runs.
_EXITS = (
    (EXIT_USAGE, (("engine.cli.common", "UsageError"), ("engine.domain.messages", "InvalidMessage"),
                  ("engine.tomlfile", "ConfigError"), ("engine.strategies", "UnknownStrategy"),
                  ("engine.api.client", "ServerError"), ("engine.room", "RoomError"),
                  ("engine.api.client", "NotFound"))),
    (EXIT_BUSY, (("engine.room", "RoomBusy"), ("engine.api.client", "OwnerGone"))),
    (EXIT_OTHER, (("engine.store.sqlite", "StoreError"), ("engine.services.scheduler", "Rejected"),
                  ("engine.api.client", "ApiError"))),
)  # fmt: skip


def _exit_code(exc: Exception) -> int | None:
    for code, errors in _EXITS:
        for module, name in errors:
            loaded = sys.modules.get(module)
            if loaded is not None and isinstance(exc, getattr(loaded, name)):
                return code
    return None


_POSITIONAL = {"text": "the text", "call_id": "CALL_ID", "turn_id": "TURN_ID",
               "rule_id": "RULE_ID", "delivery_id": "ID", "thread_id": "THREAD",
               "point_id": "ID", "turn_a": "TURN_A", "turn_b": "TURN_B", "step_id": "STEP"}  # fmt: skip


def _undecodable(args: argparse.Namespace) -> str | None:
    """The first argument (but --room, a path) holding bytes that are not UTF-8, which Python
    keeps as lone surrogates: a turn or a decision would store it, and neither SQLite nor
    the conversation can encode it (a traceback, or a turn ended in error)."""
    for name, value in vars(args).items():
        if name != "room" and isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return name
    return None


_COMMANDS = {  # command: (module of engine.cli, its function); only that module is loaded
    "run": ("running", "run"), "status": ("process", "status"), "invoke": ("turns", "invoke"),
    "decide": ("turns", "decide"), "cancel": ("turns", "cancel"),
    "pending": ("turns", "pending"), "rules": ("rules", "rules"),
    "channels": ("channels", "channels"), "deliveries": ("channels", "deliveries"),
    "rooms": ("channels", "rooms"), "review": ("review", "review"),
    "history": ("reading", "history"), "info": ("reading", "info"),
    "instructions": ("instructions", "instructions"), "compact": ("turns", "compact"),
    "usage": ("spending", "usage"), "budget": ("spending", "budget"),
    "tools": ("tools", "tools"), "gc": ("gc", "gc"), "break": ("breakpoints", "breakpoints"),
    "audit": ("audit", "audit"), "diff": ("diff", "diff"), "fork": ("forks", "fork"),
    "replay": ("forks", "replay"), "inbox": ("inbox", "inbox"),
}  # fmt: skip


def _quick(command: str) -> Callable[[Room, argparse.Namespace], int | None] | None:
    """The command's quick path (its function's `_now`, engine/cli/light.py), if it has one."""
    module, function = _COMMANDS[command]
    return getattr(importlib.import_module(f"engine.cli.{module}"), f"{function}_now", None)


def _handler(command: str) -> Callable[[Room, argparse.Namespace], Awaitable[int]]:
    module, function = _COMMANDS[command]
    handler = getattr(importlib.import_module(f"engine.cli.{module}"), function)
    return handler  # type: ignore[no-any-return]


if __name__ == "__main__":
    sys.exit(main())
