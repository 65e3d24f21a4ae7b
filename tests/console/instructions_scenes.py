"""The instructions view's scene (snapshot and screenshot), on a room whose AGENTS.md,
agentdeck.toml ([agent], [groups.chat]) and chat:main's own part each say something.

`with_instructions` writes the room's files before the app opens it (the screenshot script
calls it first, as `INSTRUCTIONS_PREPARE` says); the scene sets the thread's own part
through the console's client, asks the offline model what it was told, and opens the
view with `I`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

from console.screens.instructions import InstructionsScreen
from tests.console.helpers import SIZE, send, started, until
from tests.console.scenes import steady

AGENTS = """You are Ada, the release engineer of this repository.

- Run the tests (`make check`) before you say a change is done.
- Never push to `main`; open a branch and say its name.
- When a command fails, show its last lines and say what you will try next.
"""
TOML = """[agent]
instructions = "Answer in English, in a few sentences: the operator reads you in a terminal."

[groups.chat]
instructions = "Ask before you run a command that changes files outside the workspace."
"""
OWN = ("This thread is the v2 release. The changelog is CHANGES.md; the version is in "
       "pyproject.toml. Tag only after the operator says so.")  # fmt: skip
ASK = "what are your instructions?"


def with_instructions(room: Path) -> None:
    """The room's AGENTS.md and agentdeck.toml, written before the app opens it."""
    room.mkdir(parents=True, exist_ok=True)
    (room / "AGENTS.md").write_text(AGENTS)
    (room / "agentdeck.toml").write_text(TOML)


def last_answer(pilot: Pilot) -> str:
    """The text of the chat's last agent message ("" before one)."""
    entries = pilot.app.main.state.thread("chat:main").entries  # type: ignore[attr-defined]
    return next((e.text for e in reversed(entries) if e.role == "assistant"), "")


async def asked(pilot: Pilot, before: str = "") -> str:
    """Ask the offline model what it was told; its answer (a new one, not `before`)."""
    await send(pilot, ASK, click=False)
    return await until(pilot, lambda: last_answer(pilot), "the agent answers",
                       ok=lambda said: said.startswith("I was given") and said != before)  # fmt: skip


async def open_instructions(pilot: Pilot) -> InstructionsScreen:
    """Press `I` (from the timeline: the chat input would take the letter) and wait until
    the thread's instructions are read and drawn."""
    main = pilot.app.main  # type: ignore[attr-defined]
    main.query_one("#timeline").focus()
    await pilot.press("I")
    await until(pilot, lambda: isinstance(pilot.app.screen, InstructionsScreen), "it opens")
    screen = pilot.app.screen
    assert isinstance(screen, InstructionsScreen)
    await until(pilot, lambda: screen.loaded, "the instructions are read")
    return screen


async def instructions(pilot: Pilot) -> None:
    """chat:main's four parts, its own last, over a chat where the agent said what it was
    told."""
    main = await started(pilot)
    await main.bridge.set_instructions("chat:main", OWN)
    await asked(pilot)
    await open_instructions(pilot)
    await steady(pilot)


INSTRUCTIONS_SCENES: dict[str, tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict]] = {
    "instructions": (instructions, SIZE, {}),
}
INSTRUCTIONS_PREPARE = {"instructions": with_instructions}
