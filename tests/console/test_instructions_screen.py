"""The instructions view (console/screens/instructions.py): `I` shows what a new turn on
the chat's thread is told, part by part; `e` edits the thread's own part in the editor
(ctrl+s saves through the bridge, Esc backs out) and the next turn is told it; the history's
turn detail says what each turn was told and marks the turn where it changed; a snapshot."""

from __future__ import annotations

import inspect
import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.notifications import Notify
from textual.widgets import TextArea

from console.commands import DeckCommands
from console.keys import help_sections
from console.screens.confirm import ConfirmScreen
from console.screens.instructions import InstructionsEditor, InstructionsScreen
from console.widgets.history_notes import HistoryNotes
from console.widgets.text import Static
from tests.console.conftest import build
from tests.console.helpers import SIZE, Recorder, palette, started, told, until
from tests.console.history_scenes import open_history
from tests.console.instructions_scenes import (
    AGENTS,
    INSTRUCTIONS_SCENES,
    OWN,
    asked,
    open_instructions,
    with_instructions,
)

pytestmark = pytest.mark.anyio
GENERAL = ["AGENTS.md", "[agent] instructions", "the group chat"]


@pytest.fixture
def instructed(room: Path) -> Path:
    with_instructions(room)
    return room


def drawn(renderable: object) -> str:
    """What a Rich renderable shows, as text."""
    out = Console(width=120, file=io.StringIO(), color_system=None)
    out.print(renderable)
    return out.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def sections(screen: InstructionsScreen) -> list[str]:
    """The section titles the view shows, top to bottom."""
    return [str(label.render()) for label in screen.query(".section")]


def parts(screen: InstructionsScreen) -> list[str]:
    """The text of each part shown."""
    return [str(static.render()) for static in screen.query(".instructions-part")]


async def edit(pilot, screen: InstructionsScreen) -> InstructionsEditor:  # type: ignore[no-untyped-def]
    await pilot.press("e")
    await until(pilot, lambda: isinstance(pilot.app.screen, InstructionsEditor), "the editor")
    return pilot.app.screen  # type: ignore[return-value]


async def test_I_shows_the_threads_instructions_part_by_part(instructed: Path) -> None:
    app = build(instructed)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        screen = await open_instructions(pilot)
        assert str(screen.query_one("#question").render()) == "Instructions · chat:main"
        assert sections(screen) == [*GENERAL, "the thread chat:main · its own", "details"]
        assert parts(screen)[0] == AGENTS.strip()
        now = await main.bridge.instructions("chat:main")
        assert screen.told == now and now.hash and now.own is None
        facts = drawn(screen.query_one("#instructions-facts", Static).content)
        assert facts.split() == [
            "group",
            "chat",
            "hash",
            now.hash,
            "sent",
            f"{len(now.text):,}",
            "characters,",
            "as",
            "the",
            "system",
            "prompt",
        ]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, "Esc closes it")
        # the key follows the thread the chat shows
        await pilot.press("ctrl+n")
        await until(pilot, lambda: main.thread_id == "chat:2", "a new thread")
        screen = await open_instructions(pilot)
        assert str(screen.query_one("#question").render()) == "Instructions · chat:2"
        await app.shutdown()


async def test_e_edits_the_threads_own_part_and_its_next_turn_is_told_it(
    instructed: Path,
) -> None:
    rec = Recorder(Notify, InstructionsScreen.Saved)
    app = build(instructed)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await started(pilot)
        before = await asked(pilot)
        assert before.endswith("from AGENTS.md, [agent] instructions and the group chat.")
        screen = await open_instructions(pilot)
        hash_before = screen.told.hash  # type: ignore[union-attr]
        editor = await edit(pilot, screen)
        assert editor.query_one(TextArea).text == ""  # none of its own yet
        editor.query_one(TextArea).text = OWN
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen, "saved, back on the view")
        [saved] = await until(pilot, lambda: rec.of(InstructionsScreen.Saved), "saved")
        assert saved.told.own == OWN and saved.told.hash != hash_before  # type: ignore[attr-defined]
        await until(pilot, lambda: screen.loaded, "drawn again", ok=lambda n: n == 2)
        assert sections(screen) == [*GENERAL, "the thread chat:main · its own (e edits it)",
                                    "details"]  # fmt: skip
        assert parts(screen)[-1] == OWN
        assert any("are set" in t for t in told(rec))
        assert (await main.bridge.instructions("chat:main")).own == OWN
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, "closed")
        after = await asked(pilot, before)
        assert after.endswith("from AGENTS.md, [agent] instructions, the group chat and the "
                              "thread chat:main.")  # fmt: skip
        await app.shutdown()


