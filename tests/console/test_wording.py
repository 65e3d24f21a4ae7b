"""What the console says agrees with itself, and text is shown as text (issue 30, found by
trying the console as a new user): a thread named like markup in the palette, a refused
pattern's glyph and words, counts in the singular, a cancelled call's round in the
timeline, and the theme once in the palette."""

from __future__ import annotations

import pytest
from textual.system_commands import SystemCommandsProvider
from textual.widgets import Input

from console.commands import DeckCommands
from console.screens.confirm import ConfirmScreen
from console.screens.prompt import PromptScreen
from console.screens.remember import verdict
from console.state import CallRow
from console.steps import StepRow, shown_status
from console.widgets.channel_tables import DeliveriesTable
from console.widgets.decision_queue import DecisionQueue
from console.widgets.rules_table import RulesTable
from console.widgets.timeline import Timeline
from engine.api.local import LocalClient
from engine.api.rule_models import NewRule
from engine.domain.messages import Message
from engine.lifecycle import CallStatus
from tests.console.conftest import build
from tests.console.helpers import SIZE, call_waits, palette, send, started, until
from tests.console.test_channels_screen import open_channels, owe
from tests.console.test_hostile_text import screen_text
from tests.console.test_rules_screen import open_rules

pytestmark = pytest.mark.anyio

MARKUP_THREADS = ("chat:[bus]", "chat:[/]")


async def test_a_thread_named_like_markup_is_text_in_the_palette(deck_app) -> None:
    """`Switch thread: chat:[bus]` showed as `Switch thread: chat:`, and a thread `chat:[/]`
    ended the palette with a MarkupError."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        rt = app.host.runtime
        for thread in MARKUP_THREADS:
            await rt.submit(Message(origin="invoke", sender="x", thread_id=thread, text="hi"))
        await until(pilot, lambda: set(MARKUP_THREADS) <= set(main.state.recent_threads),
                    "the threads are recent")  # fmt: skip
        main.query_one(Timeline).focus()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: type(app.screen).__name__ == "CommandPalette", "palette")
        app.screen.query_one(Input).value = "switch thread"
        shown = await until(pilot, lambda: screen_text(pilot), "the threads offered",
                            ok=lambda text: "Switch thread: chat:main" in text)  # fmt: skip
        for thread in MARKUP_THREADS:
            assert f"Switch thread: {thread}" in shown
        await pilot.press("escape")
        await app.shutdown()


def test_a_pattern_that_does_not_match_says_so_beside_its_cross() -> None:
    """`✗ valid, but it does not match`: the cross said what was wrong, the words what was
    right."""
    call = CallRow("c_001", "t_001", "chat:main", "shell", {"command": "echo hi"},
                   CallStatus.SUSPENDED)  # fmt: skip
    ok, line = verdict(call, "ls *", "thread", None)
    assert not ok and line.startswith("✗ does not match this call")
    ok, line = verdict(call, "echo *", "thread", None)
    assert ok and line.startswith("✓ valid, and it matches this call")


async def test_a_rule_used_once_is_used_1_time(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await LocalClient(app.host.runtime).add_rule(
            NewRule(effect="allow", tool="shell", pattern="echo *"))  # fmt: skip
        await send(pilot, "run `echo hi`")  # the rule allows it: nothing waits
        await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "done")
        screen = await open_rules(pilot)
        table = screen.query_one(RulesTable)
        await until(pilot, lambda: table.rules.get("1") and table.rules["1"].uses == 1, "used")
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        question = app.screen.question  # type: ignore[attr-defined]
        assert "used 1 time)" in question and "times" not in question
        await pilot.press("n")
        await app.shutdown()


async def test_a_delivery_tried_once_was_tried_1_time(room) -> None:
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await owe(pilot, 1)
        screen = await open_channels(pilot)
        table = screen.query_one(DeliveriesTable)
        await until(pilot, lambda: "1" in table.deliveries, "listed")
        assert table.deliveries["1"].tries == 1
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        question = app.screen.question  # type: ignore[attr-defined]
        assert "tried 1 time:" in question and "times" not in question
        await pilot.press("n")
        await app.shutdown()


async def test_a_cancelled_call_s_round_does_not_say_succeeded(deck_app) -> None:
    """`replay ✔ succeeded … shell cancelled`: the step settled its call, and the line said
    both at once. A round is shown by what became of its calls."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `rm -rf build`")
        main.query_one(DecisionQueue).focus()
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "reason prompt")
        app.screen.query_one(Input).value = "no"
        await pilot.press("enter")
        await until(pilot, lambda: main.state.counts() == (0, 0) and not main.state.pending,
                    "turn finished")  # fmt: skip
        timeline = main.query_one(Timeline)

        def lines() -> dict[str, str]:
            return {row.kind: timeline.render_line(y).text
                    for y, row in enumerate(timeline.rows)}  # fmt: skip

        drawn = await until(pilot, lines, "the replay drawn", ok=lambda d: "replay" in d)
        assert "⊘ cancelled" in drawn["replay"] and "shell cancelled" in drawn["replay"]
        assert "◆ suspended" in drawn["tool_round"]
        assert "succeeded" not in drawn["replay"] + drawn["tool_round"]
        assert "✔ succeeded" in drawn["inference"]  # a step's own state, as before
        await app.shutdown()


@pytest.mark.parametrize(
    ("kind", "status", "summary", "shown"),
    [
        ("tool_round", "succeeded", "shell suspended", "suspended"),
        ("replay", "succeeded", "shell cancelled", "cancelled"),
        ("tool_round", "succeeded", "calc succeeded, shell cancelled", "cancelled"),
        ("tool_round", "succeeded", "5 calls: 3 succeeded, 2 failed", "failed"),
        ("tool_round", "succeeded", "calc succeeded", "succeeded"),
        ("replay", "succeeded", "recovered shell suspended", "suspended"),
        ("tool_round", "failed", "shell succeeded", "failed"),  # the step's own end first
        ("inference", "succeeded", "calls shell", "succeeded"),
        ("inference", "succeeded", "the run was cancelled", "succeeded"),  # an answer's text
    ],
)
def test_a_round_is_shown_by_its_calls(kind: str, status: str, summary: str, shown: str) -> None:
    row = StepRow(1, 1, 0.0, "chat:main", "t_001", kind, status, 0.0, summary)
    assert shown_status(row) == shown


async def test_the_palette_offers_the_theme_once(deck_app) -> None:
    """Textual's "Theme" and the f2 binding's "Switch theme" were two entries for one
    action; Textual's stays (as its Quit and Keys do)."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        offered = [*await palette(SystemCommandsProvider(app.screen)),
                   *await palette(DeckCommands(app.screen))]  # fmt: skip
        assert [title for title in offered if "theme" in title.lower()] == ["Theme"]
        await app.shutdown()
