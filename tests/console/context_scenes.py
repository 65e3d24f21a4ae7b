"""The console scene of a thread's context (issue 32): a room whose model has a small
window, a thread that filled it and was compacted, its gauge in the chat title and the
compaction in the timeline."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from tests.console.helpers import send, started, until
from tests.console.scenes import steady

WINDOW = 1500
LONG = "tell me about item {n} with many words so that the context fills up quickly enough"


def small_window(room: Path) -> None:
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(f"[model]\ncontext_window = {WINDOW}\n")


async def compacted(pilot: Pilot) -> None:
    """Messages until the runtime compacts the thread by itself, then one more answered."""
    main = await started(pilot)
    done = False
    for n in range(200):
        await until(pilot, lambda: main.state.counts(), "idle", ok=lambda c: c == (0, 0))
        if done:
            break
        done = any(row.kind == "compaction" for row in main.state.steps)
        await send(pilot, LONG.format(n=n), click=False)
    main.query_one("#timeline").focus()
    await steady(pilot)


CONTEXT_SCENES = {"context": (compacted, (160, 48), {})}
CONTEXT_PREPARE = {"context": small_window}
