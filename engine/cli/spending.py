"""`agentdeck usage` (what turns spent: tokens and cost, per day, group, thread or model)
and `agentdeck budget` (the budgets that stop them; set or raise one).

Both read through the owner's API when the room is owned; `usage` and a `budget` with
nothing to set read a room nobody owns without opening it; setting one opens it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from engine.cli.common import EXIT_OK, UsageError, room_client, room_reader
from engine.domain.usage import cost_text, day_of, parse_scope, spent_text, tokens_text
from engine.room import Room

DAY = 86400.0


def add_parsers(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`usage` and `budget`, made by the cli's `command(name, help)`."""
    sp = command("usage", "tokens and cost: today, or per day, group, thread or model")
    sp.add_argument("--by", choices=["day", "group", "thread", "model"])
    sp.add_argument("--days", type=int, metavar="N", help="the last N days (default 1: today)")
    sp.add_argument("--since", metavar="DAY", help="from this UTC day (YYYY-MM-DD)")
    sp.add_argument("--until", metavar="DAY", help="to this UTC day (default today)")
    sp.add_argument("--json", action="store_true")
    sp = command("budget", "spending budgets: list them, or set, raise or clear one")
    sp.add_argument("scope", metavar="SCOPE", nargs="?",
                    help="turn, thread, thread:ID, group:NAME or room")  # fmt: skip
    sp.add_argument("--tokens", type=int, metavar="N", help="at most N tokens (in + out)")
    sp.add_argument("--cost", type=float, metavar="USD", help="at most this many US dollars")
    change = sp.add_mutually_exclusive_group()
    change.add_argument("--none", action="store_true", help="no budget for this scope")
    change.add_argument("--clear", action="store_true", help="back to agentdeck.toml's")
    sp.add_argument("--json", action="store_true")


def _days(args: argparse.Namespace) -> tuple[str | None, str | None]:
    for name in ("since", "until"):
        value = getattr(args, name)
        if value is not None:
            try:
                time.strptime(value, "%Y-%m-%d")
            except ValueError:
                raise UsageError(f"--{name} {value!r}: not a day (YYYY-MM-DD)") from None
    if args.days is not None:
        if args.since is not None:
            raise UsageError("--days and --since say the same thing: give one")
        if not 1 <= args.days <= 100_000:
            raise UsageError(f"--days {args.days}: from 1 to 100000")
        return day_of(time.time() - (args.days - 1) * DAY), args.until
    return args.since, args.until


async def usage(room: Room, args: argparse.Namespace) -> int:
    since, until = _days(args)
    async with room_reader(room, "usage") as client:
        report = await client.usage(args.by, since, until)
    if args.json:
        print(report.model_dump_json(indent=2))
        return EXIT_OK
    span = report.since if report.since == report.until else f"{report.since} .. {report.until}"
    print(f"{span} (UTC): {spent_text(report.total.usage)}"
          f"{_detail(report.total.usage.cached_tokens, report.total.steps)}")  # fmt: skip
    if report.rows:
        width = min(max(len(r.key) for r in report.rows), 48)
        print()
        for row in report.rows:
            key = row.key if len(row.key) <= width else row.key[: width - 1] + "…"
            print(f"  {_safe(key):<{width}}  {spent_text(row.usage)}"
                  f"{_detail(row.cached_tokens, row.steps)}")  # fmt: skip
    return EXIT_OK


def _detail(cached: int, steps: int) -> str:
    parts = [f"{steps} inference{'s' if steps != 1 else ''}"] if steps else []
    if cached:
        parts.append(f"{tokens_text(cached)} cached")
    return f" ({', '.join(parts)})" if parts else ""


def _safe(text: str) -> str:
    """A thread id or model name as text on one line (no control characters)."""
    return "".join(c if c.isprintable() else "?" for c in text)


async def budget(room: Room, args: argparse.Namespace) -> int:
    sets = args.tokens is not None or args.cost is not None or args.none or args.clear
    if sets and args.scope is None:
        raise UsageError("say which budget: SCOPE (turn, thread, thread:ID, group:NAME, room)")
    if args.scope is not None:
        try:
            parse_scope(args.scope)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.none and (args.tokens is not None or args.cost is not None):
        raise UsageError("--none takes no --tokens or --cost")
    if args.clear and (args.tokens is not None or args.cost is not None):
        raise UsageError("--clear takes no --tokens or --cost")
    for name in ("tokens", "cost"):
        value = getattr(args, name)
        if value is not None and not 0 <= value < float("inf"):
            raise UsageError(f"--{name} {value}: not a budget (0 or more)")
    if sets:
        async with room_client(room, "cli") as client:
            view = await client.set_budget(args.scope, args.tokens, args.cost, clear=args.clear,
                                           by="cli")  # fmt: skip
    else:
        async with room_reader(room, "budget") as client:
            view = await client.budgets()
    if args.json:
        data = view.model_dump(mode="json")
        if args.scope is not None:
            data["budgets"] = [b for b in data["budgets"] if b["scope"] == args.scope]
        print(json.dumps(data, indent=2))
        return EXIT_OK
    rows = [b for b in view.budgets if args.scope is None or b.scope == args.scope]
    print(f"today ({view.day} UTC): {spent_text(view.today.usage)}")
    if not rows:
        what = f"no budget for {args.scope}" if args.scope else "no budgets"
        print(f"agentdeck: {what} ([budget] in agentdeck.toml, or agentdeck budget SCOPE "
              "--cost USD)", file=sys.stderr)  # fmt: skip
    for b in rows:
        limit = " and ".join(x for x in (
            f"{tokens_text(b.tokens)} tokens" if b.tokens is not None else "",
            cost_text(b.cost) if b.cost is not None else "") if x) or "none"  # fmt: skip
        per = " a turn" if b.scope == "turn" else " a day"
        spent = f"; today {spent_text(b.spent.usage)}" if b.spent is not None else ""
        source = "agentdeck.toml" if b.source == "toml" else f"set by {b.set_by}"
        reached = f"  REACHED: {b.reached}" if b.reached else ""
        print(f"  {_safe(b.scope)}: {limit}{per} ({source}){spent}{reached}")
    for h in view.held:
        print(f"  held: {_safe(h.why)}")
    return EXIT_OK
