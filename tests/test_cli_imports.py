"""The light client path (issue 27): a read-only command loads what it runs and nothing
heavier. Each command runs in a fresh interpreter against a room a background runtime owns
(or, for history and info, reads the room itself), and lists the modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.wait import PATIENCE

# Never on a command line: the API's server, the console, the runtime, the other store,
# httpx's own command line (click, pygments, rich).
NEVER = ("fastapi", "starlette", "uvicorn", "textual", "rich", "click", "pygments",
         "engine.runtime", "engine.api.local", "engine.api.app", "engine.turn",
         "engine.providers", "engine.loops", "psycopg")  # fmt: skip
# What each command must not load besides: the models and modules of operations it does
# not use.
NOT_USED = {
    "status": ("engine.domain.rules", "engine.decisions.review", "engine.config", "engine.services.scheduler",
               "engine.api.rule_models", "aiosqlite"),
    "pending": ("engine.domain.rules", "engine.decisions.review", "engine.config", "engine.services.scheduler",
                "engine.domain.scheduler_stats", "engine.api.rule_models", "aiosqlite"),
    "rules": ("engine.decisions.review", "engine.config", "engine.services.scheduler", "aiosqlite"),
    "channels": ("engine.domain.rules", "engine.decisions.review", "engine.services.scheduler", "aiosqlite"),
    "history --limit 1": ("httpx", "engine.api.models", "engine.decisions.review", "engine.services.scheduler"),
}  # fmt: skip
LOADED = (
    "import json, sys\nfrom engine.cli import main\ncode = main(sys.argv[1:])\n"
    "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
)


@pytest.fixture(scope="module")
def owned_room(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    room = tmp_path_factory.mktemp("light") / "room"
    cli = [sys.executable, "-m", "engine.cli", "--room", str(room)]
    subprocess.run([*cli, "start"], check=True, capture_output=True, timeout=PATIENCE * 2)
    try:
        yield room
    finally:
        subprocess.run([*cli, "stop"], capture_output=True, timeout=PATIENCE * 2)


@pytest.mark.parametrize("command", list(NOT_USED))
def test_a_read_only_command_loads_only_what_it_runs(owned_room: Path, command: str) -> None:
    done = subprocess.run([sys.executable, "-c", LOADED, "--room", str(owned_room),
                           *command.split()], capture_output=True, text=True,
                          timeout=PATIENCE * 2)  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    heavy = [m for m in (*NEVER, *NOT_USED[command]) if m in loaded]
    assert heavy == [], f"`agentdeck {command}` loaded {heavy}"
