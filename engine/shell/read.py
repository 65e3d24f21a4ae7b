"""Reading a shell command once for all the rules a call is matched against: a small
cache of parses, and reading a long command ahead on a worker thread (engine/turn/gate.py)
so that matching it on the event loop reads nothing."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from engine.shell import words as shell_words

LONG_COMMAND = 1024  # characters of a command read on a worker thread (about 5 ms or more)


def read_ahead(tool: str, args: Any) -> bool:
    """Whether matching this call is slow enough (a long shell command: up to ~50 ms for
    MAX_READ) that its command should be read first by `prepare`, off the event loop."""
    command = args.get("command") if tool == "shell" and isinstance(args, dict) else None
    return isinstance(command, str) and len(command) > LONG_COMMAND


def prepare(tool: str, args: Any) -> None:
    """Read the call's command into the parse cache (thread-safe: run it on a worker
    thread), so that `RuleBook.decide` on the event loop finds it read."""
    if read_ahead(tool, args):
        _parse(args["command"].strip())


@lru_cache(maxsize=16)
def _parse(command: str) -> shell_words.Parse:
    """The command parsed once for all the rules a call is matched against."""
    return shell_words.parse(command)
