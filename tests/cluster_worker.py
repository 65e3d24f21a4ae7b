"""The process the cluster's process tests kill: one worker of a cluster on PostgreSQL.

    python -m tests.cluster_worker ROOM URL NAME [LEASE_SECONDS]

It opens `Runtime.open(ROOM, kind="run")` as worker NAME of the cluster on URL (each
worker has a room of its own; the rooms of one cluster are folders of one base folder),
serves the room's API on ROOM/agent.sock, prints `ready <run id>` and runs turns until it
is killed. The test (tests/test_cluster_processes.py) is the driver: it submits turns,
reads pending calls and decides them through the workers' APIs, through any worker.

The model and the tools are those of tests/crash_worker.py, sharing one log: every tool
execution appends "<call id> <worker>" to BASE/executions.log (O_APPEND, fsync) before
the tool goes on, so the test counts how often each call ran across the whole cluster and
knows which worker ran it. A message whose text is `hang <tool>` gets one call of that
tool with n = -1 (`once <tool>`: n = 0), and such a call hangs after recording its execution: a deterministic
point to kill its worker mid-tool-call (the idempotent tool hangs only on its first run,
so the run that recovery repeats ends).
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.config import ClusterConfig, Config, StoreConfig
from engine.providers.base import ModelRequest
from engine.runtime import Runtime
from engine.tools import Tool, ToolContext, tool
from tests.crash_worker import APPROVAL_TOOL, IDEMPOTENT_TOOL, PLAIN_TOOL, random_calls
from tests.scripted import Reply, ScriptedModel

LOG = "executions.log"  # in the folder holding the cluster's rooms
HANG = "hang "  # a message `hang <tool>`: one call of <tool> that hangs once it ran
ONCE = "once "  # a message `once <tool>`: one call of <tool> (that does not hang)
_rng = random.Random()
_worker = ""


def log_path(ctx: ToolContext) -> Path:
    return ctx.workspace.parent.parent / LOG  # ROOM/workspace -> BASE/executions.log


def ran_before(ctx: ToolContext) -> bool:
    """Whether some worker already recorded an execution of this call."""
    path = log_path(ctx)
    return path.exists() and any(
        line.split()[0] == ctx.call_id for line in path.read_text().splitlines() if line
    )


def record(ctx: ToolContext) -> None:
    """One execution of one call, durably, with the worker that ran it."""
    fd = os.open(log_path(ctx), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.call_id} {_worker}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def make_tools() -> list[Tool]:
    """One tool that needs approval, one idempotent, one plain (neither); n < 0 hangs."""

    @tool(name=APPROVAL_TOOL, approval="always")
    def approve_op(n: int, ctx: ToolContext) -> str:
        """A side effect an operator must approve (sync: runs in a worker thread)."""
        record(ctx)
        time.sleep(3600.0 if n < 0 else _rng.uniform(0.0, 0.006))  # load: a kill may land here
        return f"approved op {n} done"

    @tool(name=IDEMPOTENT_TOOL, idempotent=True)
    async def idem_op(n: int, ctx: ToolContext) -> str:
        """A side effect that may safely run again."""
        hang = n < 0 and not ran_before(ctx)
        record(ctx)
        await anyio.sleep(3600.0 if hang else _rng.uniform(0.0, 0.004))  # load: hangs till killed
        return f"idempotent op {n} done"

    @tool(name=PLAIN_TOOL)
    async def plain_op(n: int, ctx: ToolContext) -> str:
        """A side effect that must never run twice."""
        record(ctx)
        await anyio.sleep(3600.0 if n < 0 else _rng.uniform(0.0, 0.005))  # load: hangs till killed
        return f"plain op {n} done"

    return [approve_op, idem_op, plain_op]


def script(rng: random.Random):  # noqa: ANN201
    """crash_worker's random calls, but `hang <tool>` gets one hanging call of <tool>."""
    calls = random_calls(rng)

    def answer(request: ModelRequest) -> Reply:
        msgs = request.messages
        text = msgs[-1].text if msgs and msgs[-1].role == "user" else ""
        for prefix, n in ((HANG, -1), (ONCE, 0)):
            if text.startswith(prefix):
                return Reply(calls=[(text.removeprefix(prefix).strip(), {"n": n})])
        return calls(request)

    return answer


def config_for(url: str, name: str, lease: float) -> Config:
    return Config(store=StoreConfig(url=url),
                  cluster=ClusterConfig(enabled=True, worker=name, lease_seconds=lease))  # fmt: skip


async def main(room: str, url: str, name: str, lease: float) -> None:
    from engine.loops.server import serve_api

    global _worker
    _worker = name
    seed = int.from_bytes(os.urandom(4), "big")
    _rng.seed(seed)
    async with (
        Runtime.open(room, kind="run", provider=ScriptedModel(script(random.Random(seed))),
                     tools=make_tools(), config=config_for(url, name, lease)) as rt,
        serve_api(rt),
    ):  # fmt: skip
        print(f"ready {rt.run_id}", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: python -m tests.cluster_worker ROOM URL NAME [LEASE_SECONDS]")
    lease = float(sys.argv[4]) if len(sys.argv) == 5 else 1.5
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], lease)
