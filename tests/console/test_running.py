"""What runs shows that it runs: a spinner and its time in the chat, the calls pane and
the status bar, live while a turn runs, gone when it ends."""

from __future__ import annotations

import pytest

from console.spinner import FRAMES, ran
from console.widgets.calls_table import CallsTable
from console.widgets.chat_log import ChatLog
from console.widgets.status_bar import StatusBar
from tests.console.helpers import SIZE, approved, until

pytestmark = [pytest.mark.anyio, pytest.mark.console]

BUSY = "while [ ! -e go ]; do sleep 0.05; done; echo done"  # runs until the test lets it end


def test_run_times_read_as_people_say_them() -> None:
    assert [ran(s) for s in (0, 3.9, 65, 7380)] == ["0s", "3s", "1m05s", "2h03m"]


async def test_a_running_call_spins_in_the_chat_the_calls_and_the_status_bar(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await approved(pilot, f"run `{BUSY}`")
        log = main.query_one(ChatLog)
        await until(pilot, lambda: "running" in log.activity, "the chat says it runs")
        assert log.activity[0] in FRAMES and " · $ while [ ! -e go ]" in log.activity
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
    assert said == "⠋ running 3s · $ make"  # approved after a minute's wait, running 3s
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


PRINTS = "echo first; echo oops >&2; while [ ! -e go ]; do sleep 0.05; done; echo last"


async def test_a_running_commands_output_streams_into_the_chat_and_its_details(deck_app) -> None:
    """What the command prints shows under its spinner as it prints it (stderr apart), and
    in its details, opened from the calls pane while it runs; when it ends the chat shows
    its result as text and nothing is left of the stream."""
    from console.screens.call_detail import CallDetailScreen
    from console.widgets.text import Static

    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await approved(pilot, f"run `{PRINTS}`")
        log = main.query_one(ChatLog)
        await until(pilot, lambda: log.output, "the printed lines under the spinner",
                    ok=lambda lines: sorted(lines) == [("stderr", "oops"), ("stdout", "first")])  # fmt: skip
        drawn = [log.render_line(y).text for y in range(log.size.height)]
        assert "  first" in [line.rstrip() for line in drawn]
        main.query_one(CallsTable).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, CallDetailScreen), "the details")
        output = app.screen.query_one("#detail-output", Static)
        await until(pilot, lambda: str(output.render()), "its output, live",
                    ok=lambda text: "first" in text and "oops" in text)  # fmt: skip
        (app.room.workspace / "go").write_text("")  # type: ignore[attr-defined]
        await until(pilot, lambda: str(output.render()), "it says the call ended",
                    ok=lambda text: "it has ended" in text)  # fmt: skip
        await pilot.press("escape")
        await until(pilot, lambda: main.state.counts() == (0, 0), "the turn ends")
        await until(pilot, lambda: (log.output, main.state.output), "nothing left of the stream",
                    ok=lambda left: left == ([], {}))  # fmt: skip
        view = main.state.thread("chat:main")
        tool = next(e for e in view.entries if e.role == "tool")
        assert '"stdout": "first\\nlast\\n"' in tool.text
        await app.shutdown()


async def test_esc_twice_from_the_chat_stops_the_running_turn_and_its_command(deck_app) -> None:
    """Esc in the chat while its turn runs leaves the chat and says a second Esc stops it;
    the second stops the turn and the command's process group with it. Only the very next
    key: Esc, another key, Esc (closing a dialog, say) stops nothing."""
    import json

    from console.widgets.key_bar import KeyBar
    from tests.helpers import room_rows

    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await approved(pilot, f"run `{BUSY}`")
        await until(pilot, lambda: "running" in main.query_one(ChatLog).activity, "it runs")
        await pilot.press("i")
        bar = main.query_one(KeyBar)
        await until(pilot, lambda: bar.render().plain, "Esc says twice stops",
                    ok=lambda keys: "esc Leave (twice: stop turn)" in keys)  # fmt: skip
        await pilot.press("escape", "d", "escape")  # (the last Esc is the queue's)
        await pilot.pause()
        assert main.state.counts()[0] == 1 and "Stop turn" not in bar.render().plain
        await pilot.press("i")
        room = app.room.path  # type: ignore[attr-defined]
        (meta,) = room_rows(room, "SELECT meta FROM tool_calls WHERE tool = 'shell'")[0]
        pgid = json.loads(meta)["process"]["pgid"]
        await pilot.press("escape")
        await until(pilot, lambda: bar.render().plain, "the footer offers the stop",
                    ok=lambda keys: "esc Stop turn" in keys)  # fmt: skip
        await pilot.press("escape")
        await until(pilot, lambda: main.state.counts() == (0, 0), "the turn stopped")
        turn = next(iter(main.state.turns.values()))
        assert (turn.status, turn.reason) == ("done", "cancelled")

        from engine.tools.orphans import members

        # (a killed process is a zombie until its parent reaps it: this machine's init
        # reaps orphans late, so what counts is that none of the group runs)
        await until(pilot, lambda: members(pgid), "no process of the command's group runs",
                    ok=lambda left: left == [])  # fmt: skip
        await app.shutdown()


async def test_ctrl_r_shows_every_tools_output_whole_and_cuts_it_again(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await approved(pilot, "run `seq 200`")
        await until(pilot, lambda: main.state.counts() == (0, 0), "the turn ends")
        log = main.query_one(ChatLog)

        def drawn() -> list[str]:
            return [log.render_line(y).text.strip() for y in range(-int(log.scroll_y),
                                                                   log.virtual_size.height)]  # fmt: skip

        def lines() -> set[str]:
            return {s.text.strip() for entry in log._entries for s in log._lines_of(entry)}

        await until(
            pilot,
            lines,
            "the output cut",
            ok=lambda seen: any("ctrl+r: show all" in x for x in seen),
        )
        assert "200" not in lines()
        await pilot.press("ctrl+r")
        await until(pilot, lines, "the output whole", ok=lambda seen: "200" in seen)
        assert not any("ctrl+r" in x for x in lines())
        await pilot.press("ctrl+r")
        await until(pilot, lines, "cut again", ok=lambda seen: "200" not in seen)
        del drawn
        await app.shutdown()


async def test_a_commands_control_characters_stream_as_text(deck_app) -> None:
    """Escape sequences a command prints reach the chat as the characters they are, never
    as a colour or a cursor move in the operator's terminal."""
    command = "printf '\\033[31mred\\033[0m\\n'; while [ ! -e go ]; do sleep 0.05; done"
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await approved(pilot, f"run `{command}`")
        log = main.query_one(ChatLog)
        await until(pilot, lambda: log.output, "the line under the spinner",
                    ok=lambda lines: lines == [("stdout", "\x1b[31mred\x1b[0m")])  # fmt: skip
        drawn = "".join(segment.text for y in range(log.size.height)
                        for segment in log.render_line(y))  # fmt: skip
        assert "\\x1b[31mred\\x1b[0m" in drawn and "\x1b" not in drawn
        (app.room.workspace / "go").write_text("")  # type: ignore[attr-defined]
        await until(pilot, lambda: main.state.counts() == (0, 0), "the turn ends")
        await app.shutdown()
