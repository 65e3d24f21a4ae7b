"""Deadlines and attention in the console (issue 15): the queue shows the time left to a
call's deadline and warns before it passes; a call that starts waiting rings the bell
once per burst (not with `bell = false`) and writes a desktop notification where the
terminal shows one; notifications never cover the decision queue."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from textual.notifications import Notify
from textual.widgets._toast import Toast

from console.app import MAX_TOASTS, make_app
from console.attention import GAP, Attention, pick_notify, sequence
from console.widgets.decision_queue import DecisionQueue, time_left
from console.widgets.status_bar import StatusBar
from engine.config import ConsoleConfig
from engine.domain.events import CallChanged
from engine.providers.offline import OfflineModel
from tests.console.conftest import T0, KeysClock, fixed_ids
from tests.console.helpers import Recorder, call_waits, started, told, until
from tests.console.scenes import queue, steady
from tests.wait import PATIENCE

pytestmark = pytest.mark.anyio


def toml(room: Path, text: str) -> None:
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(text)


class Ticking:
    """A monotonic clock that moves `step` seconds at each reading."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def waiting(n: int, first: int = 0) -> list[CallChanged]:
    """`n` calls that start waiting, each in a thread of its own."""
    return [CallChanged(at=T0, thread_id=f"burst:{i}", turn_id=f"u_{i}", call_id=f"c_b{i}",
                        tool="shell", args={"command": f"echo {i}"}, status="suspended",
                        error="shell needs approval")
            for i in range(first, first + n)]  # fmt: skip


# -- the time left ------------------------------------------------------------------------------


def test_time_left_reads_as_the_queue_shows_it() -> None:
    assert [time_left(s) for s in (252, 59.2, 3900, 0, -5)] == [
        "4m12s", "1m00s", "1h05m", "due now", "due now"]  # fmt: skip


async def test_the_queue_shows_the_time_left_and_warns_before_the_deadline(room: Path) -> None:
    toml(room, '[approvals.tools.shell]\ndeadline = "5m"\n')
    now = [T0]
    app = make_app(room, clock=lambda: now[0], provider=OfflineModel(delay=0), ids=fixed_ids(),
                   keys_clock=KeysClock())  # fmt: skip
    rec = Recorder(Notify)
    async with app.run_test(size=(160, 48), message_hook=rec) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        queue = main.query_one(DecisionQueue)
        [key] = main.state.pending

        def cell(label: str) -> Text | str:
            return queue.get_cell(key, label)

        await until(pilot, lambda: str(cell("left")) == "5m00s", "5m00s left shown")
        assert "left" in queue.labels and not queue._near
        assert not [t for t in told(rec) if "deadline" in t]
        now[0] = T0 + 248  # the tick (once a second) redraws the time left
        await until(pilot, lambda: str(cell("left")) == "⚠ 52s", "the last minute warned")
        tool = cell("tool")
        assert isinstance(tool, Text) and tool.spans, "the row is styled as a warning"
        await until(
            pilot, lambda: [t for t in told(rec, "warning") if "deadline" in t], "the warning told"
        )  # its notification may come a frame after the cell
        [warned] = [t for t in told(rec, "warning") if "deadline" in t]
        assert warned == ('shell {"command": "echo hi"} on chat:main: its deadline is 12:05:00 '
                          "(in 52s); undecided, it is cancelled then.")  # fmt: skip
        now[0] = T0 + 300
        await until(pilot, lambda: str(cell("left")) == "⚠ due now", "due now")
        assert len([t for t in told(rec) if "deadline" in t]) == 1  # said once
        assert main.query_one(StatusBar).calls == 1
        await app.shutdown()


async def test_without_deadlines_the_queue_has_no_left_column(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=(160, 48)) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        assert "left" not in main.query_one(DecisionQueue).labels
        await app.shutdown()


# -- attention ----------------------------------------------------------------------------------


async def test_a_burst_of_waiting_calls_rings_the_bell_once(deck_app) -> None:
    app = deck_app()
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        main = await started(pilot)
        main.attention = Attention(ConsoleConfig(), clock=Ticking(GAP + 1))  # never within GAP
        for event in waiting(50):
            app.bridge.receive(event)
        await until(pilot, lambda: len(main.state.pending) == 50, "50 calls wait")
        await until(pilot, lambda: main.query_one(StatusBar).calls == 50, "status bar counts")
        await pilot.pause()
        assert rings == [1]
        for event in waiting(50, first=50):  # a later burst rings again
            app.bridge.receive(event)
        await until(pilot, lambda: len(main.state.pending) == 100, "100 calls wait")
        await pilot.pause()
        assert rings == [1, 1]
        await app.shutdown()


async def test_no_bell_with_bell_false(room: Path, deck_app) -> None:
    toml(room, "[console]\nbell = false\n")
    app = deck_app()
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        assert main.attention.bell is False
        await pilot.pause()
        assert rings == []
        await app.shutdown()


async def test_a_waiting_call_rings_by_default(deck_app) -> None:
    app = deck_app()
    rings: list[int] = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        await call_waits(pilot, "run `echo hi`")
        await until(pilot, lambda: rings, "the bell rang")
        assert rings == [1]
        await app.shutdown()


