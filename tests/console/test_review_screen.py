"""The review screen (console/screens/review.py) on rooms a crash left with a call under
review: its three answers and the kill of a surviving process group, by keyboard; the
decision queue's row of such a call; the one notification at start; a snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.notifications import Notify
from textual.widgets import Button, Input

from console.commands import DeckCommands
from console.screens.confirm import ConfirmScreen
from console.screens.prompt import PromptScreen
from console.screens.review import ReviewScreen
from console.widgets.decision_queue import DecisionQueue
from engine.lifecycle import CallStatus
from engine.tools import orphans
from tests.console.conftest import build
from tests.console.helpers import SIZE, Recorder, palette, told, until
from tests.console.review_scenes import ASK, prepare_review, review, under_review
from tests.test_review import crashed_shell

pytestmark = pytest.mark.anyio
TEXT = "release notes for v2"


@pytest.fixture
def crashed(room: Path) -> Path:
    prepare_review(room)
    return room


async def review_screen(pilot) -> ReviewScreen:  # type: ignore[no-untyped-def]
    await under_review(pilot)
    await pilot.press("escape", "exclamation_mark")
    await until(pilot, lambda: isinstance(pilot.app.screen, ReviewScreen), "review screen")
    screen = pilot.app.screen
    await until(pilot, lambda: screen.reviews, "the call under review is listed")
    return screen  # type: ignore[return-value]


def the_call(app):  # type: ignore[no-untyped-def]
    [call] = app.main.state.calls.values()
    return call


async def answer(pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    await until(pilot, lambda: isinstance(pilot.app.screen, PromptScreen), "the prompt")
    pilot.app.screen.query_one(Input).value = text
    await pilot.press("enter")


async def test_mark_succeeded_with_a_typed_result(crashed: Path) -> None:
    app = build(crashed)
    async with app.run_test(size=SIZE) as pilot:
        screen = await review_screen(pilot)
        [r] = screen.reviews.values()
        assert (r.tool, r.args) == ("write_file", {"path": "NOTES.md", "text": TEXT})
        [f] = r.files  # half of it was written before the crash
        assert (f.path, f.exists, f.size, f.matches) == ("NOTES.md", True, len(TEXT) // 2, False)
        await pilot.press("s")
        await answer(pilot, "written by hand")
        await until(pilot, lambda: the_call(app).status == CallStatus.SUCCEEDED, "succeeded")
        assert the_call(app).result == "written by hand"
        await until(pilot, lambda: app.main.state.counts() == (0, 0), "the turn finished")
        await until(pilot, lambda: not screen.reviews, "the list is empty")
        assert (crashed / "workspace" / "NOTES.md").read_text() == TEXT[: len(TEXT) // 2]
        await app.shutdown()


async def test_mark_failed_with_a_reason(crashed: Path) -> None:
    app = build(crashed)
    async with app.run_test(size=SIZE) as pilot:
        await review_screen(pilot)
        await pilot.press("f")
        await answer(pilot, "disk was full")
        await until(pilot, lambda: the_call(app).status == CallStatus.FAILED, "failed")
        assert "marked it failed: disk was full" in (the_call(app).error or "")
        await until(pilot, lambda: app.main.state.counts() == (0, 0), "the turn finished")
        await app.shutdown()


async def test_run_again_asks_naming_the_risk_and_no_is_the_default(crashed: Path) -> None:
    app = build(crashed)
    async with app.run_test(size=SIZE) as pilot:
        screen = await review_screen(pilot)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        question = str(app.screen.query_one("#question").render())
        assert "may have run already" in question and "twice" in question
        assert app.screen.focused is app.screen.query_one("#no", Button)
        await pilot.press("enter")  # the default: nothing runs
        await until(pilot, lambda: app.screen is screen, "back on the review")
        assert (crashed / "workspace" / "NOTES.md").read_text() != TEXT  # nothing ran
        await until(
            pilot, lambda: the_call(app).status == CallStatus.SUSPENDED, "still waits"
        )  # (the recovery's events reach the panes late under load)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: the_call(app).status == CallStatus.SUCCEEDED, "ran again")
        assert (crashed / "workspace" / "NOTES.md").read_text() == TEXT  # whole now
        await until(pilot, lambda: app.main.state.counts() == (0, 0), "the turn finished")
        await app.shutdown()


async def test_kill_a_surviving_process_group(tmp_path: Path, leftover: list[int]) -> None:
    room, call_id, _, record = await crashed_shell(tmp_path, "sleep 120")
    leftover.append(record["pgid"])
    rec = Recorder(Notify, ReviewScreen.Acted)
    app = build(room)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        screen = await review_screen(pilot)
        [r] = screen.reviews.values()
        assert r.process is not None and r.process.alive and r.process.pgid == record["pgid"]
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        assert app.screen.focused is app.screen.query_one("#no", Button)
        await pilot.press("y")
        await until(pilot, lambda: rec.of(ReviewScreen.Acted), "killed")
        assert not orphans.alive(record)
        assert f"Process group {record['pgid']} of {call_id}: terminated." in told(rec)
        await until(pilot, lambda: screen.reviews[call_id].process.killed == "terminated",
                    "the list shows it killed")  # fmt: skip
        await pilot.press("k")  # nothing left to kill: said, nothing asked
        await until(pilot, lambda: any("is not running" in t for t in told(rec)), "said")
        assert not isinstance(app.screen, ConfirmScreen)
        await app.shutdown()


async def test_the_queue_shows_it_needs_review_and_its_keys_point_at_the_review(
    crashed: Path,
) -> None:
    rec = Recorder(Notify, DecisionQueue.Decide)
    app = build(crashed)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await under_review(pilot)
        queue = app.main.query_one(DecisionQueue)
        queue.focus()
        await until(pilot, lambda: queue.row_count == 1, "the queue's row")
        assert "needs review" in str(queue.get_row_at(0)[1])
        await pilot.press("a")
        await until(pilot, lambda: any("Press ! to review it" in t for t in told(rec)), "said")
        assert not rec.of(DecisionQueue.Decide) and the_call(app).status == CallStatus.SUSPENDED
        # at start, one notification said how many and how to review them
        said = [t for t in told(rec) if "the outcome is unknown. Review" in t]
        # how to get to `!` depends on where the focus was as the review arrived (in the
        # chat's input at start, unless the app was slower to focus it than the runtime
        # was to find the call: it failed once so in a loaded full run)
        ways = ("Esc, then !", "press !")
        assert said in [
            [
                f"1 call was running when agentdeck stopped: the outcome is unknown. "
                f"Review ({way}): mark succeeded or failed, or run again."
            ]
            for way in ways
        ]
        assert ASK.split('"')[1] in the_call(app).args["text"]
        # the palette has it too
        titles = await palette(DeckCommands(app.main))
        await titles["Review after a crash"]()  # type: ignore[misc]
        await until(pilot, lambda: isinstance(app.screen, ReviewScreen), "review screen")
        titles = await palette(DeckCommands(app.screen))
        assert [t for t in titles if "review" in t.lower()] == [
            "Close review", "Review: Mark succeeded", "Review: Mark failed", "Review: Run again",
            "Review: Kill process group"]  # fmt: skip
        await app.shutdown()


def test_snapshot_review(snap_compare, crashed: Path) -> None:
    assert snap_compare(build(crashed), terminal_size=(160, 48), run_before=review)


async def test_the_detail_view_of_a_call_under_review_points_at_the_review(
    crashed: Path,
) -> None:
    rec = Recorder(Notify)
    app = build(crashed)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await under_review(pilot)
        queue = app.main.query_one(DecisionQueue)
        queue.focus()
        await until(pilot, lambda: queue.row_count == 1, "the queue's row")
        await pilot.press("enter")
        await until(pilot, lambda: type(app.screen).__name__ == "CallDetailScreen", "details")
        await pilot.press("a")
        await until(pilot, lambda: any("press ! to review it" in t for t in told(rec)), "said")
        await pilot.pause()
        assert the_call(app).status == CallStatus.SUSPENDED
        assert not app.main.state.decided
        await app.shutdown()


async def test_the_review_screen_works_attached_to_another_owner(crashed: Path) -> None:
    from tests.console.test_attached import Owner, attached, attached_app
    from tests.helpers import room_rows

    owner = Owner(crashed)
    pid = owner.start()  # `agentdeck run`: its restart puts the call up for review
    try:
        app = attached_app(crashed)
        async with app.run_test(size=SIZE) as pilot:
            await attached(pilot, pid)
            await until(pilot, lambda: app.main.state.pending, "the call waits")
            await pilot.press("escape", "exclamation_mark")
            await until(pilot, lambda: isinstance(app.screen, ReviewScreen), "review screen")
            screen = app.screen
            await until(pilot, lambda: screen.reviews, "listed")
            await pilot.press("f")
            await answer(pilot, "seen from afar")
            await until(pilot, lambda: room_rows(crashed, "SELECT status FROM tool_calls")
                        == [("failed",)], "failed in the owner")  # fmt: skip
            await until(pilot, lambda: not screen.reviews, "the list is empty")
            await app.shutdown()
    finally:
        owner.stop()
