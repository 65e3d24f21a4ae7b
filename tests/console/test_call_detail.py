"""The detail view of a call (Enter in the decision queue or the calls pane): the whole
arguments (a shell command wrapped, never cut; a write_file as a diff against the file it
replaces; other tools as JSON) and, for a waiting call, the decision keys, which decide
through the queue's path and bind the approval to exactly the arguments shown."""

from __future__ import annotations

import pytest
from textual.geometry import Region
from textual.notifications import Notify
from textual.widgets import Input, Static

from console.screens.call_detail import CallDetailScreen
from console.screens.main import MainScreen
from console.screens.prompt import PromptScreen
from console.widgets.calls_table import CallsTable
from console.widgets.decision_queue import DecisionQueue
from engine.decisions.binding import args_digest
from tests.console.helpers import (
    SIZE,
    Recorder,
    call_waits,
    decisions_sent,
    send,
    started,
    told,
    until,
)

pytestmark = pytest.mark.anyio

LONG = ("printf '%s\\n' alpha beta gamma delta epsilon zeta eta theta iota kappa lambda "
        "mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega > greek.txt")  # fmt: skip


def drawn(static: Static) -> list[str]:
    """The lines `static` draws, as the operator sees them."""
    width, height = static.size
    return [strip.text.rstrip() for strip in static.render_lines(Region(0, 0, width, height))]


async def open_detail(pilot, main: MainScreen) -> CallDetailScreen:  # noqa: ANN001
    main.query_one(DecisionQueue).focus()
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(pilot.app.screen, CallDetailScreen), "the details")
    await pilot.pause()
    return pilot.app.screen  # type: ignore[return-value]


async def test_approve_in_the_details_is_bound_to_the_whole_command_shown(deck_app) -> None:
    rec = Recorder(MainScreen.Acted)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await call_waits(pilot, f"run `{LONG}`")
        sent = decisions_sent(main)
        detail = await open_detail(pilot, main)
        lines = drawn(detail.query_one("#detail-args", Static))
        assert len([line for line in lines if line]) >= 2, "a long command wraps"
        assert " ".join(" ".join(lines).split()) == " ".join(LONG.split())  # whole, not cut
        assert "…" not in " ".join(lines)
        await pilot.press("a")
        await until(pilot, lambda: main.state.counts() == (0, 0) and not main.state.pending,
                    "turn finished")  # fmt: skip
        assert [(m.action, m.result) for m in rec.of(MainScreen.Acted)][-1][0] == "approve"
        (decision,) = sent
        assert decision.action == "resume" and decision.args_hash == args_digest({"command": LONG})
        assert (app.room.workspace / "greek.txt").read_text().startswith("alpha\n")
        await app.shutdown()


async def test_cancel_in_the_details_asks_the_reason_as_the_queue_does(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `rm -rf build`")
        await open_detail(pilot, main)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "reason prompt")
        app.screen.query_one(Input).value = "not today"
        await pilot.press("enter")
        await until(pilot, lambda: main.state.counts() == (0, 0), "turn finished")
        assert main.state.thread("chat:main").entries[-1].text.endswith(
            "denied by operator: not today")  # fmt: skip
        await app.shutdown()


async def test_keys_on_a_call_that_is_not_waiting_say_so_and_do_nothing(deck_app) -> None:
    said = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=said) as pilot:
        main = await started(pilot)
        await send(pilot, "calc 6*7")
        await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "done")
        sent = decisions_sent(main)
        main.query_one(CallsTable).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, CallDetailScreen), "the details")
        for key in ("a", "x", "e", "u", "A"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, CallDetailScreen), key
        warned = told(said, "warning")
        assert len(warned) == 5 and all("not waiting for a decision" in w for w in warned)
        assert "succeeded" in warned[0] and not sent
        await app.shutdown()


async def write_detail(deck_app, room, before: str | None, link: bool = False) -> list[str]:  # noqa: ANN001
    """The lines the details of `write "release notes" to NOTES.md` show, with NOTES.md
    holding `before` (None: no such file; `link`: a symlink to it instead)."""
    work = room / "workspace"
    work.mkdir(parents=True)
    if before is not None:
        (work / ("elsewhere.md" if link else "NOTES.md")).write_text(before)
    if link:
        (work / "NOTES.md").symlink_to("elsewhere.md")
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, 'write "release notes" to NOTES.md')
        detail = await open_detail(pilot, main)
        shown = [str(label.render()) for label in detail.query(".section")]
        for static in detail.query("#dialog-body Static"):
            if (static.id or "").startswith("detail-args"):
                shown += drawn(static)
        await app.shutdown()
    return shown


async def test_a_write_file_shows_as_a_diff_against_the_current_file(deck_app, room) -> None:
    shown = await write_detail(deck_app, room, "draft notes\nsecond line\n")
    assert "changes to NOTES.md" in shown
    assert "--- NOTES.md (now)" in shown and "+++ NOTES.md (after)" in shown
    assert "-draft notes" in shown and "-second line" in shown and "+release notes" in shown


async def test_a_new_file_shows_all_added(deck_app, room) -> None:
    shown = await write_detail(deck_app, room, None)
    assert "changes to NOTES.md (a new file)" in shown
    assert "--- /dev/null" in shown and "+release notes" in shown
    assert not [line for line in shown if line.startswith("-") and not line.startswith("---")]


async def test_a_file_that_cannot_be_read_says_why_and_shows_the_new_text(deck_app, room) -> None:
    shown = await write_detail(deck_app, room, "secret\n", link=True)
    (label,) = [line for line in shown if line.startswith("new text of NOTES.md")]
    assert "cannot be read" in label and "symlink" in label
    assert "release notes" in shown and not any("secret" in line for line in shown)


async def test_use_a_result_in_the_details(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `date`")
        sent = decisions_sent(main)
        await open_detail(pilot, main)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, PromptScreen), "result prompt")
        app.screen.query_one(Input).value = "Thursday"
        await pilot.press("enter")
        await until(pilot, lambda: main.state.counts() == (0, 0), "turn finished")
        assert [(d.action, d.use_result, d.result) for d in sent] == [("resume", True, "Thursday")]
        assert "Thursday" in main.state.thread("chat:main").entries[-1].text
        await app.shutdown()


async def test_arguments_changed_since_shown_are_not_approved(deck_app) -> None:
    said = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=said) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        sent = decisions_sent(main)
        await open_detail(pilot, main)
        (live,) = main.state.pending.values()
        live.args = {"command": "echo bye"}  # as an event with other arguments would leave it
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, CallDetailScreen) and not sent
        assert "changed since shown" in told(said, "warning")[-1]
        await app.shutdown()
