"""What runs shows that it runs: a spinner and its time in the chat, the calls pane and
the status bar, live while a turn runs, gone when it ends."""

from __future__ import annotations

import pytest

from console.spinner import FRAMES, ran
from console.widgets.calls_table import CallsTable
from console.widgets.chat_log import ChatLog
from console.widgets.status_bar import StatusBar
from tests.console.helpers import SIZE, call_waits, until

pytestmark = [pytest.mark.anyio, pytest.mark.console]

BUSY = "while [ ! -e go ]; do sleep 0.05; done; echo done"  # runs until the test lets it end


def test_run_times_read_as_people_say_them() -> None:
    assert [ran(s) for s in (0, 3.9, 65, 7380)] == ["0s", "3s", "1m05s", "2h03m"]


async def test_a_running_call_spins_in_the_chat_the_calls_and_the_status_bar(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, f"run `{BUSY}`")
        main.query_one("#decisions").focus()
        await pilot.press("a")
        log = main.query_one(ChatLog)
        await until(pilot, lambda: "running" in log.activity, "the chat says it runs")
        assert log.activity[0] in FRAMES and "$ while [ ! -e go ]" in log.activity
        status = main.query_one(StatusBar)
        await until(pilot, lambda: status.activity, "the status bar spins")
        assert status.activity[0] in FRAMES and "running " + status.activity in (
            status.render().plain)  # fmt: skip
        calls = main.query_one(CallsTable)
        await until(pilot, lambda: any(r[1][4][0] in FRAMES for r in calls._rows),
                    "the calls pane spins on the running call")  # fmt: skip
        (app.room.workspace / "go").write_text("")  # type: ignore[attr-defined]
        await until(pilot, lambda: main.state.counts() == (0, 0), "the turn ends")
        await until(pilot, lambda: not log.activity and not status.activity, "spinners gone")
        await app.shutdown()


def test_a_running_call_counts_from_when_it_began_to_run_not_from_when_it_waited() -> None:
    from console.spinner import thread_activity
    from console.state import CallRow, DeckState, TurnRow
    from engine.lifecycle import CallStatus, TurnStatus

    state = DeckState()
    state.add_turn(TurnRow("t1", "chat:main", TurnStatus.RUNNING, started_at=0.0))
    state.add_call(CallRow("c1", "t1", "chat:main", "shell", {"command": "make"},
                           CallStatus.RUNNING, created_at=1.0, updated_at=60.0))  # fmt: skip
    said = thread_activity(state, "chat:main", now=63.5, frame=0)
    assert said == "⠋ $ make · running 3s"  # approved after a minute's wait, running 3s
    assert thread_activity(state, "chat:other", now=63.5, frame=0) == ""


async def test_the_cancel_key_shows_while_a_turn_runs_and_stops_it(deck_app) -> None:
    from console.screens.confirm import ConfirmScreen
    from console.widgets.key_bar import KeyBar
    from console.widgets.timeline import Timeline
    from engine.providers.offline import OfflineModel
    from tests.console.helpers import send, started

    app = deck_app(provider=OfflineModel(delay=0.2))  # the answer streams slowly
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        main.query_one(Timeline).focus()
        await pilot.pause()
        bar = main.query_one(KeyBar)
        assert "Cancel turn" not in bar.render().plain  # nothing to cancel
        await send(pilot, "hello")
        await until(pilot, lambda: main.state.counts()[0] == 1, "a turn runs")
        main.query_one(Timeline).focus()
        await until(pilot, lambda: " c Cancel turn" in bar.render().plain, "c is offered")
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        await pilot.press("y")
        await until(pilot, lambda: main.state.counts() == (0, 0), "the turn stopped")
        turn = next(iter(main.state.turns.values()))
        assert (turn.status, turn.reason) == ("done", "cancelled")
        await until(pilot, lambda: "Cancel turn" not in bar.render().plain, "c is gone again")
        await app.shutdown()
