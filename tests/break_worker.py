"""The process tests/test_breakpoints_crash.py kills: a runtime with a turn at a breakpoint.

    python -m tests.break_worker ROOM MODE

MODE `pause-inference`, `pause-call` or `pause-result`: set a breakpoint of that kind (an
inference one once; call and result ones on the tool `op`, room-wide), run a turn (`go op 2`: two calls of `op`)
until it pauses, print `paused CALL_ID`, and wait to be killed.

MODE `step-op` or `step-idem`: the room's turn waits at a pause before its calls; decide
`step` on it, print `stepped`, and wait to be killed: the released call (of `op`, or of the
idempotent `idem`) records its execution and blocks, so the kill lands after the step is
applied and before the pause it leads to. MODE `step-model`: the room's turn waits at a
pause before an inference; decide `step` on it: the model (asked once) blocks the same way.

Every tool execution appends "<call_id>\\n" to ROOM/executions.log (tests/crash_worker.py's
`record`: O_APPEND, fsync), so the test counts how often each call really ran; a model
asked appends a line to ROOM/asked.log.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.api.break_models import NewBreakpoint
from engine.api.local import LocalClient
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.providers.base import ModelEvent, ModelRequest
from engine.runtime import Runtime
from engine.tools import Tool, ToolContext, tool
from tests.crash_worker import record
from tests.scripted import Reply, ScriptedModel, after_tools

ASKED = "asked.log"
PAUSES = ("pause-inference", "pause-call", "pause-result")
STEPS = ("step-op", "step-idem", "step-model")


def script(request: ModelRequest) -> Reply:
    """`go TOOL N`: N calls of TOOL (argument n = 1..N); tool results are quoted back."""
    msgs = request.messages
    if msgs[-1].role == "user":
        _, name, count = msgs[-1].text.split()
        return Reply(calls=[(name, {"n": i}) for i in range(1, int(count) + 1)])
    return Reply(text="done: " + " | ".join(m.text for m in after_tools(msgs)))


class Model(ScriptedModel):
    """The script, each request noted in ROOM/asked.log first; with `hang`, it never answers."""

    def __init__(self, room: Path, hang: bool = False) -> None:
        super().__init__(script)
        self.room, self.hang = room, hang

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        fd = os.open(self.room / ASKED, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"asked\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        if self.hang:
            await anyio.sleep_forever()
        async for event in super().stream(request):
            yield event


def make_tools(*, hang: bool = False) -> list[Tool]:
    """`op`, a side effect that must never run twice, and `idem`, one that may; with
    `hang`, both block forever once they have recorded their execution."""

    @tool(name="op")
    async def op(n: int, ctx: ToolContext) -> str:
        """A side effect."""
        record(ctx)
        if hang:
            await anyio.sleep_forever()
        return f"op {n} done"

    @tool(name="idem", idempotent=True)
    async def idem(n: int, ctx: ToolContext) -> str:
        """A side effect that may safely run again."""
        record(ctx)
        if hang:
            await anyio.sleep_forever()
        return f"idem {n} done"

    return [op, idem]


def open_room(room: Path, *, hang_tools: bool = False, hang_model: bool = False) -> Runtime:
    return Runtime.open(room, kind="run", provider=Model(room, hang_model),
                        tools=make_tools(hang=hang_tools))  # fmt: skip


async def pause(room: Path, kind: str) -> None:
    async with open_room(room) as rt:
        # An inference breakpoint once (the turn's one pause); a call or result one for the
        # room: a once one holds only the first of the round's two calls
        tool_name, scope = (None, "once") if kind == "inference" else ("op", "room")
        await LocalClient(rt).add_breakpoint(NewBreakpoint(kind=kind, tool=tool_name,
                                                           scope=scope))  # fmt: skip
        out = await rt.run_turn(Message(origin="invoke", sender="worker", thread_id="w",
                                        text="go op 2"))  # fmt: skip
        assert out.status == "waiting", out
        [waiting] = [p for p in out.pending if p["awaiting"] == "breakpoint"]
        print(f"paused {waiting['call_id']}", flush=True)
        await anyio.sleep_forever()


async def step(room: Path, mode: str) -> None:
    async with open_room(room, hang_tools=mode != "step-model",
                         hang_model=mode == "step-model") as rt:  # fmt: skip
        [waiting] = [p for p in await rt.pending() if p.awaiting == "breakpoint"]
        decided = await rt.decide(Decision.step(waiting.call_id, seen=waiting.args,
                                                decided_by="worker"))  # fmt: skip
        assert decided == "queued", decided
        print("stepped", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in PAUSES + STEPS:
        sys.exit(f"usage: python -m tests.break_worker ROOM {'|'.join(PAUSES + STEPS)}")
    where, mode = Path(sys.argv[1]), sys.argv[2]
    if mode in PAUSES:
        anyio.run(pause, where, mode.removeprefix("pause-"))
    else:
        anyio.run(step, where, mode)
