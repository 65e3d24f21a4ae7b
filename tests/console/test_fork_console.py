"""Fork and replay in the console (issue 37): `F` on a step of the live timeline (or of a
turn in history) opens the fork dialog, which shows what the fork copies and lets the
operator edit a message or a result and pick the group; ctrl+s forks and the chat shows
the new thread, the copied entries and its answer. `P` on a turn opens the replay dialog;
the replay's turn appears, and once it ends the diff of it and its original is offered.
Snapshots of the dialogs and of history's threads drawn as a tree."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.notifications import Notify
from textual.widgets import OptionList, Select

from console.commands import DeckCommands
from console.screens.confirm import ConfirmScreen
from console.screens.diff import DiffScreen
from console.screens.fork import ForkScreen
from console.screens.help import HelpScreen
from console.screens.replay import ReplayScreen
from console.widgets.timeline import Timeline
from engine.domain.decisions import Decision
from tests.console.conftest import build
from tests.console.fork_scenes import (
    FORK_PREPARE,
    FORK_SCENES,
    calculated,
    edit_entry,
    fixed_threads,
    fork_dialog,
    invoked_room,
    on_first_step,
    replay_dialog,
)
from tests.console.helpers import SIZE, Recorder, palette, told, until
from tests.console.history_scenes import open_history, settled

pytestmark = pytest.mark.console

FORKED = "chat:main~fork-beef"


@pytest.fixture(autouse=True)
def _fixed_threads() -> Iterator[None]:
    undo = fixed_threads()
    yield
    undo()


@pytest.fixture
def invoked(room) -> str:
    """The room with a turn of origin invoke, before the console opens it."""
    return invoked_room(room)


@pytest.mark.parametrize("scene", list(FORK_SCENES))
def test_fork_snapshot(scene: str, snap_compare, room) -> None:
    run_before, size, kw = FORK_SCENES[scene]
    if (prepare := FORK_PREPARE.get(scene)) is not None:
        prepare(room)
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)


def lines(screen: ForkScreen) -> list[str]:
    options = screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


@pytest.mark.anyio
async def test_fork_from_a_step_with_an_edited_result(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        fork = await fork_dialog(pilot)
        # what it copies: the message, the call and its result (the step's call came with it)
        assert fork.upto == 3
        assert lines(fork) == ["   0  you    calc 2+3", '   1  agent  Running 1 tool.  → calls '
                               'calc {"expression": "2+3"}', "   2  tool   5"]  # fmt: skip
        options = fork.query_one(OptionList)
        assert options.highlighted == 2  # the last that can be edited
        assert [options.get_option_at_index(i).disabled for i in range(3)] == [False, True, False]
        await edit_entry(pilot, "41")
        assert fork.edits == {2: "41"} and lines(fork)[2] == "   2  tool   41  ✎ edited (was 5)"
        fork.query_one("#fork-group", Select).value = "task"
        await pilot.press("ctrl+s")
        main = app.main
        await until(
            pilot, lambda: main.thread_id, "the chat shows the fork", ok=lambda t: t == FORKED
        )
        view = main.state.thread(FORKED)
        await until(pilot, lambda: [e.text for e in view.entries], "the copies and the answer",
                    ok=lambda t: t[-1:] == ["`calc` returned: 41"])  # fmt: skip
        assert [e.text for e in view.entries][:3] == ["calc 2+3", "Running 1 tool.", "41"]
        runtime = app.host.runtime
        [(group,)] = await runtime.store.fetchall(
            "SELECT group_name FROM threads WHERE id = ?", (FORKED,))  # fmt: skip
        assert group == "task"
        await app.shutdown()


@pytest.mark.anyio
async def test_esc_backs_out_and_a_refusal_keeps_the_dialog(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        fork = await fork_dialog(pilot)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, "backed out")
        assert app.main.thread_id == "chat:main"
        await pilot.press("F")
        await until(pilot, lambda: isinstance(app.screen, ForkScreen), "the dialog again")
        fork = app.screen
        await until(pilot, lambda: fork.upto, "read", ok=lambda n: n is not None)
        fork.edits = {1: "not editable"}  # (the dialog never offers it; the room refuses it)
        await pilot.press("ctrl+s")
        check = fork.query_one("#fork-check")
        await until(pilot, lambda: str(check.render()), "the refusal",
                    ok=lambda t: "only a user message or a tool result" in t)  # fmt: skip
        assert app.screen is fork
        await app.shutdown()


@pytest.mark.anyio
async def test_replay_starts_its_turn_and_offers_the_diff(room, invoked: str) -> None:
    original = invoked
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await replay_dialog(pilot)
        assert dialog.turn_id == original
        assert dialog.typed() == {"model": "offline:b", "strategy": None, "instructions": None,
                                  "group": "chat"}  # fmt: skip
        await pilot.press("ctrl+s")
        main, thread = app.main, "t1~replay-beef"
        await until(pilot, lambda: [t for t in main.state.turns.values() if t.thread_id == thread],
                    "the replay's turn appears", ok=bool)  # fmt: skip
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the diff is offered")
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), "the diff")
        diff = app.screen
        await until(pilot, lambda: diff.diff, "read", ok=lambda d: d is not None)
        assert (diff.turn_a, diff.diff.a.thread_id, diff.diff.b.thread_id) == (original, "t1",
                                                                               thread)  # fmt: skip
        assert diff.diff.b.model == "offline:b" and diff.diff.b.answer == "`calc` returned: 5"
        await app.shutdown()


@pytest.fixture
def shelled(room) -> str:
    """The room with a turn whose shell call was approved, before the console opens it."""
    return invoked_room(room, "run `echo hi`")


@pytest.mark.anyio
async def test_a_replay_that_waits_for_a_decision_is_said_then_followed(room, shelled) -> None:
    recorder = Recorder(Notify)
    app = build(room)
    async with app.run_test(size=SIZE, message_hook=recorder) as pilot:
        await replay_dialog(pilot)
        await pilot.press("ctrl+s")
        main = app.main
        # the replay's shell call passes the gate as any call does: it asks for an approval
        await until(pilot, lambda: main.state.pending, "the replay's call waits", ok=bool)
        await until(pilot, lambda: told(recorder), "said", ok=lambda t: any(
            "waits for a decision" in said for said in t))  # fmt: skip
        [call] = await app.host.runtime.pending()
        assert call.thread_id == "t1~replay-beef" and not call.reason.startswith("replay:")
        await app.host.runtime.decide(Decision.approve(call.call_id, seen=call.args))
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the diff offered")
        await pilot.press("n")  # not now: nothing opens
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "answered")
        assert not isinstance(app.screen, DiffScreen)
        await app.shutdown()


@pytest.mark.anyio
async def test_from_history_fork_a_step_and_replay_a_turn(deck_app) -> None:
    recorder = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=recorder) as pilot:
        await calculated(pilot)
        history = await open_history(pilot)
        await settled(pilot, history)
        # Enter: the turn's steps; F on its first
        await pilot.press("enter")
        steps = history.query_one("#hist-steps", Timeline)
        await until(pilot, lambda: steps.has_focus, "the steps have the keyboard")
        await pilot.press("home", "F")
        await until(pilot, lambda: isinstance(app.screen, ForkScreen), "the fork dialog")
        fork = app.screen
        await until(pilot, lambda: fork.upto, "read", ok=lambda n: n == 3)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: app.screen is history, "back in history")
        await until(pilot, lambda: app.main.thread_id, "the chat behind shows it",
                    ok=lambda t: t == FORKED)  # fmt: skip
        assert any(FORKED in said and "q: back" in said for said in told(recorder))
        # P on the turns list: the replay dialog for the selected turn
        history.query_one("#hist-turns").focus()
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen), "the replay dialog")
        assert app.screen.turn_id == history.selected_turn()
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is history, "backed out")
        await app.shutdown()


@pytest.mark.anyio
async def test_keys_in_the_help_and_the_palette(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await calculated(pilot)
        await on_first_step(pilot, main)
        titles = await palette(DeckCommands(app.screen, None))
        assert "Timeline: Fork from this step" in titles and "Timeline: Replay this turn" in titles
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        await app.shutdown()
