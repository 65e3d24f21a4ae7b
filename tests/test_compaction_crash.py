"""A SIGKILL during a compaction (issue 32): the room resumes with exactly one summary for
it, whether the kill came before its marker was written (it is made again) or after (it is
read back, never made twice)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import room_rows, runtime
from tests.scripted import add
from tests.test_compaction import CountingModel, window
from tests.wait import until_sync

pytestmark = [pytest.mark.anyio, pytest.mark.process]
ROOT = Path(__file__).resolve().parent.parent


def kill_at(room: Path, stage: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "tests.compaction_worker", str(room), stage],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        until_sync(lambda: (room / "stage").exists(), f"the worker at {stage}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()  # (reaps it and closes its pipes)


def markers(room: Path) -> list[dict]:
    bodies = room_rows(room, "SELECT body FROM messages WHERE role = 'system' ORDER BY seq")
    return [json.loads(b)["compaction"] for (b,) in bodies]


@pytest.mark.parametrize("stage", ["summary", "after"])
async def test_a_kill_during_a_compaction_resumes_with_exactly_one_summary(
    tmp_path: Path, stage: str
) -> None:
    room = tmp_path / "room"
    kill_at(room, stage)
    before = markers(room)
    assert len(before) == (0 if stage == "summary" else 1)
    model = CountingModel(window=3000, scale=1.0)
    async with runtime(tmp_path, model, tools=[add], config=window(3000), kind="run",
                       resume="all") as rt:  # fmt: skip
        interrupted = room_rows(room, "SELECT id FROM turns WHERE status != 'done'")
        assert len(interrupted) == 1
        outcome = await rt.wait_turn(interrupted[0][0])
    assert (outcome.status, outcome.reason) == ("done", "natural")
    after = markers(room)
    assert len(after) == 1 and after[0]["covers"] > 0  # one summary, made once
    summaries = [
        s for (s,) in room_rows(room, "SELECT summary FROM steps WHERE kind = 'compaction'")
    ]
    assert len(summaries) == 1
