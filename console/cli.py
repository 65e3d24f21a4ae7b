"""The `agentdeck` entry point: the engine's command line, with the console plugged in.

`agentdeck` (or `agentdeck console`, with or without `--room`) goes straight to the
console without importing the engine's command line, so the first screen comes sooner.
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.room import Room


def _console_room(argv: list[str]) -> tuple[bool, str | None]:
    """(True, room) when argv asks for the console and nothing else."""
    args = list(argv)
    for at in (0, 2):  # `agentdeck console --room X` or `agentdeck --room X console`
        if len(args) > at and args[at] == "console":
            del args[at]
            break
    if not args:
        return True, None
    if len(args) == 2 and args[0] == "--room":
        return True, args[1]
    if len(args) == 1 and args[0].startswith("--room="):
        return True, args[0].split("=", 1)[1]
    return False, None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    console, room = _console_room(argv)
    if console:
        # The start (imports, the first screen) makes no garbage worth collecting, and
        # collections over its growing heap cost tens of ms: the console enables the
        # collector again, after freezing that heap, once the first screen is drawn.
        gc.disable()
        from engine.room import Room

        return _run_console(Room.at(room))
    from engine.cli import main as engine_main

    return engine_main(argv, run_console=_run_console)


def _run_console(room: Room) -> int:
    """The console, imported only when it opens: `agentdeck invoke` never loads Textual.
    A room it cannot start on (a bad agentdeck.toml, a read-only room) is said in one line, exit status 2."""
    from console.app import run_console
    from engine.config import ConfigError
    from engine.room import RoomError

    try:
        return run_console(room)
    except (ConfigError, RoomError) as exc:
        print(f"agentdeck: {exc}", file=sys.stderr)  # noqa: T201
        return 2


if __name__ == "__main__":
    sys.exit(main())
