"""`agentdeck run` killed with SIGKILL while task files arrive: every task still becomes
exactly one turn request (none lost, none twice), and execution.db stays sound.

PULSE_CRASH_KILLS (default 8) sets the number of kills; PULSE_CRASH_SEED fixes the random
choices (kill delays), not the timing.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.wait import PATIENCE, until_sync

ROOT = Path(__file__).resolve().parent.parent
KILLS = int(os.environ.get("PULSE_CRASH_KILLS", "8"))
BATCH = 30  # task files written while each runtime runs


def start(room: Path) -> subprocess.Popen[str]:
    code = "import sys; from engine.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "--room", str(room)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=ROOT)  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("agentdeck run "), "the runtime did not start"
    return proc


def fired(room: Path) -> set[str]:
    try:
        return set(json.loads((room / "pulse.json").read_text())["tasks"])
    except (FileNotFoundError, ValueError):
        return set()


@pytest.mark.timeout(6 * PATIENCE)  # eight kills, then every task's turn: half a minute
def test_sigkill_while_tasks_arrive_runs_each_task_once(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("PULSE_CRASH_SEED", "13")))
    room = tmp_path / "room"
    (room / "tasks").mkdir(parents=True)
    (room / "agentdeck.toml").write_text("[pulse]\ninterval = 0.02\n")
    names: list[str] = []
    for kill in range(KILLS):
        proc = start(room)
        try:
            for i in range(BATCH):
                names.append(f"k{kill:02d}_{i:02d}")
                (room / "tasks" / f"{names[-1]}.md").write_text(f"Task {names[-1]}.")
                if i % 10 == 0:
                    time.sleep(rng.uniform(0.0, 0.05))  # load: tasks arrive at a random pace
            time.sleep(rng.uniform(0.0, 0.3))  # load: the kill's moment, random
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()  # type: ignore[union-attr]
    proc = start(room)
    try:
        until_sync(lambda: sorted(set(names) ^ fired(room)), "every task fired, once",
                   ok=lambda unlike: not unlike, within=1.5 * PATIENCE, every=0.1)  # fmt: skip
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=PATIENCE)
    assert fired(room) == set(names)
    with closing(sqlite3.connect(room / "execution.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = conn.execute(
            "SELECT thread_id, count(*), group_concat(status) FROM turn_requests GROUP BY 1"
        ).fetchall()
    per_task = {thread.removeprefix("task:"): (n, statuses) for thread, n, statuses in rows}
    assert set(per_task) == set(names), "a task never became a request"
    twice = {name: got for name, got in per_task.items() if got[0] != 1}
    assert twice == {}, f"{len(twice)} of {len(names)} tasks became more than one request"
    assert {statuses for _, statuses in per_task.values()} <= {"admitted", "queued"}
