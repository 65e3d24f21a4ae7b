"""Pilot tests of the decision queue: where the cursor goes after a decision, a key on a
row that changed by itself just before, marked calls decided together, a call decided
while its turn is busy, keys that act only where the queue has the focus, and rows that
show a whole command."""

from __future__ import annotations

import pytest
from textual.notifications import Notify

from console.screens.confirm import ConfirmScreen
from console.screens.main import MainScreen
from console.widgets.decision_queue import CHANGED, DecisionQueue
from engine.domain.decisions import Decision
from tests.console.conftest import KeysClock
from tests.console.helpers import SIZE, Recorder, decisions_sent, send, started, told, until

pytestmark = pytest.mark.anyio

BUSY = "while [ ! -e go ]; do sleep 0.05; done"  # runs until the test lets it end


def command(queue: DecisionQueue) -> str:
    """The command of the call under the queue's cursor."""
    key = queue.current_key()
    assert key is not None, "no row under the cursor"
    return str(queue._calls[key].args["command"])


async def calls_wait(pilot, *messages: str) -> tuple[MainScreen, DecisionQueue]:  # noqa: ANN001
    """Send each message on a thread of its own (chat:main, chat:2, ...) and wait until
    all their calls wait; the queue then has the focus."""
    main = await started(pilot)
    want = 0
    for n, text in enumerate(messages):
        if n:
            await pilot.press("ctrl+n")
        await send(pilot, text, click=False)
        want += text.count("run `")
        await until(pilot, lambda: len(main.state.pending) == want, f"{want} calls wait")  # noqa: B023
    queue = main.query_one(DecisionQueue)
    queue.focus()
    await pilot.pause()
    return main, queue