async def test_esc_in_the_editor_backs_out_and_an_empty_part_clears_it(instructed: Path) -> None:
    rec = Recorder(Notify, InstructionsScreen.Saved)
    app = build(instructed)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await started(pilot)
        await main.bridge.set_instructions("chat:main", OWN)
        screen = await open_instructions(pilot)
        editor = await edit(pilot, screen)
        assert editor.query_one(TextArea).text == OWN
        editor.query_one(TextArea).text = "Something else."
        await pilot.press("escape")  # edited: it asks, and keeping on is the default
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        await pilot.press("y")  # discard
        await until(pilot, lambda: app.screen is screen, "backed out")
        assert not rec.of(InstructionsScreen.Saved)
        assert (await main.bridge.instructions("chat:main")).own == OWN
        editor = await edit(pilot, screen)
        editor.query_one(TextArea).text = "  \n"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: rec.of(InstructionsScreen.Saved), "saved")
        assert (await main.bridge.instructions("chat:main")).own is None
        await until(pilot, lambda: screen.loaded, "drawn again", ok=lambda n: n == 2)
        assert sections(screen) == [*GENERAL, "the thread chat:main · its own", "details"]
        assert any("are cleared" in t for t in told(rec))
        await app.shutdown()


async def test_the_palette_and_the_help_offer_it(instructed: Path) -> None:
    app = build(instructed)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        titles = await palette(DeckCommands(app.main))
        assert "Instructions" in titles
        if inspect.isawaitable(opened := titles["Instructions"]()):
            await opened
        screen = await until(pilot, lambda: app.screen, "opened",
                             ok=lambda s: isinstance(s, InstructionsScreen))  # fmt: skip
        await until(pilot, lambda: screen.loaded, "read")
        offered = await palette(DeckCommands(screen))
        assert "Close instructions" in offered and "Instructions: Edit the thread's own" in offered
        await app.shutdown()
    helped = dict(help_sections())
    assert [b.key for b in helped["Instructions (I)"]] == ["escape,q", "e"]
    assert "I" in [b.key for b in helped["Everywhere"]]


async def test_the_history_says_what_each_turn_was_told_and_where_it_changed(
    instructed: Path,
) -> None:
    app = build(instructed)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        before = await asked(pilot)
        hash_before = (await main.bridge.instructions("chat:main")).hash
        await main.bridge.set_instructions("chat:main", OWN)
        await asked(pilot, before)
        now = await main.bridge.instructions("chat:main")
        first, second = sorted(main.state.turns)
        history = await open_history(pilot)
        assert history.detail is not None and history.detail["turn"]["turn_id"] == second
        lines = [
            "".join(text for text, _ in line) for line in history.query_one(HistoryNotes).lines
        ]
        [said] = [line for line in lines if line.startswith("told")]
        assert said == (f"told   {now.hash} · AGENTS.md, [agent] instructions, the group chat, "
                        f"the thread chat:main  ◆ changed since turn {first}")  # fmt: skip
        assert hash_before != now.hash
        await app.shutdown()


def test_snapshot_instructions(snap_compare, instructed: Path) -> None:
    run_before, size, kw = INSTRUCTIONS_SCENES["instructions"]
    assert snap_compare(build(instructed, **kw), terminal_size=size, run_before=run_before)
