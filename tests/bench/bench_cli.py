"""The command line's answer time, against the floor of a process that reads the room.

    .venv/bin/python -m tests.bench.bench_cli [--rounds 15]

Each read-only command (`status`, `pending`, `rules list`, `history`, `channels`, `review`)
runs as a user runs it, `.venv/bin/agentdeck --room R COMMAND`, in a fresh process, on a
room nobody owns and on the same room while `agentdeck start` owns it; `decide` (a cancel:
a decision without a tool run after it) through that owner. Each is timed from before the
process starts to its exit, interleaved with the floor, `python -c "import sqlite3"` that
opens the room's execution.db read-only and counts its turns, so a machine that drifts moves
both. Medians over `--rounds`; the targets (issue 35): a read at most 2x the floor, `decide`
at most 3x. The modules are compiled first, as an installed agentdeck's are. It measures;
it never fails on time.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AGENTDECK = str(Path(sys.executable).with_name("agentdeck"))
READS = ("status", "pending", "rules list", "history", "channels", "review")
READ_TARGET, DECIDE_TARGET = 2.0, 3.0


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def cli(room: Path, command: str) -> list[str]:
    return [AGENTDECK, "--room", str(room), *command.split()]


def floor_argv(room: Path) -> list[str]:
    db = room / "execution.db"
    code = ("import sqlite3; c = sqlite3.connect('file:' + __import__('sys').argv[1] + "
            "'?mode=ro', uri=True); c.execute('SELECT count(*) FROM turns').fetchone()")  # fmt: skip
    return [sys.executable, "-c", code, str(db)]


def waiting_calls(room: Path, n: int, env: dict[str, str]) -> list[str]:
    """`n` calls waiting for a decision, one per thread, made through the room's owner."""
    ids = []
    for i in range(n):
        out = subprocess.run([*cli(room, "invoke --json"), "--thread", f"bench:{i}", "run `true`"],
                             env=env, capture_output=True, text=True)  # fmt: skip
        ids.append(json.loads(out.stdout)["pending"][0]["call_id"])
    return ids


def measure(commands: dict[str, list[str]], floor: list[str], rounds: int,
            env: dict[str, str]) -> tuple[dict[str, float], float]:  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in commands}
    floors: list[float] = []
    for _ in range(rounds):
        for name, argv in commands.items():
            floors.append(timed(floor, env))
            times[name].append(timed(argv, env))
    return {k: statistics.median(v) for k, v in times.items()}, statistics.median(floors)


def report(title: str, medians: dict[str, float], floor: float, target: float) -> None:
    print(f"\n{title} (floor {floor * 1000:.0f} ms, target <= {target:g}x)")
    for name, t in medians.items():
        ratio = t / floor
        print(
            f"  {name:<12} {t * 1000:6.0f} ms  {ratio:4.1f}x  {'PASS' if ratio <= target else 'MISS'}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    for package in ("engine", "console", "themes"):
        compileall.compile_dir(ROOT / package, quiet=1)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("AGENT_ROOM", None)
    tmp = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    room = tmp / "room"
    try:
        for i in range(20):  # some history to read
            subprocess.run([*cli(room, "invoke"), "--thread", f"t:{i % 4}", f"hello {i}"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=True)  # fmt: skip
        floor = floor_argv(room)
        reads = {c: cli(room, c) for c in READS}
        medians, f = measure(reads, floor, rounds, env)
        report("a room nobody owns", medians, f, READ_TARGET)
        subprocess.run(cli(room, "start"), env=env, check=True, stdout=subprocess.DEVNULL)
        try:
            medians, f = measure(reads, floor, rounds, env)
            report("the room owned by `agentdeck start`", medians, f, READ_TARGET)
            calls = iter(waiting_calls(room, rounds, env))
            decides: list[float] = []
            floors: list[float] = []
            for call in calls:
                floors.append(timed(floor, env))
                decides.append(timed(cli(room, f"decide {call} cancel"), env))
            report(
                "through the owner",
                {"decide": statistics.median(decides)},
                statistics.median(floors),
                DECIDE_TARGET,
            )
        finally:
            subprocess.run(cli(room, "stop"), env=env, stdout=subprocess.DEVNULL)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
