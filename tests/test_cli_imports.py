"""The light client path (issues 27 and 35): a read-only command loads what it runs and
nothing heavier. Each command runs in a fresh interpreter against a room a background
runtime owns (history reads the room itself), and against a room nobody owns (read without
opening a run), and lists the modules it loaded, and whether it built the config's schema."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from tests.wait import PATIENCE

# Never on a command line: the API's server, the console, the runtime, the other store,
# httpx's own command line (click, pygments, rich).
NEVER = ("fastapi", "starlette", "uvicorn", "textual", "rich", "click", "pygments", "httpx",
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
    "history --limit 1": ("engine.api.models", "engine.decisions.review", "engine.services.scheduler",
                          "engine.config"),
    "review": ("engine.domain.rules", "engine.config", "engine.services.scheduler", "aiosqlite"),
    "audit": ("engine.domain.rules", "engine.decisions.review", "engine.config", "engine.services.scheduler",
              "engine.api.rule_models", "engine.store", "aiosqlite"),
}  # fmt: skip
# A room nobody owns: read from its store, never by opening a run (the runtime's modules
# are in NEVER); the schema of agentdeck.toml's models is built only for what is read
# (`rules` reads the whole file, as the runtime does: a rule may name an [[mcp]] server's tool).
NOT_USED_FREE = {
    "pending": ("engine.services.scheduler", "engine.api.rule_models"),
    "rules": ("engine.services.scheduler",),
    "review": ("engine.services.scheduler", "engine.domain.rules"),
    "history --limit 1": ("engine.config", "engine.api.models", "engine.services.scheduler"),
    "break list": ("engine.config", "engine.services.scheduler", "engine.api.break_models"),
}  # fmt: skip
# Answered off the owner's socket (engine/cli/light.py): no event loop, no pydantic.
QUICK = ("status", "pending", "pending --json", "status --json", "break list", "break --json")
BUILT = "engine.config:Config (schema built)"
LOADED = (
    "import json, sys\nfrom engine.cli import main\ncode = main(sys.argv[1:])\n"
    "config = sys.modules.get('engine.config')\n"
    f"built = ['{BUILT}'] if config and config.Config.__pydantic_complete__ else []\n"
    "print(json.dumps(sorted(sys.modules) + built), file=sys.stderr)\n"
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


@pytest.fixture(scope="module")
def free_room(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A room with a turn in its history and nobody owning it."""
    room = tmp_path_factory.mktemp("free") / "room"
    subprocess.run([sys.executable, "-m", "engine.cli", "--room", str(room), "invoke", "hi"],
                   check=True, capture_output=True, timeout=PATIENCE * 2)  # fmt: skip
    return room


def loaded_by(room: Path, command: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", LOADED, "--room", str(room), *command.split()],
                          capture_output=True, text=True, timeout=PATIENCE * 2)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("command", list(NOT_USED))
def test_a_read_only_command_loads_only_what_it_runs(owned_room: Path, command: str) -> None:
    loaded = loaded_by(owned_room, command)
    heavy = [m for m in (*NEVER, BUILT, *NOT_USED[command]) if m in loaded]
    assert heavy == [], f"`agentdeck {command}` loaded {heavy}"


@pytest.mark.parametrize("command", list(NOT_USED_FREE))
def test_a_room_nobody_owns_is_read_without_a_run_or_the_configs_schema(
    free_room: Path, command: str
) -> None:
    loaded = loaded_by(free_room, command)
    built = () if command == "rules" else (BUILT,)
    heavy = [m for m in (*NEVER, *built, *NOT_USED_FREE[command]) if m in loaded]
    assert heavy == [], f"`agentdeck {command}` on a free room loaded {heavy}"


@pytest.mark.parametrize("command", QUICK)
def test_a_quick_read_loads_no_event_loop_and_no_pydantic(owned_room: Path, command: str) -> None:
    loaded = loaded_by(owned_room, command)
    heavy = [m for m in (*NEVER, "asyncio", "anyio", "pydantic", "engine.config") if m in loaded]
    assert heavy == [], f"`agentdeck {command}` loaded {heavy}"


def test_diff_reads_the_history_without_a_run_or_the_config(free_room: Path) -> None:
    """`agentdeck diff` (issue 37) reads two turns as `history` does: the reader, nothing of
    the runtime, the API's server or its models, or agentdeck.toml."""
    with closing(sqlite3.connect(f"file:{free_room / 'execution.db'}?mode=ro", uri=True)) as db:
        [(turn,)] = db.execute("SELECT id FROM turns").fetchall()
    loaded = loaded_by(free_room, f"diff {turn} {turn}")
    more = (
        "engine.config",
        "engine.api.models",
        "engine.services.scheduler",
        "engine.domain.rules",
    )
    heavy = [m for m in (*NEVER, BUILT, *more) if m in loaded]
    assert heavy == [], f"`agentdeck diff` loaded {heavy}"
