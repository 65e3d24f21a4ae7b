"""A shell call's sandbox in the console (issue 34): its card says the sandbox the command
will run in, and offers `O` (in the failure colour) to run it outside the sandbox and `N`
with the network, bound to the arguments shown as `a` is and never remembered; a command
the sandbox stopped fails saying so, and the same command approved outside it runs. Where
the kernel cannot make a sandbox, the card and the status bar say so and nothing offers
to leave one. Only a shell call runs in the sandbox: the keys mean nothing for another."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from textual.color import Color
from textual.notifications import Notify
from textual.pilot import Pilot

from console.widgets.decision_card import DecisionCard, _KeyLine
from console.widgets.decision_queue import DecisionQueue
from console.widgets.inputs import ChatInput
from console.widgets.status_bar import StatusBar
from engine.domain.decisions import args_digest
from engine.shell import sandbox as sandboxes
from tests.console.conftest import build
from tests.console.helpers import SIZE, Recorder, decisions_sent, send, started, told, until
from tests.console.scenes import card, steady
from tests.console.test_decision_card import card_text
from tests.helpers import rows

pytestmark = [pytest.mark.anyio, pytest.mark.console]

REFUSED = "the sandbox may have refused it"


@pytest.fixture
def no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel without Landlock: the runtime can make no sandbox."""
    monkeypatch.setattr(sandboxes, "probe_abi", lambda: 0)


async def armed_card(pilot: Pilot, text: str) -> DecisionCard:
    """Send `text` (it asks for a call) and wait until its card holds the keyboard."""
    main = pilot.app.main  # type: ignore[attr-defined]
    await send(pilot, text, click=False)
    the_card = main.query_one(DecisionCard)
    await until(pilot, lambda: the_card.armed and the_card.call, "the card's keys are live")
    return the_card


async def settled(pilot: Pilot, call_id: str) -> tuple[str, str | None]:
    """Wait until the call `call_id` ended and its turn is over: its status and error."""
    main = pilot.app.main  # type: ignore[attr-defined]
    call = await until(pilot, lambda: main.state.calls.get(call_id), "the call ended",
                       ok=lambda c: c is not None and c.status in ("succeeded", "failed"))  # fmt: skip
    await until(pilot, lambda: main.state.counts(), "the turn ended", ok=lambda c: c == (0, 0))
    return str(call.status), call.error


async def test_a_shell_card_says_its_sandbox_and_offers_to_leave_it_in_the_failure_colour(
    deck_app,
) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        the_card = await armed_card(pilot, "run `make test`")
        shown = card_text(the_card)
        assert "sandbox: workspace-write, no network" in shown
        assert "a approve · O outside the sandbox · N with the network · A approve" in shown
        line = the_card.query_one(_KeyLine).render()
        assert isinstance(line, Text)
        at = line.plain.index("O outside the sandbox")
        [style] = [s.style for s in line.spans if s.start <= at < s.end]
        error = Color.parse(app.get_css_variables()["error"]).rich_color
        assert style.color == error and style.bold  # type: ignore[union-attr]
        assert main.query_one(StatusBar).sandbox == ""  # nothing to warn of
        await app.shutdown()


async def test_outside_the_sandbox_a_command_runs_that_approved_in_it_was_refused(
    deck_app, tmp_path: Path
) -> None:
    """The same `touch` of a file outside the workspace: approved (`a`), the sandbox
    stops it and the call says so; approved outside the sandbox (`O`), the file is made,
    and the decisions table records which decision ran it outside."""
    outside = tmp_path / "outside.txt"
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        the_card = await armed_card(pilot, f"run `touch {outside}`")
        first = the_card.call
        assert first is not None
        await pilot.press("a")
        status, error = await settled(pilot, first.call_id)
        assert status == "failed" and error is not None and REFUSED in error
        assert not outside.exists()

        the_card = await armed_card(pilot, f"run `touch {outside}`")
        second = the_card.call
        assert second is not None and second.call_id != first.call_id
        await pilot.press("O")
        status, error = await settled(pilot, second.call_id)
        assert status == "succeeded", error
        assert outside.exists()
        assert [(d.action, d.sandbox, d.remember) for d in sent] == [
            ("resume", "default", None),
            ("resume", "outside", None),
        ]
        assert sent[1].args_hash == args_digest(second.args) == sent[0].args_hash
        recorded = await rows(app.host.runtime, "SELECT call_id, sandbox FROM decisions "  # type: ignore[attr-defined]
                              "ORDER BY created_at")  # fmt: skip
        assert recorded == [(first.call_id, None), (second.call_id, "outside")]
        await app.shutdown()


