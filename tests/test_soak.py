"""The crash soak's CI share: 25 SIGKILLs of a busy `agentdeck run` (tests/soak.py), and
every failure count must be 0.

SOAK_KILLS (default 25) sets the number of kills; SOAK_SEED fixes the random choices
(kill times, texts, decisions), not the timing. The long run is a command:
`.venv/bin/python -m tests.soak --kills 1000`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.soak import Options, run_soak
from tests.soak_checks import FAILURES

KILLS = int(os.environ.get("SOAK_KILLS", "25"))


@pytest.mark.timeout(600)
def test_crash_soak_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    seed = int(os.environ.get("SOAK_SEED", random.randrange(2**31)))
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
