"""A key bound on the main screen acts when it reaches the app (console/key_path.py): from
a pane that lets keys pass it is never handed down the widget tree; from the chat's input,
the decision card or a dialog it takes Textual's own path."""

from __future__ import annotations

import pytest
from textual import events
from textual._context import active_message_pump
from textual.message import Message

from console.key_path import lets_keys_pass, passes_through
from console.screens.help import HelpScreen
from console.widgets.decision_card import DecisionCard
from console.widgets.decision_queue import DecisionQueue
from console.widgets.inputs import ChatInput
from console.widgets.timeline import Timeline
from tests.console.helpers import SIZE, started, until

pytestmark = pytest.mark.anyio


class KeyRoute:
    """The `message_hook`: which message pumps handled each key, in order."""

    def __init__(self) -> None:
        self.by: dict[str, list[str]] = {}

    def __call__(self, message: Message) -> None:
        if isinstance(message, events.Key):
            pump = type(active_message_pump.get()).__name__
            self.by.setdefault(message.key, []).append(pump)


async def test_a_bound_key_from_a_pane_acts_at_the_app(deck_app) -> None:
    route = KeyRoute()
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=route) as pilot:
        main = await started(pilot)
        main.query_one(Timeline).focus()
        await pilot.press("question_mark")  # the app's binding (not a priority one)
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        assert route.by["question_mark"] == ["AgentDeck"]  # never handed to the timeline
        await app.shutdown()


async def test_keys_typed_in_the_input_are_still_the_inputs(deck_app) -> None:
    route = KeyRoute()
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=route) as pilot:
        main = await started(pilot)
        field = main.query_one("#chat-input", ChatInput)
        field.focus()
        await pilot.press("s", "question_mark")  # the scheduler's and the help's keys
        await until(pilot, lambda: field.value == "s?", "typed into the input")
        assert app.screen is main
        assert route.by["s"][:2] == ["AgentDeck", "ChatInput"]
        await app.shutdown()


def test_which_widgets_let_keys_pass() -> None:
    assert lets_keys_pass(Timeline) and lets_keys_pass(DecisionQueue)
    assert not lets_keys_pass(ChatInput) and not lets_keys_pass(DecisionCard)
    assert not passes_through(None, HelpScreen([]))  # nothing focused: Textual's path
