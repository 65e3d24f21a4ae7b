"""The diff view (issue 37): opened from the history (`m` marks a turn, `d` on another diffs
the two) and from the palette (two ids asked for); both sides' headers, the rows marked and
moved through together, a row's two sides whole, and snapshots of both."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest
from textual.notifications import Notify

from console.commands import DeckCommands
from console.screens.diff import DiffScreen
from console.screens.diff_row import DiffRowScreen
from console.screens.history import HistoryScreen
from console.screens.prompt import PromptScreen
from console.widgets.diff_view import DiffView
from tests.console.conftest import build
from tests.console.diff_scenes import DIFF_SCENES, A, B, diff_room, open_diff
from tests.console.helpers import SIZE, Recorder, palette, told, until
from tests.console.history_scenes import open_history, pick


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One room per module (see tests/console/diff_scenes.py); each test works on a copy."""
    path = tmp_path_factory.mktemp("diffed") / "room"
    diff_room(path)
    return path


@pytest.fixture
def diffed(room: Path, template: Path) -> Path:
    shutil.copytree(template, room)
    return room


def marks(screen: DiffScreen) -> list[str]:
    return [row.symbol for row in screen.query_one(DiffView).rows]


@pytest.mark.parametrize("scene", list(DIFF_SCENES))
def test_diff_snapshot(scene: str, snap_compare, diffed: Path) -> None:
    run_before, size, kw = DIFF_SCENES[scene]
    assert snap_compare(build(diffed, **kw), terminal_size=size, run_before=run_before)


@pytest.mark.anyio
async def test_m_then_d_in_the_history_opens_the_diff_and_keys_move_both_sides(
    diffed: Path,
) -> None:
    rec = Recorder(DiffScreen.Shown, Notify)
    app = build(diffed)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await open_diff(pilot)
        assert (screen.turn_a, screen.turn_b) == (A, B)
        [shown] = rec.of(DiffScreen.Shown)
        assert shown.diff is screen.diff  # type: ignore[attr-defined]
        assert marks(screen) == ["=", "=", "~", ">", "=", "~", "~"]
        assert screen.query_one("#diff-a-pane").border_title == f"A · {A}"
        assert screen.query_one("#diff-b-pane").border_title == f"B · {B}"
        title = screen.query_one("#diff-rows-pane").border_title
        assert title == "Rows · 3 same · 3 changed · 0 only in A · 1 only in B"
        view = screen.query_one(DiffView)
        assert view.has_focus and view.cursor == 0
        await pilot.press("j", "down")
        assert view.cursor == 2 and view.current is not None and view.current.mark == "changed"
        subtitle = screen.query_one("#diff-rows-pane").border_subtitle
        assert "changed: args (b: 3 -> 4), result" in str(subtitle)
        await pilot.press("k")
        assert view.cursor == 1
        await pilot.press("n", "n", "n")  # the differences only: rows 2, 3, 5
        assert view.cursor == 5
        await pilot.press("p")
        assert view.cursor == 3
        await pilot.press("enter")  # both sides of the extra call, whole
        await until(pilot, lambda: isinstance(app.screen, DiffRowScreen), "the row opens")
        row = app.screen
        assert isinstance(row, DiffRowScreen) and row.row.mark == "only_b"
        texts = [str(s.render()) for s in row.query("#diff-row-sides Static")]
        assert texts[0] == "(nothing on this side)"
        assert '"a": 1' in texts[1] and "result:\n2" in texts[1]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "the row closes")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen), "back to the history")
        await app.shutdown()


@pytest.mark.anyio
async def test_d_without_a_mark_warns_and_m_again_unmarks(diffed: Path) -> None:
    rec = Recorder(Notify)
    app = build(diffed)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        history = await open_history(pilot)
        await pick(pilot, history, A)
        await pilot.press("d")
        await pilot.press("m", "d")  # the marked turn itself: another one is needed
        await pilot.press("m")  # unmarked
        await pick(pilot, history, B)
        await pilot.press("d")
        await until(pilot, lambda: len(told(rec)) == 5, "five notices")
        warned = told(rec, "warning")
        assert len(warned) == 3 and all("Mark a turn with m" in w for w in warned)
        assert told(rec, "information") == [f"Turn {A} marked: d on another turn diffs the two.",
                                            f"Turn {A} unmarked."]  # fmt: skip
        assert app.screen is history
        offered = await palette(DeckCommands(history))
        assert "History: Mark for diff" in offered and "History: Diff with marked" in offered
        await app.shutdown()


@pytest.mark.anyio
async def test_the_palette_asks_for_two_ids_and_an_unknown_one_is_said(diffed: Path) -> None:
    rec = Recorder(Notify)
    app = build(diffed)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await open_history(pilot)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, "back to the main screen")
        titles = await palette(DeckCommands(app.main))
        for ids in (f"{A}", f"{B} t404", f"{B} {A}"):
            if inspect.isawaitable(opened := titles["Diff two turns…"]()):
                await opened
            await until(pilot, lambda: isinstance(app.screen, PromptScreen), "asked")
            await pilot.press(*ids, "enter")
            if ids == A:  # one id: said, nothing opened
                await until(pilot, lambda: told(rec, "warning"), "a warning")
                assert app.screen is app.main
                continue
            await until(pilot, lambda: isinstance(app.screen, DiffScreen), "the diff opens")
            screen = app.screen
            assert isinstance(screen, DiffScreen)
            if ids.endswith("t404"):
                await until(pilot, lambda: told(rec, "error"), "the unknown turn is said")
                assert "no turn t404" in told(rec, "error")[0]
                assert "no turn t404" in screen.query_one(DiffView).empty
                assert screen.diff is None
            else:
                await until(pilot, lambda s=screen: s.diff is not None, "read")
                assert marks(screen) == ["=", "=", "~", "<", "=", "~", "~"]  # B, then A
            await pilot.press("q")
            await until(pilot, lambda: app.screen is app.main, "closed")
        await app.shutdown()
