"""Breakpoints in the console (issue 36): a turn's pause waits in the decision queue and on
the chat's card with its own keys (a continue, n step, e edit then continue, x end the
turn after a confirmation whose default is No; the keys that do not apply to a pause are
not offered), each bound to what was shown; `B` on a call or a step sets a breakpoint from
it (the dialog proposes the call's narrowest pattern), and the breakpoints screen (`b`)
lists, adds and removes them."""

from __future__ import annotations

import inspect
import json

import pytest
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from console.commands import DeckCommands
from console.screens.breakpoints import BreakpointsScreen
from console.screens.confirm import ConfirmScreen
from console.screens.edit_args import EditArgsScreen
from console.screens.help import HelpScreen
from console.screens.set_breakpoint import SetBreakpointScreen
from console.widgets.breakpoints_table import BreakpointsTable
from console.widgets.decision_card import DecisionCard
from console.widgets.decision_queue import DecisionQueue
from console.widgets.key_bar import KeyBar
from engine.api import breakbook
from engine.domain.decisions import args_digest
from tests.console.breakpoint_scenes import (
    BREAKPOINT_SCENES,
    open_breakpoints,
    paused,
    pauses,
    point_ids,
    set_point,
)
from tests.console.conftest import build
from tests.console.helpers import (
    SIZE,
    Recorder,
    decisions_sent,
    palette,
    send,
    started,
    told,
    until,
)

pytestmark = [pytest.mark.anyio, pytest.mark.console]


@pytest.fixture(autouse=True)
def _point_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(breakbook, "new_id", point_ids())


async def to_queue(pilot: Pilot) -> DecisionQueue:
    """Leave the chat (its card may hold the keyboard) for the decision queue."""
    main = pilot.app.main  # type: ignore[attr-defined]
    await pilot.press("escape", "d")
    queue = main.query_one(DecisionQueue)
    await until(pilot, lambda: queue.has_focus, "the queue has the keyboard")
    return queue


def turn_of(main, call) -> object:  # noqa: ANN001
    return main.state.turns[call.turn_id]


def answer(main) -> str:  # noqa: ANN001
    """The last entry of the chat's thread: the model's answer once a turn ended."""
    return str(main.state.thread("chat:main").entries[-1].text)


def footer(main) -> str:  # noqa: ANN001
    return main.query_one(KeyBar).render().plain


