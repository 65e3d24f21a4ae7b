"""One console over every room on the machine (issue 38): what an inbox of many rooms
costs, and how soon a killed owner shows gone.

    .venv/bin/python -m tests.bench.bench_inbox [--rooms 10] [--rounds 5]

`--rooms` rooms are started (`agentdeck start`, each its own process, in a registry and a
home of their own), a call waiting in each. Then, interleaved over `--rounds`:
`agentdeck inbox` over every room against the floor, `agentdeck inbox` with one room
registered (the same command: what is left is the cost of the rooms); target: the many
rooms within 2x the one. Then a console (Pilot, in this process) opens the overview: the
event streams each room serves (target: 1, the overview's light client), and, for up to
five rooms, the time from the SIGKILL of its owner to the overview's `owner gone`
(target: within 2 s; the registry is looked at every second). It measures; it never fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.wait import until_sync

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "engine.cli"]
RATIO_TARGET, GONE_TARGET = 2.0, 2.0


def timed(*args: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([*CLI, *args], capture_output=True, cwd=ROOT, env=env, check=True)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rooms", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-inbox-"))
    many, one = tmp / "run-many", tmp / "run-one"
    for run in (many, one):
        run.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "config"),
           "XDG_RUNTIME_DIR": str(many)}  # fmt: skip
    os.environ.update(env)
    rooms = []
    try:
        for i in range(args.rooms):
            room = tmp / f"room{i:02d}"
            (room / "tasks").mkdir(parents=True)
            subprocess.run([*CLI, "--room", str(room), "start"], env=env, cwd=ROOT, check=True,
                           capture_output=True)  # fmt: skip
            (room / "tasks" / "t.md").write_text(f"run `echo {i}`\n")
            rooms.append(room)
        first = sorted((many / "agentdeck" / "rooms").iterdir())[0]
        (one / "agentdeck" / "rooms").mkdir(parents=True, mode=0o700)
        shutil.copy(first, one / "agentdeck" / "rooms" / first.name)  # (one room's entry)

        def waiting() -> int:
            out = subprocess.run([*CLI, "inbox", "--json"], capture_output=True, text=True,
                                 cwd=ROOT, env=env)  # fmt: skip
            return len(json.loads(out.stdout)["calls"])

        until_sync(waiting, "every room's call waits", ok=lambda n: n == args.rooms, every=0.2)
        floor, rooms_time = [], []
        for _ in range(args.rounds):
            floor.append(timed("inbox", env={**env, "XDG_RUNTIME_DIR": str(one)}))
            rooms_time.append(timed("inbox", env=env))
        f, m = statistics.median(floor), statistics.median(rooms_time)
        print(f"agentdeck inbox, {args.rooms} rooms: {m * 1000:.0f} ms (median of {args.rounds}); "
              f"floor, one room: {f * 1000:.0f} ms; {m / f:.2f}x (target <= {RATIO_TARGET:g}x)")  # fmt: skip
        import anyio

        anyio.run(_overview, tmp, rooms)
    finally:
        for room in rooms:
            subprocess.run([*CLI, "--room", str(room), "stop"], capture_output=True, cwd=ROOT,
                           env=env)  # fmt: skip
        shutil.rmtree(tmp, ignore_errors=True)


async def _overview(tmp: Path, rooms: list[Path]) -> None:
    from console.screens.rooms import RoomsScreen
    from engine.api.remote import RemoteClient
    from engine.room import Room
    from tests.console.conftest import build

    app = build(tmp / "here")
    gone: list[float] = []
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("escape", "o")
        while not isinstance(app.screen, RoomsScreen):
            await pilot.pause(0.01)
        machine = app.screen.machine
        while sum(f.serving for f in machine.feeds.values()) < len(rooms) + 1:
            await pilot.pause(0.01)
        streams = [(await RemoteClient(Room.at(r)).info()).streams for r in rooms]
        print(f"event streams each room serves with the overview open: {sorted(set(streams))} "
              "(target: 1)")  # fmt: skip
        for room in rooms[:5]:
            feed = machine.feeds[Room.at(room).path]
            start = time.perf_counter()
            os.kill(feed.reg.pid, signal.SIGKILL)
            while feed.owner != "owner gone":
                await pilot.pause(0.005)
            gone.append(time.perf_counter() - start)
        await app.shutdown()
    print(f"owner gone after a SIGKILL: median {statistics.median(gone) * 1000:.0f} ms, most "
          f"{max(gone) * 1000:.0f} ms over {len(gone)} kills (target <= {GONE_TARGET:g} s)")  # fmt: skip


if __name__ == "__main__":
    main()
