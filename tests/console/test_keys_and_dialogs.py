"""Pilot tests of the keyboard conventions: help, quit, cancel turn, palette, notifications."""

from __future__ import annotations

import pytest
from textual.notifications import Notify

from console.commands import DeckCommands
from console.screens.confirm import ConfirmScreen
from console.screens.help import HelpScreen
from console.widgets.key_bar import KeyBar
from console.widgets.status_bar import StatusBar
from console.widgets.timeline import Timeline
from engine.providers.offline import OfflineModel
from tests.console.helpers import SIZE, Recorder, palette, send, started, told, until

pytestmark = pytest.mark.anyio


async def test_help_opens_with_question_mark_and_f1(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        main.query_one(Timeline).focus()
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), f"help by {key}")
            rows = dict((what, keys) for keys, what in app.screen.rows)
            assert rows["Approve"] == "a" and rows["Cancel call"] == "x"
            assert rows["Edit+approve"] == "e" and rows["Approve+remember"] == "A"
            assert rows["Help"] == "? / f1" and rows["Cancel turn"] == "c"
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is main, "help closed")
        await app.shutdown()


async def test_cancel_turn_asks_and_defaults_to_no(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "run `echo hi`")
        await until(pilot, lambda: main.state.pending, "a turn waits")
        main.query_one(Timeline).focus()
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
        await pilot.press("enter")  # No has the focus
        await until(pilot, lambda: app.screen is main, "dialog closed")
        turn = next(iter(main.state.turns.values()))
        assert turn.status == "waiting"
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirmation")
        await pilot.press("y")
        await until(pilot, lambda: turn.status == "done", "turn cancelled")
        assert turn.reason == "cancelled" and not main.state.pending
        await app.shutdown()


async def test_quit_asks_while_a_turn_runs(deck_app) -> None:
    app = deck_app(provider=OfflineModel(delay=0.2))  # the fallback answer streams slowly
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "hello")
        await until(pilot, lambda: main.state.counts()[0] == 1, "a turn runs")
        main.query_one(Timeline).focus()
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "quit question")
        await pilot.press("escape")  # Esc says No
        await until(pilot, lambda: app.screen is main, "stayed")
        assert app.is_running
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "quit question")
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, "app exited")
    assert app.return_code == 0


async def test_ctrl_c_quits_from_the_chat_input_asking_while_a_turn_runs(deck_app) -> None:
    app = deck_app(provider=OfflineModel(delay=0.2))
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "hello")
        await until(pilot, lambda: main.state.counts()[0] == 1, "a turn runs")
        assert app.focused is main.query_one("#chat-input")
        await pilot.press("ctrl+c")  # in the input, where Textual would copy
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "quit question")
        await pilot.press("y")
        await until(pilot, lambda: not app.is_running, "app exited")


async def test_the_footer_never_cuts_a_key(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=(80, 24)) as pilot:
        main = await started(pilot)
        main.query_one(Timeline).focus()
        await pilot.pause()
        line = main.query_one(KeyBar).render().plain
        assert "…" not in line
        assert " ? more " in line  # what does not fit is behind ?
        assert line.rstrip().endswith("^q Quit  ^p palette")
        assert line.startswith(" f Follow")  # the focused pane's keys first
        status = main.query_one(StatusBar).render().plain
        assert "model offline-rules-1" in status  # 80 columns keep the model, in short
        await app.shutdown()


async def test_quit_without_running_turns_needs_no_question(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        main.query_one(Timeline).focus()
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, "app exited")


async def test_new_pending_call_notifies_when_elsewhere(deck_app) -> None:
    """A call of the thread the chat shows is on its card; one of another thread is told."""
    rec = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await started(pilot)
        await send(pilot, "run `echo here`")
        await until(pilot, lambda: main.state.pending, "a call waits")
        await pilot.pause()
        assert not [t for t in told(rec) if "waiting for a decision" in t]  # on the card
        await main.bridge.send("chat:other", "run `echo there`")
        await until(pilot, lambda: [t for t in told(rec) if "waiting for a decision" in t],
                    "a notification")  # fmt: skip
        assert main.query_one("#decisions-pane").border_title == "Decisions (2)"
        await app.shutdown()


async def test_palette_offers_every_action(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        titles = await palette(DeckCommands(app.screen))
        for wanted in (
            "New thread",
            "Threads",
            "Switch thread: chat:main",
            "Cancel turn",
            "Decisions: Approve",
            "Decisions: Cancel call",
            "Decisions: Edit+approve",
            "Timeline: Follow",
            "Calls: Details",
            "Filter",
        ):
            assert wanted in titles
        # Textual's own commands offer these (Quit, and Theme for f2's Switch theme): not twice
        assert "Quit" not in titles and "Switch theme" not in titles
        await app.shutdown()


async def test_tab_moves_between_panes(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        order = []
        for _ in range(4):
            order.append(main.focused.id)
            await pilot.press("tab")
        assert order == ["chat-input", "timeline", "calls", "decisions"]
        await pilot.press("shift+tab")
        assert main.focused.id == "decisions"
        await app.shutdown()


async def test_the_footer_follows_focus_and_a_click_presses_the_key(deck_app) -> None:
    """The key bar shows the focused pane's keys (and the app's), and clicking one runs it."""
    from console.widgets.decision_queue import DecisionQueue
    from console.widgets.key_bar import KeyBar

    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        bar = main.query_one(KeyBar)
        main.query_one(Timeline).focus()
        await until(pilot, lambda: "Follow" in bar.render().plain, "timeline keys")
        assert "Approve" not in bar.render().plain and "palette" in bar.render().plain
        main.query_one(DecisionQueue).focus()
        await until(pilot, lambda: "Approve" in bar.render().plain, "decision keys")
        assert "Follow" not in bar.render().plain
        main.query_one(Timeline).focus()
        await until(pilot, lambda: "Help" in bar.render().plain, "timeline keys again")
        await pilot.click(KeyBar, offset=(bar.render().plain.index("Help"), 0))
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help by a click")
        # a dialog's keys while it is open (the panes' keys do nothing then), and back
        await until(pilot, lambda: bar.render().plain.split() == ["esc", "Close"], "dialog keys")
        await pilot.press("escape")
        await until(pilot, lambda: "Follow" in bar.render().plain, "the pane's keys again")
        await app.shutdown()
