"""The process tests/test_compaction_crash.py kills during a compaction.

    python -m tests.compaction_worker ROOM STAGE

It opens a runtime on ROOM (a window of 3,000 tokens, tests/test_compaction.py's counting
model) and runs turns on chat:long until one compacts. STAGE says where it then stops,
for the test to SIGKILL it there: `summary` (the model never answers the summary request:
nothing of the compaction is written yet) or `after` (the marker is committed; the next
inference never answers). It writes ROOM/stage when it got there.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.domain.messages import Message
from engine.providers.base import ModelEvent, ModelRequest
from engine.runtime import Runtime
from tests.scripted import add
from tests.test_compaction import WORDS, CountingModel, window

WINDOW = 3000


class Stalling(CountingModel):
    """The counting model, stalling for ever at `stage` (and saying so in ROOM/stage)."""

    def __init__(self, room: Path, stage: str) -> None:
        super().__init__(window=WINDOW, scale=1.0)  # (its count is the estimate: a resumed
        # runtime, which learns the correction afresh, decides as this one did)
        self.room, self.stage, self.summarised = room, stage, False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.purpose == "summary":
            if self.stage == "summary":
                await self._stall()
            self.summarised = True
        elif self.summarised and self.stage == "after":
            await self._stall()
        async for event in super().stream(request):
            yield event

    async def _stall(self) -> None:
        (self.room / "stage").write_text(self.stage)
        await anyio.sleep_forever()


def message(n: int) -> Message:
    return Message(origin="chat", channel="console", sender="ann", thread_id="chat:long",
                   text=f"turn {n}: {WORDS * 4}")  # fmt: skip


async def main(room: Path, stage: str) -> None:
    async with Runtime.open(room, kind="run", provider=Stalling(room, stage), tools=[add],
                            config=window(WINDOW)) as rt:  # fmt: skip
        print("ready", flush=True)
        for n in range(1000):
            await rt.run_turn(message(n))


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), sys.argv[2])
