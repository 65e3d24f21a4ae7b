"""Pilot tests of deciding where the operator reads: the chat's decision card (one key
decides the call of the thread shown), and that no keystroke meant for the chat decides a
call; what is typed before the runtime (or the screen) is ready is not lost."""

from __future__ import annotations

import pytest

from console.screens.call_detail import CallDetailScreen
from console.screens.prompt import PromptScreen
from console.widgets.decision_card import ARM, QUIET, DecisionCard
from console.widgets.inputs import ChatInput
from tests.console.conftest import KeysClock
from tests.console.helpers import SIZE, decisions_sent, send, started, until

pytestmark = [pytest.mark.anyio, pytest.mark.console]


def card_text(card: DecisionCard) -> str:
    return " ".join([*(str(s.render()) for s in card.query("Static")), card.key_line()])


async def test_a_waiting_call_is_a_card_in_the_chat_and_one_key_approves_it(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        await send(pilot, "run `echo card-ok`", click=False)
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.has_focus, "the card holds the keyboard")
        assert "$ echo card-ok" in card_text(card)
        assert card.border_title and "shell" in str(card.border_title)
        await pilot.press("a")  # (the test's keys clock: a second since it took the keyboard)
        await until(pilot, lambda: not main.state.pending, "the call is applied")
        assert [d.action for d in sent] == ["resume"]
        assert sent[0].args_hash is not None  # bound to the arguments the card showed
        await until(pilot, lambda: not card.display, "the card gives way")
        assert isinstance(app.focused, ChatInput)  # the keyboard is the chat's again
        await app.shutdown()


@pytest.mark.parametrize("key", list("aAxeuR"))
async def test_a_reply_typed_as_a_call_arrives_decides_nothing(deck_app, key: str) -> None:
    """The card takes the keyboard the moment the call comes; the operator, who did not
    see it yet, types a reply that begins with a decision key: all of it is the chat's."""
    keys = KeysClock()
    app = deck_app(keys_clock=keys)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        keys.held = True  # from here the clock moves only as the test says
        await send(pilot, "run `echo later`", click=False)
        await until(pilot, lambda: main.state.pending, "the call arrives")
        keys.now += QUIET  # the operator has not typed since sending
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.has_focus, "the card takes the keyboard")
        await pilot.press(key, *"ll do it later")  # at once: not ARM seconds on
        field = main.query_one(ChatInput)
        assert field.has_focus
        assert field.value == f"{key}ll do it later"
        assert not sent and main.state.pending  # nothing decided
        await app.shutdown()


async def test_while_the_operator_types_the_card_waits_and_tab_brings_it_armed(deck_app) -> None:
    keys = KeysClock()
    app = deck_app(keys_clock=keys)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        keys.held = True
        await send(pilot, "run `echo tabbed`", click=False)
        await pilot.press(*"half")  # typing as the call arrives: a draft
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.display and card.call is not None, "the card shows")
        keys.now += QUIET * 5
        await pilot.pause()
        assert not card.has_focus  # a draft keeps the keyboard
        await pilot.press("a")
        assert main.query_one(ChatInput).value == "halfa" and not sent
        await pilot.press("tab")  # a key that types nothing: to the card, armed at once
        assert card.has_focus
        await pilot.press("x")  # deny: with a reason the model reads
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "asked for a reason")
        await pilot.press(*"not now", "enter")
        await until(pilot, lambda: not main.state.pending, "applied")
        assert [d.action for d in sent] == ["cancel"]
        assert main.query_one(ChatInput).value == "halfa"  # the draft is still there
        await app.shutdown()


async def test_enter_on_the_card_opens_the_details_and_never_approves(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        await send(pilot, "run `echo enter`", click=False)
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.has_focus, "the card holds the keyboard")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, CallDetailScreen), "details")
        await pilot.press("escape")
        await pilot.pause()
        assert not sent and main.state.pending
        await app.shutdown()


async def test_the_cards_keys_act_only_after_it_held_the_keyboard_visibly(deck_app) -> None:
    keys = KeysClock()
    app = deck_app(keys_clock=keys)
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        keys.held = True
        await send(pilot, "run `echo armed`", click=False)
        await until(pilot, lambda: main.state.pending, "the call arrives")
        keys.now += QUIET
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.has_focus, "the card takes the keyboard")
        await until(pilot, lambda: "keys in a moment" in card_text(card), "it says so")
        keys.now += ARM  # held for ARM seconds: its keys are live, and it says so
        await until(pilot, lambda: card.armed, "armed", within=ARM * 20)
        assert "a approve" in card_text(card)
        await pilot.press("a")
        await until(pilot, lambda: not main.state.pending, "applied")
        assert [d.action for d in sent] == ["resume"]
        await app.shutdown()


async def test_keys_typed_before_anything_has_the_focus_reach_the_chat(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        main.set_focus(None)  # as at the start, before the input took the focus
        await pilot.press(*"run `echo early`", "ctrl+j")  # typed ahead, Enter reads as \n
        await until(pilot, lambda: main.state.pending, "the message went and its call waits")
        assert any(e.text == "run `echo early`" for e in main.state.thread("chat:main").entries)
        await app.shutdown()


async def test_a_message_sent_before_the_runtime_is_reachable_goes_when_it_is(deck_app) -> None:
    app = deck_app(attach=True)  # nobody owns the room: attached, and nothing to send to
    async with app.run_test(size=SIZE) as pilot:
        main = app.main
        await until(pilot, lambda: main.query_one("StatusBar").mode.startswith("detached"),
                    "detached")  # fmt: skip
        await send(pilot, "run `echo queued`", click=False)
        view = main.state.thread("chat:main")
        assert [e.via for e in view.entries] == ["you · sending…"]
        await pilot.press("ctrl+o")  # host the room here: the message goes now
        await until(pilot, lambda: main.state.pending, "sent, and its call waits")
        assert [e.text for e in view.entries if e.role == "user"] == ["run `echo queued`"]
        assert not any("sending" in e.via for e in view.entries)
        await app.shutdown()


async def test_a_thread_named_like_markup_shows_its_card_as_text(deck_app) -> None:
    """Found by the hostile-text fuzz: the card's title quoted the thread as markup."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await main.bridge.send("chat:[/]·1", "run `echo hostile`")
        await until(pilot, lambda: main.state.pending, "its call waits")
        await main.switch_thread("chat:[/]·1")
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.call is not None, "the card shows it")
        assert "[/]" in card.border_title  # (the title as markup: the brackets escaped)
        await app.shutdown()