def test_the_desktop_notification_is_picked_by_the_terminal() -> None:
    assert pick_notify("auto", {"TERM_PROGRAM": "iTerm.app"}) == "osc9"
    assert pick_notify("auto", {"TERM_PROGRAM": "WezTerm"}) == "osc9"
    assert pick_notify("auto", {"TERM": "xterm-kitty"}) == "osc9"
    assert pick_notify("auto", {"TERM": "xterm-ghostty", "TERM_PROGRAM": "ghostty"}) == "osc9"
    assert pick_notify("auto", {"TERM": "xterm-256color", "WT_SESSION": "x"}) == "osc9"
    assert pick_notify("auto", {"TERM": "foot"}) == "osc777"
    assert pick_notify("auto", {"TERM": "rxvt-unicode-256color"}) == "osc777"
    assert pick_notify("auto", {"TERM": "xterm-256color", "VTE_VERSION": "7600"}) == "osc777"
    assert pick_notify("auto", {"TERM": "xterm-256color"}) == "off"  # cannot tell
    assert pick_notify("auto", {"TERM_PROGRAM": "iTerm.app", "TMUX": "/tmp/x"}) == "off"
    assert pick_notify("osc777", {"TERM_PROGRAM": "iTerm.app"}) == "osc777"  # as configured
    assert pick_notify("off", {"TERM_PROGRAM": "iTerm.app"}) == "off"


def test_notification_sequences_keep_the_text_from_ending_them() -> None:
    assert sequence("osc9", "agentdeck", "1 call waiting") == "\x1b]9;agentdeck: 1 call waiting\x07"
    assert sequence("osc777", "a;b", "rm\x07 -rf\x1b]") == "\x1b]777;notify;a,b;rm -rf]\x07"
    assert sequence("off", "agentdeck", "x") == ""


def test_attention_writes_through_the_driver_once_per_gap() -> None:
    class Driver:
        def __init__(self) -> None:
            self.written: list[str] = []

        def write(self, data: str) -> None:
            self.written.append(data)

    class App:
        is_headless = False
        _driver = Driver()
        rings = 0

        def bell(self) -> None:
            App.rings += 1

    clock = [0.0]
    attention = Attention(ConsoleConfig(desktop_notify="osc9"), env={}, clock=lambda: clock[0])
    assert attention.calls_waiting(App(), 2, "shell on chat:main and 1 more")
    assert not attention.calls_waiting(App(), 1, "shell on chat:2")  # within GAP
    clock[0] = GAP
    assert attention.calls_waiting(App(), 1, "shell on chat:2")
    assert App.rings == 2
    assert App._driver.written == [
        "\x1b]9;agentdeck: 2 calls waiting: shell on chat:main and 1 more\x07",
        "\x1b]9;agentdeck: 1 call waiting: shell on chat:2\x07"]  # fmt: skip
    quiet = Attention(ConsoleConfig(bell=False, desktop_notify="off"), clock=lambda: 0.0)
    assert quiet.calls_waiting(App(), 1, "x") and App.rings == 2 and len(App._driver.written) == 2


# -- notifications never cover the queue -------------------------------------------------------


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_notifications_do_not_cover_the_queue(deck_app, size) -> None:
    app = deck_app()
    async with app.run_test(size=size, notifications=True) as pilot:
        main = await call_waits(pilot, "run `echo hi`")  # its toast: "1 call waiting"
        app.notify("a long notification that wraps over several lines " * 3, timeout=30)
        for n in range(4):
            app.notify(f"notice {n}", severity="warning", timeout=30)
        await until(pilot, lambda: any(t._notification.message == "notice 3"
                                       for t in app.screen.query(Toast)), "toasts shown")  # fmt: skip
        await pilot.pause()
        queue = main.query_one("#decisions-pane").region
        assert queue.area > 0
        toasts = list(app.screen.query(Toast))
        assert len(toasts) == MAX_TOASTS  # the oldest gave way
        for toast in toasts:
            shown = app.screen.find_widget(toast).visible_region
            assert not shown.overlaps(queue), f"{shown} covers the queue {queue}"
        newest = app.screen.find_widget(toasts[-1]).visible_region
        assert newest.area > 0, "the newest notification is seen"
        await app.shutdown()


# -- snapshots ----------------------------------------------------------------------------------

DEADLINES = '[approvals]\ndeadline = "1h"\n[approvals.tools.shell]\ndeadline = "5m"\n'


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["wide", "narrow"])
def test_deadlines_snapshot(snap_compare, room: Path, size) -> None:
    """Three waiting calls 4m10s after they started waiting: the two shell calls (5m) in
    their last minute, warned, and the write_file call (1h) with 55m50s left; the warning's
    notification at the top right, clear of the queue."""
    toml(room, DEADLINES)
    now = [T0]
    app = make_app(room, clock=lambda: now[0], provider=OfflineModel(delay=0), ids=fixed_ids(),
                   keys_clock=KeysClock())  # fmt: skip
    app.NOTIFICATION_TIMEOUT = PATIENCE  # the warning stays up however slow the snapshot is

    def toasts() -> list[str]:
        return [t._notification.title for t in app.screen.query(Toast)]

    async def run_before(pilot) -> None:
        await queue(pilot)  # (it leaves no toast)
        main = app.main
        now[0] = T0 + 250
        await until(pilot, lambda: len(main.query_one(DecisionQueue)._near) == 2, "warned")
        await until(pilot, toasts, "the warning shown", ok=lambda t: t == ["Decision deadline"])
        await steady(pilot, notifications=True)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