async def test_after_a_decision_the_cursor_stays_on_the_threads_next_call(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main, queue = await calls_wait(
            pilot, "run `echo a1` and run `echo a2`", "run `echo b1` and run `echo b2`"
        )
        assert [str(c.args["command"]) for c in main.state.pending.values()] == [
            "echo a1", "echo a2", "echo b1", "echo b2"]  # fmt: skip
        await pilot.press("j")
        assert command(queue) == "echo a2"
        await pilot.press("a")
        await until(pilot, lambda: len(main.state.pending) == 3, "a2 applied")
        await pilot.pause()
        # chat:main has no call below a2: the one above it, not b1 (the same position)
        assert command(queue) == "echo a1"
        await pilot.press("j")  # the second of three calls of two threads
        assert command(queue) == "echo b1"
        await pilot.press("a")
        await until(pilot, lambda: len(main.state.pending) == 2, "b1 applied")
        await pilot.pause()
        assert command(queue) == "echo b2", "the same thread's next call, not the top row"
        await app.shutdown()


async def test_after_its_own_decision_the_next_key_acts_on_the_next_call(deck_app) -> None:
    """Clearing N calls takes N keys: the cursor goes to the next call as the operator
    decides, and that is the operator's doing, so nothing asks."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main, queue = await calls_wait(pilot, "run `echo a1`", "run `echo b1`", "run `echo c1`")
        sent = decisions_sent(main)
        assert command(queue) == "echo a1"
        await pilot.press("a", "a", "a")
        await until(pilot, lambda: not main.state.pending, "all three applied")
        assert [d.call_id for d in sent] == ["c_001", "c_002", "c_003"]
        assert not isinstance(app.screen, ConfirmScreen)
        await app.shutdown()


async def test_a_row_that_changed_under_the_cursor_by_itself_asks_first(deck_app) -> None:
    keys = KeysClock()
    app = deck_app(keys_clock=keys)
    async with app.run_test(size=SIZE) as pilot:
        main, queue = await calls_wait(pilot, "run `echo a1`", "run `echo b1`")
        assert command(queue) == "echo a1"
        keys.held = True
        other = Decision.approve("c_001", seen={"command": "echo a1"}, id="d_other")
        await main.bridge.api.decide(other)  # another operator decides a1
        sent = decisions_sent(main)
        await until(pilot, lambda: len(main.state.pending) == 1, "a1 applied elsewhere")
        await pilot.pause()
        assert command(queue) == "echo b1"  # the cursor came here by itself, just now
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked first")
        assert "changed just now" in app.screen.question
        assert "shell on chat:main" in app.screen.question  # what changed: a1 left
        await pilot.press("enter")  # No, the default
        await pilot.pause()
        assert not sent and main.state.pending
        keys.now += CHANGED  # a second on, the operator has seen it: the key acts
        await pilot.press("a")
        await until(pilot, lambda: not main.state.pending, "b1 applied")
        assert [d.call_id for d in sent] == ["c_002"]
        await app.shutdown()


async def test_marked_calls_are_decided_together_behind_one_confirmation(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main, queue = await calls_wait(
            pilot, "run `echo a1` and run `echo a2`", "run `echo b1` and run `echo b2`"
        )
        sent = decisions_sent(main)
        await pilot.press("space")  # a1, and the cursor goes on to a2
        await pilot.press("j", "asterisk")  # b1's thread: b1 and b2
        assert set(queue.marked) == {"c_001", "c_003", "c_004"}
        await pilot.pause()
        assert str(queue.get_row("c_001")[0]).startswith("● ")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "one confirmation")
        assert "Approve these 3 calls" in app.screen.question
        listed = str(app.screen.body)
        assert all(c in listed for c in ("echo a1", "echo b1", "echo b2"))
        assert "echo a2" not in listed
        await pilot.press("y")
        await until(pilot, lambda: len(main.state.pending) == 1, "three applied")
        assert sorted(d.call_id for d in sent) == ["c_001", "c_003", "c_004"]
        assert all(d.action == "resume" and d.args_hash for d in sent)  # each bound
        assert not queue.marked
        await app.shutdown()


async def test_a_marked_call_whose_arguments_changed_is_not_decided_with_the_rest(
    deck_app,
) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main, queue = await calls_wait(pilot, "run `echo a1` and run `echo a2`")
        await pilot.press("asterisk")
        main.state.pending["c_002"].args = {"command": "echo CHANGED"}  # as events would
        sent = decisions_sent(main)
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "one confirmation")
        assert "Approve this call" in app.screen.question and "changed" in app.screen.question
        await pilot.press("y")
        await until(pilot, lambda: len(main.state.pending) == 1, "one applied")
        assert [d.call_id for d in sent] == ["c_001"]
        await app.shutdown()


async def test_a_call_decided_while_its_turn_is_busy_says_so_and_takes_no_more(
    deck_app, room
) -> None:
    said = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=said) as pilot:
        main, queue = await calls_wait(pilot, f"run `{BUSY}` and run `echo two`")
        sent = decisions_sent(main)
        await pilot.press("a")  # the first runs, and holds the turn until `go` exists
        await until(pilot, lambda: len(main.state.pending) == 1, "the first is running")
        await pilot.pause()
        assert command(queue) == "echo two"
        await pilot.press("a")  # recorded; it applies when the turn is free
        await until(pilot, lambda: "decided" in queue.get_row_at(0)[1].plain, "shown decided")
        await pilot.press("a", "x")
        await pilot.pause()
        warned = told(said, "warning")
        assert len(warned) == 2 and all(
            w.endswith("is decided (approved): it applies when the turn is free.") for w in warned
        )
        assert len(sent) == 2 and main.state.pending  # the second key sent nothing more
        (room / "workspace" / "go").touch()
        await until(pilot, lambda: not main.state.pending and main.state.counts() == (0, 0),
                    "both applied, the turn done")  # fmt: skip
        answer = main.state.thread("chat:main").entries[-1].text
        assert "two" in answer
        await app.shutdown()


async def test_decision_keys_act_only_where_the_queue_has_the_focus(deck_app) -> None:
    said = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=said) as pilot:
        main, queue = await calls_wait(pilot, "run `echo hi`")
        sent = decisions_sent(main)
        main.query_one("#chat-input").focus()
        await pilot.press("a", "x")  # typed in the chat
        main.query_one("#timeline").focus()
        await pilot.press("a", "x", "e", "u", "A")  # no pane but the queue decides
        await pilot.pause()
        assert main.query_one("#chat-input").value == "ax"
        assert not sent and main.state.pending and isinstance(app.screen, MainScreen)
        await app.run_action("decide('approve')", queue)  # the queue's action, without focus
        await pilot.pause()
        assert told(said, "warning")[-1].startswith("The decision queue does not have the focus")
        assert not sent and main.state.pending
        await app.shutdown()


async def test_at_80x24_the_queue_takes_the_width_and_shows_a_whole_command(deck_app) -> None:
    cmd = "pytest -q tests/console -k 'queue or detail' --maxfail=1 -x"  # ~60 characters
    app = deck_app()
    async with app.run_test(size=(80, 24)) as pilot:
        main, queue = await calls_wait(pilot, f"run `{cmd}` and run `git status`")
        assert main.has_class("-narrow", "-short")
        await pilot.pause()
        assert queue.region.width >= 76, "the decisions take the terminal's width"
        lines = [queue.render_line(y).text for y in range(1, 5)]  # under the header
        assert lines[0].split()[:3] == ["shell", "◆", "suspended"]
        assert lines[1].split()[0] == "chat:main"  # the thread, under the tool
        first, second = str(queue.get_row_at(0)[2]).split("\n")  # the arguments' two lines
        assert f"{first} {second}" == f"$ {cmd}", "the whole command, in its row"
        assert first in lines[0] and second in lines[1]  # drawn whole, not cut by the column
        assert "git status" in lines[2] and "…" not in " ".join(lines)
        await pilot.resize_terminal(160, 48)  # the thread and turn in columns again
        await until(pilot, lambda: not main.has_class("-narrow"), "wide")
        await until(pilot, lambda: str(queue.get_row_at(0)[3]) == "chat:main", "wide columns")
        await pilot.pause()
        shown = [queue.render_line(y).text for y in range(1, 6)]
        rows = " ".join(" ".join(line.split()) for line in shown)
        assert cmd.split()[-1] in rows and "git status" in rows  # whole, each in its row
        assert shown[0].split()[-3:] == ["chat:main", "t_001", "0s"]
        await app.shutdown()
