"""The `agentdeck` entry point: the engine's command line, with the console plugged in."""

from __future__ import annotations

import sys

from engine.cli import main as engine_main


def main(argv: list[str] | None = None) -> int:
    from console.app import run_console

    return engine_main(argv, run_console=run_console)


if __name__ == "__main__":
    sys.exit(main())
