"""The README's runnable examples: its ```` ```sh tour ```` blocks, run in order as a
newcomer pastes them after `source .venv/bin/activate`, in a home folder of their own, on
the offline model (no key in the environment).

A command's expected exit status is 0, or the one its comment names (`# exits 3: ...`), so
what the README says happens is what the test checks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
FENCE = re.compile(r"^(\s*)```sh tour\s*\n(.*?)^\s*```", re.M | re.S)
EXITS = re.compile(r"#\s*exits (\d+)")
# What would reach a model or another room: a newcomer's shell has none of it.
SCRUB = ("AGENT_ROOM", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "ANTHROPIC_API_KEY",
         "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "NO_COLOR")  # fmt: skip


@dataclass(frozen=True)
class Command:
    line: str
    exits: int


def commands(text: str | None = None) -> list[Command]:
    """Every command of the tour blocks, in order (a line ending in `\\` continues)."""
    found: list[Command] = []
    for match in FENCE.finditer(README.read_text("utf-8") if text is None else text):
        pending = ""
        for raw in match.group(2).splitlines():
            line = pending + raw.strip()
            if line.endswith("\\"):
                pending = line[:-1].rstrip() + " "
                continue
            pending = ""
            if line and not line.startswith("#"):
                exits = EXITS.search(line)
                found.append(Command(line, int(exits.group(1)) if exits else 0))
    return found


def environment(home: Path) -> dict[str, str]:
    """A newcomer's shell: `home` as HOME, the checkout's venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUB}
    env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(command: Command, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command.line], env=env, cwd=env["HOME"], text=True,
                          capture_output=True, timeout=timeout)  # fmt: skip
