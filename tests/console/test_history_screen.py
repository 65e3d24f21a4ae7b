"""The history screen on a room seeded by the real engine: snapshots, and Pilot tests of its
keys (paging, filters, search, a turn's calls and decisions, where it suspended, export),
and browsing while a second process owns the room and writes to it."""

from __future__ import annotations

import asyncio
import inspect
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from textual.app import App
from textual.notifications import Notify
from textual.widgets import Input

import console.history.reader as history_reader
import themes
from console import settings
from console.commands import DeckCommands
from console.history.view import MATCH, Criteria, next_value, parse_range, snippet_cells
from console.screens.call_detail import CallDetailScreen
from console.screens.help import HelpScreen
from console.screens.history import HistoryScreen
from console.screens.prompt import PromptScreen
from console.widgets.calls_table import CallsTable
from console.widgets.history_list import HistoryList
from console.widgets.history_notes import HistoryNotes
from console.widgets.timeline import Timeline
from console.widgets.turn_detail import TurnDetail
from engine.api.history import HistoryError
from engine.room import Room
from tests.console.conftest import T0, build
from tests.console.helpers import SIZE, Recorder, palette, told, until
from tests.console.history_scenes import (
    HISTORY_PREPARE,
    HISTORY_SCENES,
    listed,
    open_history,
    pick,
    seed_room,
    settled,
    shown_turn,
)
from tests.history_seed import STATUS_TRUTH, truth, turn_ids

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One seeded room per module; each test works on a copy (the app writes to it)."""
    path = tmp_path_factory.mktemp("seeded") / "room"
    seed_room(path)
    return path


@pytest.fixture
def seeded(room: Path, template: Path) -> Path:
    shutil.copytree(template, room)
    return room


def notes_text(screen: HistoryScreen) -> str:
    pane = screen.query_one("#hist-turn", HistoryNotes)
    return "\n".join("".join(text for text, _ in line) for line in pane.lines)


# -- snapshots ---------------------------------------------------------------------------------


@pytest.mark.parametrize("scene", list(HISTORY_SCENES))
def test_history_snapshot(scene: str, snap_compare, room: Path, template: Path) -> None:
    run_before, size, kw = HISTORY_SCENES[scene]
    if scene in HISTORY_PREPARE:
        shutil.copytree(template, room)  # what HISTORY_PREPARE makes, without seeding again
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)


# -- opening, keys, palette, help --------------------------------------------------------------


@pytest.mark.anyio
async def test_h_and_the_palette_open_it_esc_and_q_close_it(seeded: Path) -> None:
    app = build(seeded)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_history(pilot)
        assert listed(screen)[:3] == turn_ids(Room.at(seeded).db)[:3]
        assert screen.query_one("#hist-turns-pane").border_title == "Turns (30)"
        await pilot.press("escape")  # nothing to clear: back to the main screen
        await until(pilot, lambda: app.screen is app.main, "closed by Esc")
        titles = await palette(DeckCommands(app.main))
        assert "History" in titles
        if inspect.isawaitable(opened := titles["History"]()):  # as the palette runs it
            await opened
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen), "opened by palette")
        await settled(pilot, app.screen)
        offered = await palette(DeckCommands(app.screen))
        for wanted in ("History: Search", "History: Status", "History: Where suspended",
                       "History: Export", "Close history"):  # fmt: skip
            assert wanted in offered
        await pilot.press("q")
        await until(pilot, lambda: app.screen is app.main, "closed by q")
        assert app.is_running
        await app.shutdown()


@pytest.mark.anyio
async def test_keys_show_in_the_footer_and_the_help_screen(seeded: Path) -> None:
    app = build(seeded)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_history(pilot)
        shown = {b.key for b in (a.binding for a in screen.active_bindings.values())
                 if b.show}  # fmt: skip
        for key in ("slash", "s", "o", "ctrl+g", "t", "T", "r", "n", "w", "ctrl+e", "escape"):
            assert key in shown, key
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        rows = app.screen.rows
        for row in (("", "History"), ("/", "Search"), ("s", "Status"), ("^g", "Group"),
                    ("w", "Where suspended"), ("^e", "Export"), ("n", "Next page"),
                    ("esc", "Clear/back"), ("q", "Close")):  # fmt: skip
            assert row in rows, row
        assert ("h", "History") in rows  # on the main screen
        await pilot.press("escape")
        await app.shutdown()


# -- paging ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_pages_by_cursor_with_n_and_as_the_cursor_nears_the_end(seeded, monkeypatch):
    monkeypatch.setattr(history_reader, "PAGE", 7)
    rec = Recorder(HistoryScreen.Listed, Notify)
    app = build(seeded)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        everything = turn_ids(Room.at(seeded).db)
        assert listed(screen) == everything[:7]
        await pilot.press("n")
        await until(pilot, lambda: len(listed(screen)) == 14, "second page")
        assert listed(screen) == everything[:14]
        view = screen.query_one("#hist-turns", HistoryList)
        for _ in range(10):  # scrolling to the end asks for the next page by itself
            if len(listed(screen)) == len(everything):
                break
            await pilot.press("end")
            await settled(pilot, screen)
        assert listed(screen) == everything  # in order, none twice, none skipped
        assert not view.more
        turns = [m for m in rec.of(HistoryScreen.Listed) if m.what == "turns"]
        assert [m.rows for m in turns][:2] == [7, 14] and turns[-1].more is False
        await pilot.press("n")
        await until(pilot, lambda: any("No more turns" in n for n in told(rec)), "said so")
        assert not told(rec, "error")
        await app.shutdown()


@pytest.mark.anyio
async def test_a_fast_cursor_shows_the_turn_it_stops_on(seeded: Path) -> None:
    """Each move cancels the read of the turn the cursor left (the engine leaves no read
    transaction open when it does): the turn it stops on is the one read to the end and
    shown, and the connection goes on reading."""
    rec = Recorder(Notify)
    app = build(seeded)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        history = screen.reader.history
        assert history is not None
        reads, cancelled = [], []
        real = history.turn

        async def turn(turn_id: str):
            reads.append(turn_id)
            try:
                return await real(turn_id)
            except BaseException:
                cancelled.append(len(reads) - 1)
                raise

        history.turn = turn  # type: ignore[method-assign]
        view = screen.query_one("#hist-turns", HistoryList)
        for delta in [1] * 25 + [-1] * 5:  # faster than a turn is read
            view.action_cursor(delta)
            for _ in range(3):
                await asyncio.sleep(0)
        await settled(pilot, screen)
        assert view.cursor == 20
        assert shown_turn(screen) == view.current_key() == reads[-1]
        assert cancelled and len(reads) - 1 not in cancelled and not told(rec, "error")
        await pilot.press("j")  # the connection still reads turns
        await until(pilot, lambda: shown_turn(screen) == listed(screen)[21], "next turn shown")
        await app.shutdown()


# -- filters -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_status_keys_cycle_the_status_filter_and_esc_clears(seeded: Path) -> None:
    rec = Recorder(Notify)
    app = build(seeded)
    db = Room.at(seeded).db
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        seen = {}
        for status in ("failed", "denied", "cancelled", "waiting", "running", "done"):
            await pilot.press("s")
            await until(pilot, lambda s=status: screen.criteria.filters.status == s, status)
            await settled(pilot, screen)
            seen[status] = listed(screen)
            assert seen[status] == turn_ids(db, STATUS_TRUTH[status]), status
        assert [seen[s] for s in ("failed", "denied", "cancelled", "waiting")] == [
            ["t4"], ["t6"], ["t12"], ["t10"]]  # fmt: skip
        assert screen.query_one("#hist-turns-pane").border_title == "Turns (29) · status"
        await pilot.press("s")  # after the last status: no status filter
        await until(pilot, lambda: screen.criteria.filters.status is None, "cycled to all")
        await pilot.press("s", "escape")
        await until(pilot, lambda: screen.criteria == Criteria(), "Esc cleared")
        await settled(pilot, screen)
        assert listed(screen) == turn_ids(db)
        assert isinstance(app.screen, HistoryScreen)  # Esc cleared; it did not close
        assert not told(rec, "error")
        await app.shutdown()


@pytest.mark.anyio
async def test_origin_group_tool_thread_and_run_filters(seeded: Path) -> None:
    rec = Recorder(Notify)
    app = build(seeded)
    db = Room.at(seeded).db
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)

        async def press(*keys: str) -> list[str]:
            await pilot.press(*keys)
            await pilot.pause()
            await settled(pilot, screen)
            return listed(screen)

        assert await press("o") == turn_ids(db, "t.origin = 'chat'")  # chat, chore, invoke…
        assert await press("o", "o") == turn_ids(db, "t.origin = 'invoke'")
        assert await press("escape", "ctrl+g", "ctrl+g") == ["t10"]  # chat, then chore
        threads = screen.query_one("#hist-threads", HistoryList)
        assert [k for k, _ in threads.rows] == ["chore-x"]  # the threads of the group
        assert await press("escape", "T", "T") == ["t4"]  # add, then boom
        assert await press("T") == turn_ids(db, "EXISTS (SELECT 1 FROM tool_calls c"
                                                " WHERE c.turn_id = t.id AND c.tool = 'shell')")  # fmt: skip
        assert await press("s", "s") == ["t6"]  # shell and denied: both hold
        await press("escape")
        await pick(pilot, screen, "t8")
        assert await press("t") == ["t8"]  # the selected turn's thread
        assert screen.criteria.filters.thread == "chat-b"
        assert len(await press("t")) == 30  # again: every thread
        threads.focus()
        assert threads.select("chat-a")
        assert await press("enter") == ["t6", "t2"]
        runs = screen.query_one("#hist-runs", HistoryList)
        runs.focus()
        assert [k for k, _ in runs.rows] == ["r_001", "r1"]  # the console's run, the seed's
        assert await press("escape", "enter") == []  # r_001 ran no turn
        assert "no turns" in str(screen.query_one("#hist-turns").render_line(0).text)
        assert runs.select("r1")
        assert len(await press("enter")) == 30
        assert not told(rec, "error")
        await app.shutdown()


@pytest.mark.anyio
async def test_time_range_from_the_prompt(seeded: Path) -> None:
    rec = Recorder(Notify)
    app = build(seeded)
    db = Room.at(seeded).db
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "prompt")
        await pilot.press(*"2023-11-14T22:13:21 2023-11-14T22:13:22", "enter")
        await until(pilot, lambda: screen.criteria.filters.since is not None, "range set")
        await settled(pilot, screen)
        since, until_ = screen.criteria.filters.since, screen.criteria.filters.until
        assert (since, until_) == (1_700_000_001.0, 1_700_000_002.0)
        expected = turn_ids(db, "t.created_at >= ? AND t.created_at < ?", since, until_)
        assert listed(screen) == expected and expected
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "prompt again")
        await pilot.press(*"3d 5d", "enter")  # since after until: said, not applied
        await until(pilot, lambda: told(rec, "error"), "an error notice")
        assert "the time range is empty" in told(rec, "error")[0]
        assert screen.criteria.filters.since == since
        await app.shutdown()


def test_the_pure_helpers() -> None:
    assert next_value(("a", "b"), None) == "a"
    assert next_value(("a", "b"), "a") == "b"
    assert next_value(("a", "b"), "b") is None
    assert next_value((), None) is None
    assert parse_range("", T0) == (None, None)
    assert parse_range("2h", T0) == (T0 - 7200, None)
    assert parse_range("3d..1d", T0) == (T0 - 3 * 86400, T0 - 86400)
    with pytest.raises(HistoryError, match="empty"):
        parse_range("1d 3d", T0)
    with pytest.raises(HistoryError, match="bad time"):
        parse_range("yesterday", T0)
    assert snippet_cells("a [b] c [d]") == (("a ", ""), ("[b]", MATCH), (" c ", ""),
                                            ("[d]", MATCH))  # fmt: skip


# -- search ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_search_lists_hits_with_the_matching_text(seeded: Path) -> None:
    rec = Recorder(HistoryScreen.Listed, Notify)
    app = build(seeded)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        await pilot.press("slash", *"zebrafish", "enter")
        await until(pilot, lambda: screen.criteria.search == "zebrafish", "searched")
        await settled(pilot, screen)
        view = screen.query_one("#hist-turns", HistoryList)
        assert [k for k, _ in view.rows] == ["message:23", "message:22"]
        for _, cells in view.rows:
            assert ("[zebrafish]", MATCH) in cells
        assert shown_turn(screen) == "t14"
        assert view.has_focus
        assert screen.query_one("#hist-turns-pane").border_title == "Search “zebrafish” (2 hits)"
        assert [m.rows for m in rec.of(HistoryScreen.Listed) if m.what == "hits"] == [2]
        # A hit in a call's arguments selects that call in the calls table.
        await pilot.press("slash", "ctrl+u", *"ls", "enter")
        await until(pilot, lambda: len(listed(screen)) == 3, "three hits for ls")
        assert listed(screen) == ["message:16", "call:c9", "message:13"]
        await pilot.press("j")
        await until(pilot, lambda: screen.query_one(CallsTable).current_key() == "c9", "c9")
        # A search and a filter combine; Esc clears both.
        await pilot.press("s")  # failed: no failed turn mentions ls
        await settled(pilot, screen)
        assert listed(screen) == []
        await pilot.press("escape")
        await until(pilot, lambda: screen.criteria == Criteria(), "cleared")
        await settled(pilot, screen)
        assert len(listed(screen)) == 30
        assert not screen.query_one("#hist-search").has_class("-shown")
        await pilot.press("slash", *"zebrafish", "enter")
        await until(pilot, lambda: len(listed(screen)) == 2, "searched again")
        await pilot.press("slash", "ctrl+u", *"!!!", "enter")  # nothing to search for: said so
        await until(pilot, lambda: told(rec, "error"), "an error notice")
        assert "nothing to search for" in told(rec, "error")[0]
        assert screen.criteria.search == "zebrafish"  # and the last search's hits stay, named
        assert screen.query_one("#hist-turns-pane").border_title == "Search “zebrafish” (2 hits)"
        assert screen.query_one("#hist-search", Input).value == "!!!"  # to change
        await app.shutdown()


# -- one turn ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_turn_detail_shows_steps_calls_and_decisions(seeded: Path) -> None:
    app = build(seeded)
    db = Room.at(seeded).db
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_history(pilot)
        await pick(pilot, screen, "t8")
        steps = screen.query_one("#hist-steps", Timeline)
        assert [r.step_id for r in steps.rows] == [r[0] for r in truth(
            db, "SELECT id FROM steps WHERE turn_id = 't8' ORDER BY idx, id")]  # fmt: skip
        calls = screen.query_one("#hist-calls", CallsTable)
        assert calls.turn_id == "t8" and calls.current_key() == "c9"
        assert [c.status for c in screen.query_one(TurnDetail).calls] == ["succeeded"]
        text = notes_text(screen)
        for part in ("✔ approved shell call c9 with edited args {\"command\": \"ls -la\"}",
                     "by alice at 11-14 22:13:21", "d2 applied",
                     "then ✔ succeeded args {\"command\": \"ls -la\"} → ran ls -la",
                     "Where it suspended (1)", "shell needs approval · settled by d2",
                     "you", "shell ls", "Answer  shell: ran ls -la"):  # fmt: skip
            assert part in text, part
        assert screen.query_one("#hist-turn-pane").border_title == "Turn t8 · chat-b · ✔ done"
        await pick(pilot, screen, "t6")
        text = notes_text(screen)
        assert "⊘ denied shell call c7 — not on prod" in text
        assert "by bob at" in text and "then ⊘ cancelled" in text
        await pick(pilot, screen, "t2")
        assert "Decisions (0)" in notes_text(screen) and "Where it suspended" not in notes_text(
            screen)  # fmt: skip
        calls.focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, CallDetailScreen), "call detail")
        assert app.screen.call.tool == "add"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "back")
        await app.shutdown()


@pytest.mark.anyio
async def test_w_jumps_to_where_the_turn_suspended(seeded: Path) -> None:
    rec = Recorder(HistoryScreen.Jumped, Notify)
    app = build(seeded)
    db = Room.at(seeded).db
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        await pick(pilot, screen, "t10")  # waiting on a decision
        [(call_id, step_id)] = truth(db, "SELECT id, step_id FROM tool_calls WHERE turn_id='t10'")
        await pilot.press("w")
        await until(pilot, lambda: rec.of(HistoryScreen.Jumped), "jumped")
        jumped = rec.of(HistoryScreen.Jumped)[0]
        assert (jumped.turn_id, jumped.step_id, jumped.call_id) == ("t10", step_id, call_id)
        assert screen.query_one("#hist-steps", Timeline).cursor_row.step_id == step_id
        calls = screen.query_one("#hist-calls", CallsTable)
        assert calls.current_key() == call_id and calls.has_focus
        assert any(f"call {call_id} (shell)" in n and "still waiting" in n for n in told(rec))
        # A turn that never suspended: said so, nothing moves.
        screen.query_one("#hist-turns").focus()
        await pick(pilot, screen, "t2")
        await pilot.press("w")
        await until(pilot, lambda: any("never suspended" in n for n in told(rec)), "warned")
        assert len(rec.of(HistoryScreen.Jumped)) == 1
        await app.shutdown()


@pytest.mark.anyio
async def test_export_writes_the_turn_in_the_room_and_says_where(seeded: Path) -> None:
    rec = Recorder(HistoryScreen.Exported, Notify)
    app = build(seeded)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_history(pilot)
        await pick(pilot, screen, "t8")
        await pilot.press("ctrl+e")
        await until(pilot, lambda: rec.of(HistoryScreen.Exported), "exported")
        path = rec.of(HistoryScreen.Exported)[0].path
        assert path == seeded / "exports" / "turn-t8.json"
        doc = json.loads(path.read_text())
        assert doc["format"] == "agentdeck.turn/1" and doc["turn"]["turn_id"] == "t8"
        assert [d["decided_by"] for d in doc["decisions"]] == ["alice"]
        assert any(str(path) in n for n in told(rec))
        await app.shutdown()


# -- a second process owns the room ------------------------------------------------------------


@pytest.mark.anyio
async def test_browsing_while_another_process_writes(seeded: Path, tmp_path: Path) -> None:
    log = tmp_path / "writer.log"
    with log.open("w") as err, subprocess.Popen(
        [sys.executable, "-m", "tests.console.history_writer", str(seeded), "100000"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True,
    ) as writer:  # fmt: skip
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline().strip() == "ready", log.read_text()
            await browse_while_written(seeded, writer)
        finally:
            writer.kill()
            writer.wait()


class HistoryOnly(App[None]):
    """Only the history screen, over a room another process owns and writes."""

    CSS_PATH = str(Path(themes.__file__).with_name("app.tcss"))

    def __init__(self, room: Path) -> None:
        super().__init__()
        self.room = Room.at(room)
        settings.use_themes(self)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return settings.state_variables(self)

    def on_mount(self) -> None:
        self.push_screen(HistoryScreen(self.room, clock=lambda: T0, page_size=5))


async def browse_while_written(room: Path, writer: subprocess.Popen) -> None:
    rec = Recorder(Notify)
    app = HistoryOnly(room)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        await settled(pilot, screen)
        first = screen.totals["turns"]
        for round_ in range(6):
            await pilot.press("ctrl+r")  # read again: the room grew meanwhile
            await settled(pilot, screen)
            await pilot.press("n", "n")
            await settled(pilot, screen)
            keys = listed(screen)
            assert len(keys) == len(set(keys)) and len(keys) >= 10, round_
            await pilot.press("slash", "ctrl+u", *"writer", "enter")
            await until(pilot, lambda: screen.criteria.search == "writer", "searched")
            await settled(pilot, screen)
            await pilot.press("n")
            await settled(pilot, screen)
            assert listed(screen), "the writer's turns are found"
            await pilot.press("escape")
            await settled(pilot, screen)
            await pilot.pause(0.05)  # load: the browsing's pace, the writer writes meanwhile

        async def read_again() -> int:
            await pilot.press("ctrl+r")
            await settled(pilot, screen)
            return screen.totals["turns"]

        await until(pilot, read_again, "the writer wrote while we browsed", ok=lambda n: n > first)
        assert writer.poll() is None, "the writer still owns the room"
        assert not told(rec, "error")
