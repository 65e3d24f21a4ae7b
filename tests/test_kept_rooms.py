"""Rooms made by earlier releases (tests/rooms/NAME, written once by `python -m
tests.rooms.make NAME`) open with the current code, as the command line opens them, and
resume their waiting call: their finished turns, their decision and their rule are read
as they were, the waiting call is approved and runs once, and its turn ends.

Each kept room runs on SQLite (a copy of its execution.db) and on PostgreSQL (its dump
loaded into a database of the test's server)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent / "rooms"
KEPT = sorted(p.name for p in HERE.iterdir() if (p / "room").is_dir())
AGENTDECK = Path(sys.executable).parent / "agentdeck"


def cli(room: Path, env: dict[str, str], *args: str, code: int = 0) -> Any:
    out = subprocess.run([str(AGENTDECK), "--room", str(room), *args, "--json"],
                         capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                         timeout=300)  # fmt: skip
    assert out.returncode == code, f"agentdeck {' '.join(args)}: {out.returncode}\n{out.stderr}"
    return json.loads(out.stdout)


def resumes(name: str, room: Path, env: dict[str, str]) -> None:
    turns = cli(room, env, "history")
    by_thread = {t["thread_id"]: t for t in turns}
    assert sorted(by_thread) == ["invoke:default", "ops", "task:notes", "task:plan"]
    assert by_thread["invoke:default"]["answer"] == "`calc` returned: 5"
    assert by_thread["task:plan"]["status"] == "done"
    notes = cli(room, env, "history", "--turn", by_thread["task:notes"]["turn_id"])
    assert [(d["action"], d["status"]) for d in notes["decisions"]] == [("resume", "applied")]
    assert [(r["tool"], r["effect"], r["pattern"]) for r in cli(room, env, "rules")] == [
        ("shell", "allow", "git status*")
    ]

    [call] = cli(room, env, "pending")
    assert (call["tool"], call["args"]) == ("shell", {"command": f"echo kept from {name}"})
    assert call["awaiting"] == "decision"  # typed as it opened (issue 27)
    out = cli(room, env, "decide", call["call_id"], "approve")
    assert (out["status"], out["reason"]) == ("done", "natural")
    assert [(c["call_id"], c["status"]) for c in out["calls"]] == [(call["call_id"], "succeeded")]
    assert f"kept from {name}" in out["text"]
    assert cli(room, env, "pending") == []
    again = cli(room, env, "history", "--turn", call["turn_id"])
    assert [c["status"] for c in again["calls"]] == ["succeeded"]
    # what its turns spent before usage was kept is in the usage table (the migration's)
    spent = cli(room, env, "usage", "--by", "thread", "--since", "2000-01-01")
    assert {r["key"] for r in spent["rows"]} == set(by_thread)
    assert spent["total"]["input_tokens"] == sum(r["input_tokens"] for r in spent["rows"]) > 0


def clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("AGENTDECK_STORE_URL", None)
    return {**env, "HOME": str(tmp_path / "home")}


@pytest.mark.parametrize("name", KEPT)
def test_a_kept_sqlite_room_opens_and_resumes_its_waiting_call(name: str, tmp_path: Path) -> None:
    room = tmp_path / "room"
    shutil.copytree(HERE / name / "room", room)
    resumes(name, room, clean_env(tmp_path))


@pytest.mark.parametrize("name", KEPT)
def test_a_kept_postgresql_room_opens_and_resumes_its_waiting_call(
    name: str, tmp_path: Path, pg_cluster: Any
) -> None:
    url = pg_cluster.database()
    psql = shutil.which("psql") or str(pg_cluster.bin / "psql")
    loaded = subprocess.run([psql, "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1",
                             "--dbname", url, "--file", str(HERE / name / "store.pg.sql")],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    room = tmp_path / "room"
    shutil.copytree(HERE / name / "room" / "workspace", room / "workspace")
    resumes(name, room, {**clean_env(tmp_path), "AGENTDECK_STORE_URL": url})
