"""The scheduler view: snapshots idle and busy, and Pilot tests of its keys and refresh."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from textual.notifications import Notify

from console.commands import DeckCommands
from console.groups import group_of, next_filter
from console.screens.help import HelpScreen
from console.screens.main import MainScreen
from console.screens.scheduler import SchedulerScreen
from console.widgets.groups_table import GroupsTable
from console.widgets.keyed_table import KeyedTable
from console.widgets.timeline import Timeline
from engine.lifecycle import TurnStatus
from engine.room import Room
from tests.console.conftest import build
from tests.console.helpers import SIZE, Recorder, palette, send, started, told, until
from tests.console.scheduler_scenes import (
    SCHEDULER_SCENES,
    SlowWhenAsked,
    busy_room,
    message,
    open_scheduler,
)


@pytest.mark.parametrize("scene", list(SCHEDULER_SCENES))
def test_scheduler_snapshot(scene: str, snap_compare, room) -> None:
    run_before, size, kw = SCHEDULER_SCENES[scene]
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)


def test_group_of_follows_the_thread_prefix() -> None:
    assert [group_of(t) for t in ("task:a", "chore:b", "will:agent", "chat:main", "x", "")] == [
        "task", "chore", "will", "chat", "chat", "chat"
    ]  # fmt: skip
    seen, current = [], ""
    for _ in range(5):
        current = next_filter(current)
        seen.append(current)
    assert seen == ["chat", "task", "chore", "will", ""]


def stored_group(room: Path, name: str) -> sqlite3.Row:
    """The group's row as the engine persisted it, read through a connection of our own."""
    with closing(sqlite3.connect(f"file:{Room.at(room).db}?mode=ro", uri=True)) as db:
        db.row_factory = sqlite3.Row
        return db.execute("SELECT * FROM thread_groups WHERE name=?", (name,)).fetchone()


def group_stats(app, name: str):
    return next(g for g in app.host.runtime.statistics().groups if g.name == name)


async def select_group(pilot, screen: SchedulerScreen, name: str) -> GroupsTable:
    table = screen.query_one(GroupsTable)
    table.focus()
    for _ in range(table.row_count):
        if table.current_key() == name:
            return table
        await pilot.press("j")
    raise AssertionError(f"no group {name} in the table")