async def test_a_pause_shows_in_the_queue_with_its_keys_and_a_continues_the_turn(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        await set_point(pilot, kind="inference", scope="thread", thread_id="chat:main")
        await send(pilot, "hello [b]there[/b]")
        pause = await paused(pilot, main, "inference")
        queue = await to_queue(pilot)
        await until(pilot, lambda: queue.row_count, "its row", ok=lambda n: n == 1)
        row = [str(c) for c in queue.get_row(pause.call_id)]
        assert row[0] == "breakpoint" and "paused" in row[1]
        assert row[2] == "before an inference: user: hello [b]there[/b]"  # text, not markup
        keys = footer(main)
        assert "a Continue" in keys and "n Step" in keys and "x End turn" in keys
        assert "Approve" not in keys and "Use a result" not in keys  # not a pause's keys
        card = main.query_one(DecisionCard)
        assert card.border_title is not None and "⏸ paused before an inference · chat:main" in str(
            card.border_title
        )
        await pilot.press("u", "A")  # not offered for a pause: nothing is decided
        await pilot.press("a")
        await until(pilot, lambda: turn_of(main, pause).status, "the turn goes on and ends",
                    ok=lambda s: s == "done")  # fmt: skip
        [decision] = sent
        assert (decision.action, decision.call_id) == ("resume", pause.call_id)
        assert decision.args_hash == args_digest(pause.args)  # bound to what was shown
        assert turn_of(main, pause).reason == "natural" and not pauses(main)
        await app.shutdown()


async def test_step_pauses_again_after_one_inference_then_one_round(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        await set_point(pilot, kind="inference", scope="once")
        await send(pilot, "calc 6*7")
        first = await paused(pilot, main, "inference")
        await to_queue(pilot)
        await pilot.press("n")  # one inference: it pauses before the calculation runs
        held = await paused(pilot, main, "call")
        assert [c["tool"] for c in held.args["calls"]] == ["calc"]
        assert held.call_id != first.call_id
        await pilot.press("n")  # one tool round: it pauses at its result
        result = await paused(pilot, main, "result")
        [entry] = result.args["calls"]
        assert (entry["tool"], entry["result"]) == ("calc", "42")
        await pilot.press("a")
        await until(pilot, lambda: turn_of(main, result).status, "the turn ends",
                    ok=lambda s: s == "done")  # fmt: skip
        assert [d.action for d in sent] == ["step", "step", "resume"]
        assert [d.args_hash for d in sent] == [args_digest(first.args), args_digest(held.args),
                                               args_digest(result.args)]  # fmt: skip
        assert "42" in answer(main)
        await app.shutdown()


async def test_cancel_at_a_pause_asks_first_and_ends_the_turn(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await set_point(pilot, kind="call", tool="calc", scope="room")
        await send(pilot, "calc 6*7")
        pause = await paused(pilot, main, "call")
        await to_queue(pilot)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        assert "The whole turn ends" in app.screen.question
        assert app.focused is not None and app.focused.id == "no"  # No is the default
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is main, "back, nothing decided")
        assert pauses(main) and turn_of(main, pause).status == "waiting"
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked again")
        await pilot.press("y")
        await until(pilot, lambda: turn_of(main, pause).status, "the turn ended",
                    ok=lambda s: s == "done")  # fmt: skip
        assert turn_of(main, pause).reason == "cancelled"
        calc = next(c for c in main.state.calls_of(pause.turn_id) if c.tool == "calc")
        assert calc.status == "cancelled"  # the held call never ran
        await app.shutdown()


async def test_edit_at_a_pause_changes_the_pending_message_then_continues(deck_app) -> None:
    rec = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await started(pilot)
        await set_point(pilot, kind="inference", scope="once")
        await send(pilot, "hello")
        pause = await paused(pilot, main, "inference")
        await to_queue(pilot)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditArgsScreen), "the editor")
        editor = app.screen.query_one(TextArea)
        assert json.loads(editor.text) == pause.args
        # what a pause does not let change is refused here, before anything is sent
        editor.text = json.dumps({**pause.args, "round": 5})
        await pilot.press("ctrl+s")
        await until(pilot, lambda: any("Not sent" in t for t in told(rec)), "refused")
        assert isinstance(app.screen, EditArgsScreen)
        message = {**pause.args["messages"][0], "text": "calc 2+3"}
        editor.text = json.dumps({**pause.args, "messages": [message]})
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the diff")
        await pilot.press("y")
        await until(pilot, lambda: turn_of(main, pause).status, "the turn ends",
                    ok=lambda s: s == "done")  # fmt: skip
        assert [c.tool for c in main.state.calls_of(pause.turn_id)] == ["breakpoint", "calc"]
        assert "5" in answer(main)
        await app.shutdown()


async def test_the_card_decides_a_pause_with_its_own_keys(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await set_point(pilot, kind="result", tool="calc", scope="room")
        await send(pilot, "calc 6*7", click=False)
        pause = await paused(pilot, main, "result")
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.armed and card.call is not None, "the card's keys live")
        line = card.key_line()
        assert line.startswith("a continue · n step") and "x end the turn" in line
        shown = str(card.query_one("#card-args").render())
        assert "calc (" in shown and "its result, held" in shown and "42" in shown
        await pilot.press("a")
        await until(pilot, lambda: turn_of(main, pause).status, "the turn ends",
                    ok=lambda s: s == "done")  # fmt: skip
        await app.shutdown()


async def test_b_on_a_call_sets_a_breakpoint_for_its_tool_and_the_next_call_pauses(
    deck_app,
) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "calc 6*7")
        await until(pilot, lambda: main.state.counts(), "the turn ends", ok=lambda c: c == (0, 0))
        await until(pilot, lambda: main.selected_turn, "its turn selected")
        calls = main.query_one("#calls")
        calls.focus()
        await until(pilot, lambda: calls.row_count, "its call listed", ok=lambda n: n == 1)
        await pilot.press("B")
        await until(pilot, lambda: isinstance(app.screen, SetBreakpointScreen), "the dialog")
        dialog = app.screen
        assert dialog.query_one("#bp-tool", Input).value == "calc"
        assert dialog.query_one("#bp-pattern", Input).value == '{"expression": "6*7"}'  # narrowest
        assert dialog.query_one("#bp-thread", Input).value == "chat:main"
        assert dialog.line.startswith("✓ pauses before a call of calc") and "matches" in dialog.line
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is main, "set")
        [point] = app.host.runtime.breakpoints.listed()
        assert (point.kind, point.tool, point.pattern, point.scope, point.thread_id) == (
            "call", "calc", '{"expression": "6*7"}', "thread", "chat:main")  # fmt: skip
        await send(pilot, "calc 6*7")
        pause = await paused(pilot, main, "call")
        assert pause.args["calls"][0]["args"] == {"expression": "6*7"}
        await app.shutdown()


