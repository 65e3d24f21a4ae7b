"""Scheduler view scenes for snapshots and screenshots: idle, and busy across four groups.

The busy scene configures the room as an operator would (chore budget 0, will paused)
through the runtime API, then submits turns so that some run, some wait on a decision,
and the rest queue, each for a different reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
from textual.pilot import Pilot

from console.screens.scheduler import SchedulerScreen
from engine.domain.messages import Message
from engine.providers.base import ModelRequest
from engine.providers.offline import OfflineModel
from tests.console.helpers import started, until
from tests.console.scenes import steady

SLOW = "(slow)"


class SlowWhenAsked(OfflineModel):
    """The instant offline model, except that a message saying "(slow)" stalls mid-answer,
    so its turn keeps running for as long as the test needs."""

    def __init__(self) -> None:
        super().__init__(delay=0)

    async def stream(self, request: ModelRequest) -> AsyncIterator:  # type: ignore[override]
        last = request.messages[-1]
        stall = last.role == "user" and SLOW in last.text
        for i, event in enumerate(self.events(request)):
            if stall and i == 1:
                await anyio.sleep_forever()
            yield event


def message(thread_id: str, text: str) -> Message:
    """A message into `thread_id`, from the origin its prefix names (chat otherwise)."""
    origin = thread_id.partition(":")[0]
    if origin in ("task", "chore", "will"):
        return Message(origin=origin, sender="self", thread_id=thread_id, text=text)
    return Message(origin="chat", channel="console", sender="operator", thread_id=thread_id,
                   text=text)  # fmt: skip


async def open_scheduler(pilot: Pilot) -> SchedulerScreen:
    """Press `s` (from the timeline: the chat input would take the letter)."""
    app = pilot.app
    app.main.query_one("#timeline").focus()  # type: ignore[attr-defined]
    await pilot.press("s")
    await until(pilot, lambda: isinstance(app.screen, SchedulerScreen), "scheduler view")
    screen = app.screen
    assert isinstance(screen, SchedulerScreen)
    await until(pilot, lambda: screen.snapshots > 0, "first snapshot")
    return screen


async def busy_room(pilot: Pilot) -> None:
    """Turns running, waiting and queued in all four groups."""
    await started(pilot)
    rt = pilot.app.host.runtime  # type: ignore[attr-defined]
    await rt.configure_group("chore", max_running_turns=0)
    await rt.configure_group("will", paused=True)
    for thread_id, text, expect in (
        ("chat:main", f"hello {SLOW}", "running"),
        ("chat:ops", "run `make test`", "waiting"),
        ("chat:ops", "calc 1+1", None),  # behind the decision
        ("chat:main", "calc 2+2", None),  # behind the running turn
        ("task:release", f"summarise the release {SLOW}", "running"),
        ("task:docs", "run `make docs`", "waiting"),
        ("chore:cleanup", "list files in tmp", None),  # chore budget 0
        ("will:agent", "what is 6*7", None),  # will paused
    ):
        await rt.submit(message(thread_id, text))
        if expect is not None:
            await until(pilot, lambda t=thread_id, e=expect: (rt.scheduler.holder(t) or ("", ""))[1] == e,
                        f"{thread_id} {expect}")  # fmt: skip
    stats = rt.statistics()
    assert (stats.running, len(stats.queued)) == (2, 4), stats


async def scheduler_idle(pilot: Pilot) -> None:
    await started(pilot)
    await open_scheduler(pilot)
    await steady(pilot)


async def scheduler_busy(pilot: Pilot) -> None:
    await busy_room(pilot)
    await open_scheduler(pilot)
    await steady(pilot)


SCHEDULER_SCENES: dict[str, tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict]] = {
    "scheduler_idle": (scheduler_idle, (160, 48), {}),
    "scheduler": (scheduler_busy, (160, 48), {"provider": SlowWhenAsked()}),
}
