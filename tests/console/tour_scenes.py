"""The README's quick tour, as the console shows it: a message whose shell call waits for
a decision, then that call approved and answered (scripts/screenshots.py draws them; the
snapshots guard the same screens in their own scenes)."""

from __future__ import annotations

from textual.pilot import Pilot

from tests.console.helpers import send, started, until, until_pending
from tests.console.scenes import steady

TOUR_MESSAGE = "run `uname -sr` and tell me the time"  # the README's step 2


async def tour_call(pilot: Pilot) -> None:
    """The shell call waits in the focused queue; the clock call ran at once."""
    main = await started(pilot)
    await send(pilot, TOUR_MESSAGE, click=False)
    await until_pending(pilot, main)
    main.query_one("#decisions").focus()
    await steady(pilot)


async def tour_approved(pilot: Pilot) -> None:
    """`a` on the waiting call: it runs, and the agent answers with its output."""
    await tour_call(pilot)
    main = pilot.app.main  # type: ignore[attr-defined]
    await pilot.press("a")
    await until(pilot, lambda: main.state.counts() == (0, 0) and not main.state.pending,
                "the turn finished")  # fmt: skip
    main.query_one("#chat-input").focus()
    await steady(pilot)


TOUR_SCENES = {
    "tour_call": (tour_call, (160, 48), {}),
    "tour_approved": (tour_approved, (160, 48), {}),
}
