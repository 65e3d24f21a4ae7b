"""A runtime process of the cluster benchmark (bench_cluster.py): one worker of a cluster, or
the SQLite room it is compared with.

    python tests/bench/cluster_child.py ROOM [--hang]

It opens ROOM as `agentdeck run` does (`Runtime.open(kind="run")`, the room's agentdeck.toml
says which store and whether it is a cluster's worker), prints one JSON line
`{"run": RUN_ID, "pid": PID}` once open, then answers commands, one JSON object a line on
stdin, with one JSON line on stdout each:

- `{"op": "submit", "threads": [...], "text": TEXT, "turns": K}`: K turns on each thread,
  submitted through this runtime; answers `{"turns": [TURN_ID, ...]}`.
- `{"op": "decide", "call": CALL_ID}`: approve the call with the arguments it has; answers
  `{"status": ..., "at": WALL_CLOCK}`, `at` taken the moment `decide` returned.

End of stdin closes the runtime (a worker leaves the cluster, its leases given back).

The model has no latency and reads the turn's text: `go N` calls the no-op tool `noop` until
the turn has N results, then answers; `hold` calls `hold` (idempotent) once, which returns
at once unless this process was started with `--hang` (then it never returns: a turn in
flight to kill); `ask` calls `ask`, which needs approval, so the turn waits for a decision.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.base import ModelEvent, ModelRequest, StopEvent, TextDelta, ToolCallDelta
from engine.runtime import Runtime
from engine.tools import tool

HANG = False  # set by --hang: `hold` never returns in this process


@tool(name="noop")
async def noop() -> str:
    """Does nothing."""
    return "ok"


@tool(name="hold", idempotent=True)
async def hold() -> str:
    """Returns at once, or never in a process started with --hang."""
    if HANG:
        await anyio.sleep_forever()
    return "held"


@tool(name="ask", approval="always")
async def ask() -> str:
    """Needs an approval."""
    return "approved"


class BenchModel:
    """Zero latency; what a turn does is in its text (see the module's docstring)."""

    name = "bench"
    model = "cluster-1"

    def __init__(self) -> None:
        self.ids = itertools.count()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        results, text = 0, ""
        for m in reversed(request.messages):
            if m.role == "user":
                text = m.text
                break
            results += m.role == "tool"
        word, _, arg = text.partition(" ")
        want = {"go": int(arg or 1), "hold": 1, "ask": 1}.get(word, 0)
        if results < want:
            name = "noop" if word == "go" else word
            yield ToolCallDelta(index=0, id=f"c{next(self.ids)}", name=name, arguments="{}")
            yield StopEvent(reason="tool_use")
        else:
            yield TextDelta(text="done")
            yield StopEvent(reason="end_turn")


def reply(obj: object) -> None:
    print(json.dumps(obj), flush=True)


async def serve(room: Path) -> None:
    async with Runtime.open(room, kind="run", provider=BenchModel(), tools=[noop, hold, ask],
                            plugins=[]) as rt:  # fmt: skip
        reply({"run": rt.run_id, "pid": os.getpid()})
        while line := await anyio.to_thread.run_sync(sys.stdin.readline):
            cmd = json.loads(line)
            if cmd["op"] == "submit":
                turns = []
                for _ in range(cmd["turns"]):
                    for thread in cmd["threads"]:
                        handle = await rt.submit(Message(
                            origin="invoke", sender="bench", thread_id=thread, text=cmd["text"]))  # fmt: skip
                        turns.append(handle.turn_id)
                reply({"turns": turns})
            elif cmd["op"] == "decide":
                row = await rt.store.fetchone("turns.call_row", (cmd["call"],))
                assert row is not None, cmd
                status = await rt.decide(
                    Decision.approve(cmd["call"], args=json.loads(row["args"]))
                )
                reply({"status": status, "at": time.time()})
            else:
                raise ValueError(f"unknown command {cmd!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("room", type=Path)
    parser.add_argument("--hang", action="store_true", help="`hold` never returns here")
    args = parser.parse_args()
    HANG = args.hang
    anyio.run(serve, args.room)
