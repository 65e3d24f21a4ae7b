"""A second process that owns a room and keeps writing to it, for the history screen test.

    python -m tests.console.history_writer ROOM [TURNS]

It opens the Runtime on ROOM (taking ownership), prints `ready`, then runs TURNS turns
(default 400) on a few threads, each calling a tool, with a short pause between them, and
prints `done`. The test browses the room's history meanwhile and kills it when finished.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.config import Config
from engine.runtime import Runtime
from tests.history_seed import add, boom, msg, script, shell
from tests.scripted import ScriptedModel


async def write(room: Path, turns: int) -> None:
    async with Runtime.open(room, kind="run", provider=ScriptedModel(script),
                            tools=[add, shell, boom], config=Config()) as rt:  # fmt: skip
        print("ready", flush=True)
        for i in range(turns):
            await rt.run_turn(msg(f"writer-{i % 3}", f"add writer turn {i} bulk", "invoke"))
            await anyio.sleep(0.005)  # load: the writer's pace, so readers get the room too
    print("done", flush=True)


if __name__ == "__main__":
    anyio.run(write, Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 400)
