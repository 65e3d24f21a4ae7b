"""`agentdeck rules [list|add|revoke]`: the room's rules, through the owner's API when the
room is owned, else the room opened for this one command; the same output either way.

`list` exits 0; `add` 0, or 2 for a rule that cannot be used (a bad pattern, an unknown
tool, an expiry past); `revoke` 0, 2 for no such rule, 1 for agentdeck.toml's (changed in
the file) or one revoked already.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING

from engine.api.client import Invalid, NotFound
from engine.cli.common import EXIT_OK, UsageError, room_client, room_reader, said, subcommands
from engine.room import Room

if TYPE_CHECKING:
    from engine.domain.rules import Rule

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
COLUMNS = ("id", "source", "effect", "tool", "pattern", "scope", "made by", "made at",
           "expires", "uses", "last use", "state")  # fmt: skip


def add_parser(command: argparse.ArgumentParser) -> None:
    """`rules`' own subcommands (list when none is given)."""
    command.add_argument("--json", action="store_true", help="print the models as JSON")
    action = subcommands(command, "rules_action")

    action("list", "every rule: source, scope, uses and last use")
    sp = action("add", "add a rule (stored in execution.db)")
    sp.add_argument("--effect", choices=["allow", "ask", "deny"], required=True)
    sp.add_argument("--tool", required=True)
    sp.add_argument("--pattern", help="the argument pattern (engine/domain/rules.py); none: any")
    sp.add_argument("--scope", choices=["once", "thread", "room"], default="room")
    sp.add_argument("--thread", help="the thread of a thread (or once) rule")
    sp.add_argument("--expires", help="a duration from now (30m, 2h, 7d) or an ISO time")
    sp.add_argument("--reason", default="")
    sp = action("revoke", "revoke a rule of execution.db")
    sp.add_argument("rule_id")


MAX_EXPIRY = 100 * 365 * 86400  # seconds: a later expiry is a typo, not a plan


def expiry(text: str, now: float) -> float:
    """Unix seconds from a duration from `now` (`30m`, `2h`, `7d`) or an ISO time (local
    time when it names no zone)."""
    try:
        if m := _DURATION.match(text):
            at = now + float(m[1]) * _UNIT[m[2].lower()]
        else:
            at = datetime.fromisoformat(text.strip()).timestamp()
    except (ValueError, OverflowError, OSError):
        raise UsageError(f"--expires {text!r}: give a duration (30m, 2h, 7d) or an ISO time "
                         "(2026-01-31, 2026-01-31T14:00)") from None  # fmt: skip
    if not now - 1 < at <= now + MAX_EXPIRY:
        raise UsageError(f"--expires {text!r}: give a time from now to 100 years ahead")
    return at


async def rules(room: Room, args: argparse.Namespace) -> int:
    action = args.rules_action or "list"
    if action == "add":
        return await _add(room, args)
    if action == "revoke":
        return await _revoke(room, args)
    async with room_reader(room, "rules") as client:
        listed = await client.rules()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in listed]))
        return EXIT_OK
    if not listed:
        print("agentdeck: no rules (`agentdeck rules add`, or [[rules]] in agentdeck.toml)",
              file=sys.stderr)  # fmt: skip
        return EXIT_OK
    print(_table([cells(r, time.time()) for r in listed]))
    return EXIT_OK


async def _add(room: Room, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from engine.api.rule_models import NewRule

    expires = expiry(args.expires, time.time()) if args.expires else None
    try:
        body = NewRule(effect=args.effect, tool=args.tool, pattern=args.pattern,
                       scope=args.scope, thread_id=args.thread, expires_at=expires,
                       reason=args.reason, made_by="operator")  # fmt: skip
    except ValidationError as exc:
        raise UsageError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                   for e in exc.errors())) from None  # fmt: skip
    async with room_client(room, "rules") as client:
        try:
            rule = await client.add_rule(body)
        except Invalid as exc:
            raise UsageError(str(exc)) from None
    return said(rule, args.json, f"rule {rule.id} added: {_sentence(rule)}")


async def _revoke(room: Room, args: argparse.Namespace) -> int:
    async with room_client(room, "rules") as client:
        try:
            revoked = await client.revoke_rule(args.rule_id, "operator")
        except NotFound as exc:
            raise UsageError(str(exc)) from None
    return said(revoked, args.json, f"rule {revoked.rule.id} revoked: {_sentence(revoked.rule)}")


def cells(rule: Rule, now: float) -> tuple[str, ...]:
    """One rule as the list's columns (COLUMNS)."""
    scope = rule.scope + (f" {rule.thread_id}" if rule.thread_id else "")
    return (rule.id, rule.source, rule.effect, rule.tool, rule.shown_pattern(), scope,
            rule.made_by, _when(rule.made_at), _when(rule.expires_at, "never"),
            str(rule.uses), _when(rule.last_used, "never"), rule.state(now))  # fmt: skip


def _when(at: float | None, none: str = "—") -> str:
    return none if at is None else datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M")


def _sentence(rule: Rule) -> str:
    where = {"room": "room-wide", "thread": f"on thread {rule.thread_id}",
             "once": "once" + (f" on thread {rule.thread_id}" if rule.thread_id else "")}  # fmt: skip
    until = f", until {_when(rule.expires_at)}" if rule.expires_at is not None else ""
    return f"{rule.effect} {rule.tool} {rule.shown_pattern()!r} {where[rule.scope]}{until}"


def _table(rows: list[tuple[str, ...]]) -> str:
    one_line = [tuple(c.replace("\n", "⏎") for c in row) for row in rows]
    widths = [max(len(c) for c in col) for col in zip(COLUMNS, *one_line, strict=True)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in [COLUMNS, *one_line])  # fmt: skip
