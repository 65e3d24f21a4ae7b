"""What the shell sandbox costs a command (issue 34): `true` run N times through the real
shell tool with the sandbox on (the launcher: Landlock and a network namespace, then exec)
and off, side by side, with a bare `/bin/sh -c true` as the floor, in the same run.

    .venv/bin/python -m tests.bench.bench_sandbox [--runs 200]

Target (information only): the sandbox adds at most 30 ms at p95 (on minus off).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.shell.sandbox import Sandbox
from engine.tools import ToolContext
from engine.tools.builtin import shell

TARGET_MS = 30.0


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def timed(runs: int, make: object) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        await make()  # type: ignore[operator]
        out.append((time.perf_counter() - started) * 1000)
    return out


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        box = Sandbox("workspace-write", False, workspace)
        box.start()
        if not box.on:
            sys.exit(f"no sandbox here: {box.state}")
        on = ToolContext(workspace, sandbox=box)
        off = ToolContext(workspace)

        async def sandboxed() -> None:
            assert (await shell.call({"command": "true"}, on)).status == "success"

        async def plain() -> None:
            assert (await shell.call({"command": "true"}, off)).status == "success"

        online = ToolContext(workspace, sandbox=box, sandbox_choice="network")

        async def networked() -> None:  # no network namespace to make
            assert (await shell.call({"command": "true"}, online)).status == "success"

        async def bare() -> None:
            await anyio.run_process(["/bin/sh", "-c", "true"])

        async def python() -> None:  # the launcher's floor: the interpreter's start alone
            await anyio.run_process([sys.executable, "-I", "-S", "-c", "pass"])

        names = ("floor", "python", "off", "net", "on")
        rounds: dict[str, list[float]] = {name: [] for name in names}
        runners = {"floor": bare, "python": python, "off": plain, "net": networked,
                   "on": sandboxed}  # fmt: skip
        for _ in range(4):  # interleaved, so a busy moment falls on all of them
            for name in names:
                rounds[name] += await timed(runs // 4, runners[name])
        box.stop()
    print(f"shell `true`, {runs} runs each (ms)      p50      p95      max")
    for name, label in (("floor", "bare /bin/sh -c true"), ("python", "python -I -S -c pass"),
                        ("off", "shell tool, sandbox off"),
                        ("net", "sandbox on, with the network"),
                        ("on", "shell tool, sandbox on")):  # fmt: skip
        v = rounds[name]
        print(f"  {label:<30} {statistics.median(v):8.1f} {pct(v, 95):8.1f} {max(v):8.1f}")
    added = pct(rounds["on"], 95) - pct(rounds["off"], 95)
    print(
        f"\nthe sandbox adds {added:.1f} ms at p95 "
        f"({statistics.median(rounds['on']) - statistics.median(rounds['off']):.1f} at p50)"
    )
    print(f"target: at most {TARGET_MS:g} ms at p95 -> {'PASS' if added <= TARGET_MS else 'MISS'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    anyio.run(main, parser.parse_args().runs)