async def test_n_approves_with_the_network_and_the_queue_offers_both_keys_for_shell_only(
    deck_app,
) -> None:
    app = deck_app()
    recorder = Recorder(Notify)
    async with app.run_test(size=SIZE, message_hook=recorder) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        await send(pilot, 'write "notes" to NOTES.md', click=False)
        await until(pilot, lambda: main.state.pending, "the write_file call waits")
        queue = main.query_one(DecisionQueue)
        queue.focus()
        await pilot.press("O", "N")  # a write_file runs in no sandbox: nothing decided
        await until(pilot, lambda: told(recorder, "warning"), "said why", ok=lambda t: len(t) == 2)
        assert all("only a shell call does" in t for t in told(recorder, "warning"))
        assert not sent
        await pilot.press("x")  # (the reason's prompt) denied, to leave the queue empty
        await until(
            pilot, lambda: type(app.screen).__name__, "asked", ok=lambda n: n != "MainScreen"
        )
        await pilot.press("enter")
        await until(pilot, lambda: main.state.pending, "denied", ok=lambda p: not p)

        await send(pilot, "run `echo online`", click=False)
        await until(pilot, lambda: main.state.pending, "the shell call waits")
        queue.focus()
        await pilot.press("N")
        await until(pilot, lambda: len(sent), "decided", ok=lambda n: n == 2)
        assert (sent[1].action, sent[1].sandbox, sent[1].remember) == ("resume", "network", None)
        await app.shutdown()


async def test_an_o_on_the_card_of_another_tool_is_the_chats_letter(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        the_card = await armed_card(pilot, 'write "notes" to NOTES.md')
        assert "outside" not in the_card.key_line() and "sandbox" not in card_text(the_card)
        await pilot.press("O")
        field = main.query_one(ChatInput)
        await until(pilot, lambda: field.has_focus, "the chat has the keyboard again")
        assert field.value == "O" and not sent and main.state.pending
        await app.shutdown()


@pytest.mark.usefixtures("no_sandbox")
async def test_without_a_sandbox_the_card_and_the_status_bar_warn_and_offer_none(
    deck_app,
) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        status = main.query_one(StatusBar)
        await until(pilot, lambda: status.sandbox, "the status bar warns")
        assert "⚠ no sandbox" in str(status.render())
        sent = decisions_sent(main)
        the_card = await armed_card(pilot, "run `make test`")
        assert "⚠ no sandbox: runs with your whole account" in card_text(the_card)
        assert "outside" not in the_card.key_line()
        await pilot.press("O")  # nothing to leave: a letter for the chat
        await until(pilot, lambda: main.query_one(ChatInput).has_focus, "the chat's")
        assert not sent
        await app.shutdown()


def test_card_without_a_sandbox_snapshot(snap_compare, room, no_sandbox) -> None:
    """The card's warning in the failure colour, the status bar's, and no key to leave."""

    async def run_before(pilot: Pilot) -> None:
        await card(pilot)
        status = pilot.app.main.query_one(StatusBar)  # type: ignore[attr-defined]
        await until(pilot, lambda: status.sandbox, "the status bar warns")
        await steady(pilot)

    assert snap_compare(build(room), terminal_size=SIZE, run_before=run_before)
