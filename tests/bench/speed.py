"""The speed a person feels (issue 35): every figure beside its floor and its target.

    .venv/bin/python -m tests.bench.speed [--quick] [--only NAME ...]

Runs, one after the other (each in its own process, its output shown as it comes):
- cli: each read-only command and `decide` against a bare sqlite3 read (bench_cli);
- console: the first full screen against a minimal Textual app, and key -> action and
  key -> painted under the 20,000 events/s firehose (bench_console);
- short: 64 threads x five one-tool turns on the offline model: CPU per step and steps/s
  against the bare commit rate (bench_throughput --short --offline);
- scheduler: delay p99 at 140 arrivals/s with 64 turns running (bench_scheduler);
- memory: 100,000 threads through one runtime, RSS after warm-up (bench_memory);
- offline: the offline model's cost per step at 50/200/800 messages (bench_offline);
- peer: per loop against LangGraph + SqliteSaver at 200 and 800 messages (bench_steps
  --peer; needs `pip install -e '.[bench]'`, skipped without it).
Then every PASS/MISS line they printed, under the benchmark's name. `--quick` makes each
smaller (fewer rounds; 30,000 threads with an 8 MiB conversation cache, so that it fills
within the warm-up): the shape, in a few minutes. Numbers are
information; the exit status never depends on them.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time

PY = sys.executable
BENCHES: dict[str, tuple[list[str], list[str]]] = {  # name: (full, --quick) arguments
    "cli": (["-m", "tests.bench.bench_cli", "--rounds", "15"],
            ["-m", "tests.bench.bench_cli", "--rounds", "5"]),
    "console": (["tests/bench/bench_console.py", "--seconds", "10", "--starts", "15"],
                ["tests/bench/bench_console.py", "--seconds", "4", "--starts", "5"]),
    "short": (["-m", "tests.bench.bench_throughput", "--short", "--offline"],) * 2,
    "scheduler": (["-m", "tests.bench.bench_scheduler"],
                  ["-m", "tests.bench.bench_scheduler", "--threads", "300"]),
    "memory": (["-m", "tests.bench.bench_memory", "--model", "noop", "--concurrency", "16"],
               ["-m", "tests.bench.bench_memory", "--model", "noop", "--concurrency", "16",
                "--threads", "30000", "--every", "3000", "--cache-mb", "8"]),
    "offline": (["-m", "tests.bench.bench_offline"],) * 2,
    "peer": (["-m", "tests.bench.bench_steps", "--peer"],
             ["-m", "tests.bench.bench_steps", "--peer", "--threads", "3"]),
}  # fmt: skip


def run(name: str, argv: list[str]) -> list[str]:
    """Run one benchmark, echoing its output; its PASS/MISS lines."""
    print(f"\n===== {name}: {' '.join(argv)}", flush=True)
    if name == "peer" and importlib.util.find_spec("langgraph") is None:
        print("skipped: LangGraph is not installed (pip install -e '.[bench]')")
        return [f"SKIP  {name}: LangGraph not installed"]
    start = time.perf_counter()
    verdicts = []
    with subprocess.Popen([PY, *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as proc:  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            if "PASS" in line or "MISS" in line:
                verdicts.append(line.strip())
    print(f"({name}: {time.perf_counter() - start:.0f} s, exit {proc.returncode})")
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs: the shape")
    parser.add_argument("--only", nargs="+", choices=list(BENCHES), help="only these")
    args = parser.parse_args()
    found = {name: run(name, BENCHES[name][args.quick])
             for name in args.only or list(BENCHES)}  # fmt: skip
    print("\n===== issue 35's targets (information only)")
    for name, verdicts in found.items():
        print(f"{name}:")
        for line in verdicts or ["(no verdict printed)"]:
            print(f"  {line}")


if __name__ == "__main__":
    main()
