"""The rules screen (`r`: every rule, revoked by keyboard after a confirmation whose
default is No) and the remember screen (`A` for the thread, `R` for the room: the pattern
that will be allowed, editable, checked as it is typed) (issue 15)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widgets import Input

from console.commands import DeckCommands
from console.screens.call_detail import CallDetailScreen
from console.screens.confirm import ConfirmScreen
from console.screens.help import HelpScreen
from console.screens.remember import RememberScreen
from console.screens.rules import RulesScreen
from console.widgets.decision_queue import DecisionQueue
from console.widgets.rules_table import RulesTable
from engine.api.local import LocalClient
from engine.api.remote import RemoteClient
from engine.api.rule_models import NewRule
from engine.room import Room
from tests.console.conftest import T0, build
from tests.console.helpers import SIZE, Recorder, call_waits, palette, started, told, until
from tests.console.scenes import steady
from tests.console.test_attached import Owner, attached, attached_app
from tests.helpers import room_rows

pytestmark = pytest.mark.anyio

TOML = '[[rules]]\neffect = "ask"\ntool = "read_file"\npattern = "private/**"\n'


def with_toml(room: Path) -> None:
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(TOML)


async def add_rules(pilot: Pilot) -> None:
    """Two rules of execution.db, added through the runtime's client (the fixed clock
    makes them at T0)."""
    client = LocalClient(pilot.app.host.runtime)  # type: ignore[attr-defined]
    await client.add_rule(NewRule(effect="allow", tool="shell", pattern="git status*",
                                  expires_at=T0 + 7200, reason="harmless"))  # fmt: skip
    await client.add_rule(NewRule(effect="deny", tool="shell", pattern="rm *", scope="thread",
                                  thread_id="chat:main"))  # fmt: skip


async def open_rules(pilot: Pilot) -> RulesScreen:
    """Press `r` (from the timeline: the chat input would take the letter)."""
    app = pilot.app
    app.main.query_one("#timeline").focus()  # type: ignore[attr-defined]
    await pilot.press("r")
    await until(pilot, lambda: isinstance(app.screen, RulesScreen), "rules screen")
    screen = app.screen
    assert isinstance(screen, RulesScreen)
    await until(pilot, lambda: screen.listings > 0, "first listing")
    return screen


async def test_revoke_asks_first_defaults_to_no_and_a_toml_rule_is_not_revoked(room) -> None:
    with_toml(room)
    rec = Recorder(Notify, RulesScreen.Revoked)
    app = build(room)
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await started(pilot)
        await add_rules(pilot)
        screen = await open_rules(pilot)
        rt = app.host.runtime
        table = screen.query_one(RulesTable)
        assert list(table.rules) == ["toml:1", "1", "2"]
        assert [str(c) for c in table.get_row("1")[4:6]] == ["git status*", "room"]
        # agentdeck.toml's rule: said, nothing asked, nothing revoked
        await pilot.press("x")
        await until(pilot, lambda: any("agentdeck.toml" in t for t in told(rec)), "told")
        assert not isinstance(app.screen, ConfirmScreen) and rt.rules.get("toml:1") is not None
        # a remembered rule: asks, No is the default (Enter on the focused No)
        await pilot.press("j")
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
        assert app.focused is not None and app.focused.id == "no"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is screen, "back")
        assert rt.rules.get("1") is not None and not rec.of(RulesScreen.Revoked)
        # then yes: revoked, and the list shows it at once
        await pilot.press("delete")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked again")
        await pilot.press("y")
        await until(pilot, lambda: "1" not in table.rules, "list refreshed")
        assert rt.rules.get("1") is None
        assert [m.rule_id for m in rec.of(RulesScreen.Revoked)] == ["1"]
        assert any(t.startswith("Rule 1 revoked") for t in told(rec))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, "closed")
        await app.shutdown()


async def test_the_rules_screen_is_in_the_palette_and_the_help(room) -> None:
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        titles = await palette(DeckCommands(app.main))
        assert titles["Rules"] is not None and "Decisions: Approve+remember room" in titles
        if inspect.isawaitable(opened := titles["Rules"]()):  # as the palette runs it
            await opened
        await until(pilot, lambda: isinstance(app.screen, RulesScreen), "opened by the palette")
        await until(pilot, lambda: app.screen.listings > 0, "listed")
        offered = await palette(DeckCommands(app.screen))
        assert "Rules: Revoke rule" in offered and "Close rules" in offered
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        rows = app.screen.rows
        assert ("r", "Rules") in rows and ("", "Rules") in rows  # the key, and its section
        assert ("x / del", "Revoke rule") in rows and ("R", "Approve+remember room") in rows
        await app.shutdown()


async def test_the_rules_screen_attached_to_another_owner(tmp_path: Path) -> None:
    owner = Owner(tmp_path / "room")
    (owner.room / "tasks").mkdir(parents=True)
    pid = owner.start()
    try:
        async with RemoteClient(Room.at(owner.room)) as client:
            await client.add_rule(NewRule(effect="allow", tool="shell", pattern="ls *"))
        app = attached_app(owner.room)
        async with app.run_test(size=SIZE) as pilot:
            await attached(pilot, pid)
            screen = await open_rules(pilot)
            table = screen.query_one(RulesTable)
            assert list(table.rules) == ["1"]
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "asked")
            await pilot.press("y")
            await until(pilot, lambda: not table.rules, "revoked and listed again")
            await app.shutdown()
        assert room_rows(owner.room, "SELECT revoked_by FROM rules") == [("operator",)]
    finally:
        owner.stop()


async def remember(pilot: Pilot, key: str) -> RememberScreen:
    await pilot.press("escape", "d", key)
    await until(pilot, lambda: isinstance(pilot.app.screen, RememberScreen), "remember screen")
    screen = pilot.app.screen
    assert isinstance(screen, RememberScreen)
    return screen


async def test_the_edited_pattern_is_what_is_remembered_for_the_room(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `git status --short`")
        screen = await remember(pilot, "R")
        field = screen.query_one(Input)
        assert field.value == "git status --short"  # the narrowest: this exact command
        assert screen.ok and "matches this call" in str(
            screen.query_one("#remember-check").render()
        )
        field.value = "git status*"
        await pilot.press("enter")
        await until(pilot, lambda: not main.state.pending and main.state.counts() == (0, 0),
                    "approved and finished")  # fmt: skip
        rt = app.host.runtime
        [rule] = rt.rules.listed()
        assert (rule.effect, rule.tool, rule.pattern, rule.scope, rule.thread_id) == (
            "allow", "shell", "git status*", "room", None)  # fmt: skip
        await app.shutdown()


async def test_a_pattern_not_matching_the_call_is_refused(deck_app) -> None:
    rec = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        screen = await remember(pilot, "A")
        field = screen.query_one(Input)
        field.value = "ls *"
        await pilot.pause()
        check = str(screen.query_one("#remember-check").render())
        assert not screen.ok and "does not match this call" in check
        await pilot.press("enter")
        await until(pilot, lambda: any("Nothing saved" in t for t in told(rec)), "refused")
        assert app.screen is screen and main.state.pending  # nothing decided
        field.value = ""
        await pilot.pause()
        assert "invalid: a pattern is 1 to" in str(screen.query_one("#remember-check").render())
        await pilot.press("escape")  # backs out: the call still waits, no rule made
        await until(pilot, lambda: app.screen is app.main, "backed out")
        assert main.state.pending and app.host.runtime.rules.listed() == []
        # A again: for the thread, with the proposed pattern as it is
        await remember(pilot, "A")
        await pilot.press("enter")
        await until(pilot, lambda: not main.state.pending, "approved")
        await until(pilot, lambda: app.host.runtime.rules.listed(), "rule made")
        [rule] = app.host.runtime.rules.listed()
        assert (rule.pattern, rule.scope, rule.thread_id) == ("echo hi", "thread", "chat:main")
        assert main.query_one(DecisionQueue).row_count == 0
        await app.shutdown()


async def test_r_in_the_call_detail_remembers_for_the_room_too(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `echo hi`")
        await pilot.press("escape", "d", "enter")  # Enter opens the details
        await until(pilot, lambda: isinstance(app.screen, CallDetailScreen), "details")
        await pilot.press("R")
        await until(pilot, lambda: isinstance(app.screen, RememberScreen), "remember screen")
        assert app.screen.scope == "room"
        await pilot.press("enter")
        await until(pilot, lambda: app.host.runtime.rules.listed(), "rule made")
        [rule] = app.host.runtime.rules.listed()
        assert (rule.pattern, rule.scope, rule.thread_id) == ("echo hi", "room", None)
        await until(pilot, lambda: not main.state.pending, "approved")
        await app.shutdown()


async def test_a_chained_command_cannot_be_remembered(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        await call_waits(pilot, "run `echo hi; touch marker`")
        screen = await remember(pilot, "A")
        assert not screen.ok
        assert "chains, pipes" in str(screen.query_one("#remember-check").render())
        await app.shutdown()


async def rules_scene(pilot: Pilot) -> None:
    await started(pilot)
    await add_rules(pilot)
    await open_rules(pilot)
    table = pilot.app.screen.query_one(RulesTable)
    await until(pilot, lambda: table.row_count == 3, "three rules")
    await steady(pilot)


async def remember_scene(pilot: Pilot) -> None:
    await call_waits(pilot, "run `git status --short`")
    screen = await remember(pilot, "A")
    screen.query_one(Input).value = "git status*"
    await steady(pilot)


@pytest.mark.parametrize("scene", ["rules", "remember"])
def test_rules_snapshot(scene: str, snap_compare, room) -> None:
    with_toml(room)
    run_before = rules_scene if scene == "rules" else remember_scene
    assert snap_compare(build(room), terminal_size=SIZE, run_before=run_before)
