"""The crash soak's CI share: two soaks of 10 SIGKILLs each of a busy `agentdeck run`
(tests/soak.py), on two workers at once, and every failure count must be 0.

SOAK_KILLS (default 10) sets the number of kills of each; SOAK_SEED fixes the random
choices (kill times, texts, decisions), not the timing. The long run is a command:
`.venv/bin/python -m tests.soak --kills 1000`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.soak import Options, run_soak
from tests.soak_checks import FAILURES

KILLS = int(os.environ.get("SOAK_KILLS", "10"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("part", [1, 2])
def test_crash_soak_loses_nothing_and_runs_nothing_twice(tmp_path: Path, part: int) -> None:
    seed = int(os.environ.get("SOAK_SEED", random.randrange(2**31))) + part
    said: list[str] = []
    tally = run_soak(Options(kills=KILLS, seed=seed, dir=tmp_path / "soak"), said.append)
    report = "\n".join(said)
    assert {kind: len(tally.failures[kind]) for kind in FAILURES} == dict.fromkeys(FAILURES, 0), (
        f"SOAK_SEED={seed}\n{report}"
    )
    # it tested something: kills met open work, and every part of the workload ran
    assert tally.kills == KILLS
    assert tally.busy_kills > 0, report
    for kind in ("submit", "done", "decision", "agentdeck decide", "shell runs", "task"):
        assert tally.seen[kind] > 0, f"no {kind} in the soak\n{report}"
