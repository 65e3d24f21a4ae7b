"""The process the crash test kills: a runtime kept busy on a room until SIGKILL.

    python -m tests.crash_worker ROOM SEED      (or: python tests/crash_worker.py ROOM SEED)

It opens a Runtime on ROOM with a scripted model and three tools, prints `ready`, then
submits turns on several threads and decides some of the pending calls, forever. Every
tool execution appends "<call_id>\\n" to ROOM/executions.log (O_APPEND, write, fsync)
before it returns, so the test can count how often each call really ran; what the runtime
acknowledged (a turn seen done, a decision answered) goes to ROOM/acked.log.

The model (tests/scripted.py's, on the `random_calls` script), the tools and the config are
shared with tests/test_crash.py, which reopens the room with the same pieces after each kill.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.config import Config, StoreConfig
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.base import ModelRequest
from engine.runtime import Runtime
from engine.tools import Tool, ToolContext, tool
from tests.scripted import Reply, ScriptedModel, after_tools

LOG = "executions.log"
ACKED = "acked.log"  # what the runtime acknowledged: "done <turn_id>", "decision <id>"
THREADS = 4
APPROVAL_TOOL, IDEMPOTENT_TOOL, PLAIN_TOOL = "approve_op", "idem_op", "plain_op"
TOOL_NAMES = (APPROVAL_TOOL, IDEMPOTENT_TOOL, PLAIN_TOOL)
IDEMPOTENT = frozenset({IDEMPOTENT_TOOL})

_rng = random.Random()


def record(ctx: ToolContext) -> None:
    """One execution of one call, durably: the test counts these lines per call id."""
    fd = os.open(ctx.workspace.parent / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.call_id}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def make_tools(*, hang: bool = False) -> list[Tool]:
    """One tool that needs approval, one idempotent, one plain (neither).

    With `hang`, the approval tool never returns after recording its execution (for a
    deterministic kill in the middle of a replayed call).
    """

    @tool(name=APPROVAL_TOOL, approval="always")
    def approve_op(n: int, ctx: ToolContext) -> str:
        """A side effect an operator must approve (sync: runs in a worker thread)."""
        record(ctx)
        time.sleep(3600.0 if hang else _rng.uniform(0.0, 0.006))  # load: a kill may land here
        return f"approved op {n} done"

    @tool(name=IDEMPOTENT_TOOL, idempotent=True)
    async def idem_op(n: int, ctx: ToolContext) -> str:
        """A side effect that may safely run again."""
        await anyio.sleep(_rng.uniform(0.0, 0.004))  # load: a kill may land before the run
        record(ctx)
        await anyio.sleep(_rng.uniform(0.0, 0.004))  # load: ... or after it
        return f"idempotent op {n} done"

    @tool(name=PLAIN_TOOL)
    async def plain_op(n: int, ctx: ToolContext) -> str:
        """A side effect that must never run twice."""
        record(ctx)
        if _rng.random() < 0.5:
            await anyio.sleep(_rng.uniform(0.0, 0.005))  # load: a kill may land here
        return f"plain op {n} done"

    return [approve_op, idem_op, plain_op]


def acked(room: Path, what: str) -> None:
    """Note an acknowledgement (a process kill keeps what os.write handed the kernel)."""
    fd = os.open(room / ACKED, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{what}\n".encode())
    finally:
        os.close(fd)


def random_calls(
    rng: random.Random | None = None, tools: tuple[str, ...] = TOOL_NAMES, max_calls: int = 3
) -> Callable[[ModelRequest], Reply]:
    """The script of the crash test's model: a user message gets 1 to `max_calls` calls of
    tools drawn from `tools` (argument `n`, the call's place), tool results a line of text."""
    rng = rng or random.Random()

    def script(request: ModelRequest) -> Reply:
        msgs = request.messages
        if msgs and msgs[-1].role == "user":
            count = rng.randint(1, max_calls)
            return Reply(calls=[(rng.choice(tools), {"n": i}) for i in range(count)])
        return Reply(text=f"done after {len(after_tools(msgs))} tool result(s)")

    return script


def config_for(seed: int) -> Config:
    """Even seeds write with synchronous=FULL, odd ones with NORMAL."""
    return Config(store=StoreConfig(synchronous="FULL" if seed % 2 == 0 else "NORMAL"))


async def _chatter(rt: Runtime, thread_id: str, seed: int) -> None:
    i = 0
    while True:
        i += 1
        msg = Message(origin="invoke", sender="crash-worker", thread_id=thread_id,
                      text=f"seed {seed} message {i}")  # fmt: skip
        handle = await rt.submit(msg)
        if _rng.random() < 0.7:
            out = await rt.wait_turn(handle.turn_id)
            if out.status == "done":
                acked(rt.room.path, f"done {handle.turn_id}")
        await anyio.sleep(_rng.uniform(0.0, 0.01))  # load: the chatter's pace, random


async def _decider(rt: Runtime) -> None:
    while True:
        await anyio.sleep(_rng.uniform(0.001, 0.02))  # load: the decider's pace, random
        for p in await rt.pending():
            roll = _rng.random()
            if roll < 0.45:
                decision = Decision.approve(p.call_id, decided_by="crash-worker")
            elif roll < 0.6:
                decision = Decision.cancel(p.call_id, "no", decided_by="crash-worker")
            else:
                continue
            if await rt.decide(decision) in ("queued", "duplicate"):
                acked(rt.room.path, f"decision {decision.id}")


async def main(room: str, seed: int) -> None:
    _rng.seed(seed)
    async with Runtime.open(
        room, kind="run", provider=ScriptedModel(random_calls(random.Random(seed))),
        tools=make_tools(), config=config_for(seed), resume="all",
    ) as rt:  # fmt: skip
        print("ready", flush=True)
        async with anyio.create_task_group() as tg:
            for k in range(THREADS):
                tg.start_soon(_chatter, rt, f"thread-{k}", seed)
            tg.start_soon(_decider, rt)


async def approve_and_hang(room: str) -> None:
    """Approve every pending call; the approval tool records its run, then hangs."""
    async with Runtime.open(
        room, kind="decide", provider=ScriptedModel(random_calls()), tools=make_tools(hang=True),
        resume="none",
    ) as rt:  # fmt: skip
        for p in await rt.pending():
            await rt.decide(Decision.approve(p.call_id, decided_by="crash-worker"))
        print("ready", flush=True)
        await anyio.sleep_forever()


async def approve_builtin(room: str) -> None:
    """Approve every pending call of the built-in tools (the offline model's room), bound to
    the arguments shown; a `shell` call's command may then outlive this process."""
    from engine.providers.offline import OfflineModel
    from engine.tools.builtin import builtin_tools

    async with Runtime.open(
        room, kind="decide", provider=OfflineModel(delay=0), tools=builtin_tools(), resume="none"
    ) as rt:  # fmt: skip
        for p in await rt.pending():
            await rt.decide(Decision.approve(p.call_id, seen=p.args, decided_by="crash-worker"))
        print("ready", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m tests.crash_worker ROOM SEED|approve-and-hang|approve-builtin")
    if sys.argv[2] == "approve-and-hang":
        anyio.run(approve_and_hang, sys.argv[1])
    elif sys.argv[2] == "approve-builtin":
        anyio.run(approve_builtin, sys.argv[1])
    else:
        anyio.run(main, sys.argv[1], int(sys.argv[2]))