async def test_b_on_an_inference_step_proposes_an_inference_breakpoint(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "hello")
        await until(pilot, lambda: main.state.counts(), "the turn ends", ok=lambda c: c == (0, 0))
        timeline = main.query_one("#timeline")
        timeline.focus()
        await until(pilot, lambda: timeline.cursor_row, "a step selected",
                    ok=lambda row: row is not None and row.kind == "inference")  # fmt: skip
        await pilot.press("B")
        await until(pilot, lambda: isinstance(app.screen, SetBreakpointScreen), "the dialog")
        dialog = app.screen
        assert dialog.typed()["kind"] == "inference" and dialog.query_one("#bp-tool").disabled
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is main, "set")
        [point] = app.host.runtime.breakpoints.listed()
        assert (point.kind, point.scope, point.thread_id) == ("inference", "thread", "chat:main")
        await app.shutdown()


async def test_the_breakpoints_screen_lists_adds_and_removes(deck_app) -> None:
    rec = Recorder(Notify, BreakpointsScreen.Changed)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await started(pilot)
        await set_point(pilot, kind="call", tool="shell", pattern="git push*", scope="room")
        screen = await open_breakpoints(pilot)
        table = screen.query_one(BreakpointsTable)
        assert list(table.points) == ["b001"]
        assert [str(c) for c in table.get_row("b001")[1:4]] == [
            "call", "before shell matching git push*", "room"]  # fmt: skip
        # a: the dialog, blank but for the chat's thread; an inference breakpoint for it
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, SetBreakpointScreen), "the dialog")
        dialog = app.screen
        assert dialog.query_one("#bp-tool", Input).value == ""
        assert dialog.query_one("#bp-thread", Input).value == "chat:main"
        await pilot.press("left", "space")  # the kind: before an inference
        await until(pilot, lambda: dialog.typed()["kind"], "chosen", ok=lambda k: k == "inference")
        # a scope the room cannot use is refused on the dialog's line, the dialog open
        dialog.query_one("#bp-scope").focus()
        await pilot.press("right", "space")  # a group
        dialog.query_one("#bp-group", Input).value = "nope"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: dialog.line, "refused", ok=lambda line: "unknown group" in line)
        assert app.screen is dialog
        dialog.query_one("#bp-group", Input).value = "task"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is screen, "set")
        await until(
            pilot, lambda: list(table.points), "listed", ok=lambda ps: ps == ["b001", "b002"]
        )
        assert table.points["b002"].group == "task"
        # x: asks, No the default; then yes removes it
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        assert app.focused is not None and app.focused.id == "no"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen, "kept")
        assert len(app.host.runtime.breakpoints.listed()) == 2
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked again")
        await pilot.press("y")
        await until(pilot, lambda: list(table.points), "removed", ok=lambda ps: len(ps) == 1)
        assert [m.added for m in rec.of(BreakpointsScreen.Changed)] == [True, False]
        assert any("removed" in t for t in told(rec))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, "closed")
        await app.shutdown()


async def test_breakpoints_are_in_the_palette_and_the_help(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        titles = await palette(DeckCommands(main))
        assert "Breakpoints" in titles and "Decisions: Step" in titles
        assert "Calls: Break here" in titles and "Timeline: Break here" in titles
        if inspect.isawaitable(opened := titles["Breakpoints"]()):
            await opened
        await until(pilot, lambda: isinstance(app.screen, BreakpointsScreen), "by the palette")
        await until(pilot, lambda: app.screen.listings > 0, "listed")
        offered = await palette(DeckCommands(app.screen))
        assert "Breakpoints: Add breakpoint" in offered and "Close breakpoints" in offered
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        rows = app.screen.rows
        assert ("b", "Breakpoints") in rows and ("x / del", "Remove breakpoint") in rows
        said = {what: keys for keys, what in rows}  # (a tooltip, where a key has one)
        assert said["Set a breakpoint for this call's tool (its pattern proposed)"] == "B"
        assert said["Go on from a breakpoint's pause"] == "a"
        assert [
            k for k, what in rows if what.startswith("Go on from a breakpoint's pause for")
        ] == ["n"]
        await app.shutdown()


@pytest.mark.parametrize("scene", list(BREAKPOINT_SCENES))
def test_breakpoint_snapshot(scene: str, snap_compare, room) -> None:
    run_before, size, kw = BREAKPOINT_SCENES[scene]
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)