@pytest.mark.anyio
async def test_p_pauses_and_resumes_the_selected_group(deck_app, room) -> None:
    rec = Recorder(SchedulerScreen.Configured, Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await started(pilot)
        screen = await open_scheduler(pilot)
        await select_group(pilot, screen, "task")
        await pilot.press("p")
        await until(pilot, lambda: group_stats(app, "task").paused, "task paused")
        assert stored_group(room, "task")["paused"] == 1
        assert not group_stats(app, "chat").paused  # only the selected group
        await until(pilot, lambda: rec.of(SchedulerScreen.Configured), "configured")
        assert rec.of(SchedulerScreen.Configured)[0].group.paused
        assert any("task paused" in n for n in told(rec))
        table = screen.query_one(GroupsTable)
        assert "‖ paused" in str(table.get_cell("task", "state"))
        await pilot.press("p")
        await until(pilot, lambda: not group_stats(app, "task").paused, "task resumed")
        assert stored_group(room, "task")["paused"] == 0
        await until(pilot, lambda: "● active" in str(table.get_cell("task", "state")), "redrawn")
        await app.shutdown()


@pytest.mark.anyio
async def test_plus_and_minus_change_the_budget_never_below_zero(deck_app, room) -> None:
    rec = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await started(pilot)
        screen = await open_scheduler(pilot)
        await select_group(pilot, screen, "chat")
        await pilot.press("plus", "plus")
        await until(pilot, lambda: group_stats(app, "chat").max_running_turns == 6, "chat 4 → 6")
        assert stored_group(room, "chat")["max_running_turns"] == 6
        await pilot.press("minus")
        await until(pilot, lambda: group_stats(app, "chat").max_running_turns == 5, "chat 6 → 5")
        table = await select_group(pilot, screen, "chore")
        await pilot.press("minus")
        await until(pilot, lambda: group_stats(app, "chore").max_running_turns == 0, "chore 1 → 0")
        await pilot.press("minus")
        await until(pilot, lambda: any("already 0" in n for n in told(rec)),
                    "a warning that the budget is 0")  # fmt: skip
        assert group_stats(app, "chore").max_running_turns == 0
        assert stored_group(room, "chore")["max_running_turns"] == 0
        await until(pilot, lambda: str(table.get_cell("chore", "running")) == "0/0", "redrawn")
        await app.shutdown()


@pytest.mark.anyio
async def test_a_paused_group_queues_with_its_reason_until_resumed(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        screen = await open_scheduler(pilot)
        await select_group(pilot, screen, "chat")
        await pilot.press("p")
        await until(pilot, lambda: group_stats(app, "chat").paused, "chat paused")
        turn = (await app.bridge.send("chat:main", "calc 2+2")).turn_id
        queued = screen.query_one("#sched-queued", KeyedTable)
        await until(pilot, lambda: turn in queued.rows, "the request is listed")
        assert str(queued.get_cell(turn, "waits because")) == "group chat paused"
        await pilot.press("p")
        await until(pilot, lambda: turn not in queued.rows, "the request left the queue")
        await until(pilot, lambda: main.state.turns.get(turn) and main.state.counts() == (0, 0),
                    "the turn ran")  # fmt: skip
        await app.shutdown()


@pytest.mark.anyio
async def test_esc_and_q_close_and_polling_stops(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        calls = []
        real = app.bridge.statistics

        async def counted():
            calls.append(1)
            return await real()

        app.bridge.statistics = counted
        for key in ("escape", "q"):
            screen = await open_scheduler(pilot)
            await until(pilot, lambda s=screen: s.snapshots >= 3, "the timer refreshes")
            await pilot.press(key)
            await until(pilot, lambda: app.screen is main, f"closed by {key}")
            assert app.is_running
            after = len(calls)
            await pilot.pause(0.6)  # silence: over two refresh intervals, and no poll comes
            assert len(calls) == after, "the scheduler is still polled after closing"
        await app.shutdown()


@pytest.mark.anyio
async def test_refresh_follows_the_runtime_not_its_events(deck_app) -> None:
    app = deck_app(provider=SlowWhenAsked())
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        screen = await open_scheduler(pilot)
        threads = screen.query_one("#sched-threads", KeyedTable)
        assert threads.row_count == 0
        await app.host.runtime.submit(message("task:release", "summarise (slow)"))
        await until(pilot, lambda: "task:release" in threads.rows, "a running thread is listed")
        assert "▶ running" in str(threads.get_cell("task:release", "state"))
        # Many events, few snapshots: statistics() is read by the timer, not per event.
        before = screen.snapshots
        for i in range(20):
            await app.bridge.send(f"chat:{i}", "calc 1+1")

        def chats_done() -> int:  # (counts() is (1, 0) before the chat turns start, too)
            return sum(t.thread_id.startswith("chat:") and t.status == TurnStatus.DONE
                       for t in main.state.turns.values())  # fmt: skip

        await until(pilot, lambda: chats_done() == 20, "chat turns done")
        assert main.state.counts() == (1, 0)
        assert main.bridge.state.events_folded > 100
        assert screen.snapshots - before < 20
        await app.shutdown()


@pytest.mark.anyio
async def test_keys_reach_help_and_palette(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        titles = await palette(DeckCommands(main))
        assert "Scheduler" in titles and "Group filter" in titles
        assert "Filter timeline by group: task" in titles
        assert "Filter timeline by group: all" in titles
        screen = await open_scheduler(pilot)
        titles = await palette(DeckCommands(screen))
        for wanted in ("Scheduler: Pause/resume group", "Scheduler: Raise budget",
                       "Scheduler: Lower budget", "Close scheduler"):  # fmt: skip
            assert wanted in titles
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        rows = app.screen.rows
        for row in (("s", "Scheduler"), ("^g", "Group filter"), ("", "Scheduler"),
                    ("p", "Pause/resume group"), ("+ / =", "Raise budget"),
                    ("-", "Lower budget"), ("esc / q", "Close")):  # fmt: skip
            assert row in rows
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "back to the scheduler")
        await app.shutdown()


@pytest.mark.anyio
async def test_group_filter_cycles_the_timeline(deck_app) -> None:
    rec = Recorder(MainScreen.Acted)
    app = deck_app(provider=SlowWhenAsked())
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await started(pilot)
        await send(pilot, "calc 2+2")
        await app.host.runtime.submit(message("task:release", "summarise (slow)"))
        timeline = main.query_one(Timeline)
        await until(pilot, lambda: {r.thread_id for r in timeline.rows} == {"chat:main",
                    "task:release"}, "steps of both threads")  # fmt: skip
        timeline.focus()
        pane = main.query_one("#timeline-pane")
        shown = {}
        for _ in range(5):
            await pilot.press("ctrl+g")
            await pilot.pause()
            shown[timeline.group] = ({r.thread_id for r in timeline.rows}, pane.border_title)
        assert shown["chat"] == ({"chat:main"}, "Timeline · chat")
        assert shown["task"] == ({"task:release"}, "Timeline · task")
        assert shown["chore"] == (set(), "Timeline · chore")
        assert shown[""] == ({"chat:main", "task:release"}, "Timeline · all groups")
        # The group filter and the text filter combine.
        main.filters.group("task")
        timeline.filter_text = "chat"
        assert not timeline.rows
        timeline.filter_text = ""
        assert {r.thread_id for r in timeline.rows} == {"task:release"}
        assert [m.target for m in rec.of(MainScreen.Acted) if m.action == "filter_group"][:2] == [
            "chat", "task"
        ]  # fmt: skip
        await app.shutdown()


@pytest.mark.anyio
async def test_busy_room_reasons(deck_app) -> None:
    app = deck_app(provider=SlowWhenAsked())
    async with app.run_test(size=SIZE) as pilot:
        await busy_room(pilot)
        screen = await open_scheduler(pilot)
        queued = screen.query_one("#sched-queued", KeyedTable)
        reasons = {k.value: str(queued.get_cell(k.value, "waits because")) for k in queued.rows}
        assert reasons == {
            "t_003": "thread waiting on a decision (turn t_002)",
            "t_004": "thread busy with turn t_001",
            "t_007": "group chore budget full (0 of 0 running)",
            "t_008": "group will paused",
        }
        threads = screen.query_one("#sched-threads", KeyedTable)
        states = {k.value: str(threads.get_cell(k.value, "state")) for k in threads.rows}
        assert states["chat:ops"] == "⏸ waiting" and states["task:release"] == "▶ running"
        assert states["will:agent"] == "○ idle"
        await app.shutdown()


@pytest.mark.anyio
async def test_theme_change_recolours_state_cells(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        screen = await open_scheduler(pilot)
        table = screen.query_one(GroupsTable)
        dark = table.get_cell("chat", "state").style
        app.theme = "agentdeck-light"
        await until(pilot, lambda: table.get_cell("chat", "state").style != dark, "recoloured")
        assert table.get_cell("chat", "state").style.color.name == "#2e7d32"  # state-succeeded
        await app.shutdown()
