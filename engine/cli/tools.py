"""`agentdeck tools`: every tool the agent has, where it comes from (built in, or which MCP
server), how it is approved and by which rules, its calls and errors this run; each MCP
server's state; the shell's sandbox. Through the owner's API when the room is owned (its
servers as they run), else read from agentdeck.toml (its servers not running)."""

from __future__ import annotations

import argparse

from engine.cli.common import EXIT_OK, room_reader
from engine.room import Room


def _safe(text: str) -> str:
    """A server's or tool's words as text on one line (no control characters)."""
    return "".join(c if c.isprintable() else "?" for c in text)


async def tools(room: Room, args: argparse.Namespace) -> int:
    async with room_reader(room, "tools") as client:
        view = await client.tools()
    if args.json:
        print(view.model_dump_json(indent=2))
        return EXIT_OK
    width = max((len(t.name) for t in view.tools), default=10)
    for t in view.tools:
        marks = ", ".join(m for m, on in (("read-only", t.read_only), ("idempotent", t.idempotent))
                          if on)  # fmt: skip
        used = f"  {t.calls} calls, {t.errors} failed" if t.calls else ""
        print(f"{_safe(t.name):<{width}}  {t.source:<10} {t.approval:<12} "
              f"{marks:<22}{used}".rstrip())  # fmt: skip
        for rule in t.rules:
            print(f"{'':<{width}}  rule: {_safe(rule)}")
    for s in view.servers:
        why = f": {_safe(s.why)}" if s.why else ""
        print(f"\nMCP server {s.name} ({_safe(s.target)}): {s.state}{why}; {s.tools} tools"
              + (f", {s.restarts} restarts" if s.restarts else ""))  # fmt: skip
    print(f"\nshell sandbox: {_safe(view.sandbox)}")
    return EXIT_OK
