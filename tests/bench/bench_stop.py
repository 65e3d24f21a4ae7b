"""How fast a cancel stops what runs (issue 31): from an operator's cancel, sent over the
room's socket as an attached console or the CLI sends it, until the turn is done and no
live process is left in its command's group.

    .venv/bin/python -m tests.bench.bench_stop [--turns 10]

Each turn runs `sleep 30` through the real shell tool (its approval left out: what is
measured is the stop); the clock starts once the command's process group is recorded.
A killed process is a zombie until its parent (or init, for an orphan) reaps it, so "no
live process" counts the group's members that are not zombies (engine/tools/orphans.py).
Target (information only): the turn done within a second.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.api.remote import RemoteClient
from engine.loops.server import serve_api
from engine.room import Room
from engine.tools import builtin
from engine.tools.orphans import members
from tests.helpers import msg, room_rows, runtime
from tests.scripted import first_then
from tests.wait import until

SHELL = dataclasses.replace(builtin.shell, approval="never")


def recorded(room: Path, turn_id: str) -> dict | None:
    """The process group the turn's shell call recorded (None: not yet)."""
    rows = room_rows(room, "SELECT meta FROM tool_calls WHERE turn_id = ?", turn_id)
    return json.loads(rows[0][0] or "{}").get("process") if rows else None


async def main(turns: int) -> None:
    took: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="agentdeck-bench-") as tmp:
        root = Path(tmp)
        script = first_then([("shell", {"command": "sleep 30", "timeout": 60})])
        async with runtime(root, script, tools=[SHELL], kind="run") as rt, serve_api(rt):
            async with RemoteClient(Room.at(root / "room")) as client:
                for i in range(turns):
                    turn = await rt.submit(msg("go", f"t{i}"))
                    process = await until(  # its process group recorded: the command runs
                        partial(recorded, root / "room", turn.turn_id), "the command runs"
                    )
                    pgid = process["pgid"]
                    start = time.perf_counter()
                    await client.cancel(turn.turn_id)
                    await rt.wait_turn(turn.turn_id)
                    done = time.perf_counter()
                    await until(partial(members, pgid), "no live process left",
                                ok=lambda left: not left)  # fmt: skip
                    took.append(((done - start) * 1000, (time.perf_counter() - start) * 1000))
    done_ms, gone_ms = [a for a, _ in took], [b for _, b in took]
    print(f"{turns} turns of `sleep 30`, cancelled over the room's socket:")
    print(f"  cancel -> turn done:            p50 {statistics.median(done_ms):6.1f} ms  "
          f"max {max(done_ms):6.1f} ms")  # fmt: skip
    print(f"  cancel -> no live process left: p50 {statistics.median(gone_ms):6.1f} ms  "
          f"max {max(gone_ms):6.1f} ms")  # fmt: skip
    verdict = "PASS" if max(done_ms) <= 1000 else "MISS"
    print(f"target (information only): {verdict}  the turn done within 1 s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    anyio.run(main, parser.parse_args().turns)
