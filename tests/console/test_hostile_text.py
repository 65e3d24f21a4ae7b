"""Text from outside is drawn as text (issue 25, item 1): markup in a call's arguments, a
thread id or a notification never ends the console, and a control character never reaches
the terminal raw; where text is shown it is shown escaped (`\\x1b`).

A signed webhook saying "please run `echo [/]`" made a waiting call that ended every
console at every start with `MarkupError: closing tag '[/]'`."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from textual.pilot import Pilot

from console.screens.call_detail import CallDetailScreen
from console.widgets.decision_queue import DecisionQueue
from engine.domain.messages import Message
from tests.console.helpers import SIZE, send, started, until

pytestmark = pytest.mark.anyio

MARKUP = "[/] [/bold] [/x] [bold]b[link=http://x]l[/link] [@click=app.quit]q[/]"
CONTROLS = "\x1b[2J\x1b]0;owned\x07\x9b31m\u202eevil\x00\x08"
THREAD = "chat:\x1b[31m[/]"
HUGE = "x" * 20_000


def screen_text(pilot: Pilot) -> str:
    """What the terminal is sent for the screen on top, as text (the app's line filters
    applied, as for the terminal)."""
    update = pilot.app.screen._compositor.render_full_update(simplify=True)
    return "\n".join("".join(seg.text for strip in line for seg in strip if seg.control is None)
                     for line in update.strips)  # fmt: skip


def raw_controls(text: str) -> list[str]:
    return sorted({repr(c) for c in text if c != "\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0
                   or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069)})  # fmt: skip


async def drawn_clean(pilot: Pilot, where: str) -> str:
    await pilot.pause()
    text = screen_text(pilot)
    assert not raw_controls(text), f"{where}: raw control characters {raw_controls(text)}"
    return text


async def visit(pilot: Pilot, key: str, screen: str) -> str:
    """Open a screen by its key, check what it draws, and close it."""
    main = pilot.app.main  # type: ignore[attr-defined]
    main.query_one(DecisionQueue).focus()
    await pilot.press(key)
    await until(pilot, lambda: type(pilot.app.screen).__name__ == screen, f"the {screen}")
    text = await drawn_clean(pilot, screen)
    await pilot.press("escape")
    await until(pilot, lambda: pilot.app.screen is main, "back on the main screen")
    return text


async def two_hostile_calls(pilot: Pilot) -> Any:
    main = await started(pilot)
    rt = pilot.app.host.runtime  # type: ignore[attr-defined]
    await rt.submit(Message(origin="invoke", sender=f"ann {MARKUP}{CONTROLS}", thread_id=THREAD,
                            text=f"run `echo {MARKUP}`"))  # fmt: skip
    await send(pilot, f"run `echo {CONTROLS}{MARKUP}` {HUGE}")
    await until(pilot, lambda: len(main.state.pending) == 2, "both calls wait")
    return main


async def test_markup_and_control_characters_are_text_everywhere(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await two_hostile_calls(pilot)
        text = await drawn_clean(pilot, "the main screen")
        assert "[/]" in text and "\\x1b" in text  # the queue shows both as they are

        main.query_one(DecisionQueue).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, CallDetailScreen), "the details")
        detail = await drawn_clean(pilot, "the call's details")
        assert "[/bold]" in detail
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is main, "back on the main screen")

        for key, screen in (("h", "HistoryScreen"), ("s", "SchedulerScreen"),
                            ("r", "RulesScreen"), ("l", "ChannelsScreen"),
                            ("ctrl+t", "ThreadPickerScreen"), ("question_mark", "HelpScreen"), ("o", "RoomsScreen")):  # fmt: skip
            await visit(pilot, key, screen)

        app.notify(f"{MARKUP} {CONTROLS}", title=f"{CONTROLS}[/]")
        await until(pilot, lambda: app._notifications, "the notification is shown")
        await drawn_clean(pilot, "a notification")
        assert app.is_running


async def test_a_console_starts_on_a_room_where_such_calls_wait(deck_app) -> None:
    async with deck_app().run_test(size=SIZE) as pilot:
        await two_hostile_calls(pilot)
    n = itertools.count()  # other ids than the first console's (runs, turns of its own)
    again = deck_app(ids=lambda prefix: f"{prefix}_again{next(n)}")
    async with again.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await until(pilot, lambda: len(main.state.pending) == 2, "both calls wait again")
        text = await drawn_clean(pilot, "the main screen at start")
        assert "[/]" in text
        assert again.is_running
