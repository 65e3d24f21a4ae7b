"""The rules screen: every rule that allows, asks for or denies calls without an operator,
with where it comes from, its scope, who made it when, its expiry, uses and last use.

It reads the rules through the bridge (the runtime's client: this process's or the
owner's) when opened, after a change, and `REFRESH` times a second while shown (uses grow
as calls are decided). `x` or Delete revokes the selected rule of execution.db after a
confirmation whose default is No; agentdeck.toml's rules are changed in that file.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen

from console.bridge import Bridge
from console.format import counted, set_title
from console.screens.confirm import ConfirmScreen
from console.widgets.key_bar import KeyBar
from console.widgets.rules_table import RulesTable, when
from console.widgets.text import Static
from engine.domain.rules import Rule

REFRESH = 1  # listings a second while the screen is shown


class RulesScreen(Screen[None]):
    """Opened by `r` (or the palette's "Rules"); Esc or q closes it."""

    BINDINGS = [Binding("escape,q", "close", "Close")]

    class Revoked(Message):
        """A rule was revoked: the runtime applies it no more."""

        def __init__(self, rule_id: str) -> None:
            super().__init__()
            self.rule_id = rule_id

    def __init__(self, bridge: Bridge, clock: Callable[[], float]) -> None:
        super().__init__()
        self.bridge, self.clock = bridge, clock
        self.listings = 0  # how many times the screen read the rules (tests look)

    def compose(self) -> ComposeResult:
        yield Static(id="rules-summary")
        with Vertical(id="rules-pane", classes="pane"):
            yield RulesTable(id="rules")
        yield Static(
            "Rules decide calls without asking: deny first, then ask, then allow, the most "
            "specific first. x revokes a remembered rule; agentdeck.toml's are changed in "
            "that file.", classes="hint", id="rules-hint",
        )  # fmt: skip
        yield KeyBar()

    def on_mount(self) -> None:
        set_title(self.query_one("#rules-pane"), "Rules")
        self.refresh_rules()
        self.set_interval(1 / REFRESH, self.refresh_rules, name="rules")
        self.query_one(RulesTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def refresh_rules(self) -> None:
        """Read the rules (in a worker: an attached console asks the owner) and redraw."""
        self.run_worker(self._refresh, group="rules", exclusive=True)  # type: ignore[arg-type]

    async def _refresh(self) -> None:
        summary = self.query_one("#rules-summary", Static)
        try:
            rules = await self.bridge.api.rules()
        except Exception as exc:  # no runtime, an owner gone: said on the screen
            summary.update(f" rules: {exc}")
            return
        self.listings += 1
        now = self.clock()
        active = sum(r.state(now) == "active" for r in rules)
        toml = sum(r.source == "toml" for r in rules)
        plural = "" if len(rules) == 1 else "s"
        summary.update(f" {len(rules)} rule{plural}, {active} active · {toml} from agentdeck.toml, "
                       f"{len(rules) - toml} remembered or added")  # fmt: skip
        self.query_one(RulesTable).show_rules(rules, now)
        title = f"Rules ({len(rules)})"
        pane = self.query_one("#rules-pane")
        set_title(pane, title)

    @on(RulesTable.Revoke)
    def revoke(self, event: RulesTable.Revoke) -> None:
        event.stop()
        self._revoke(event.rule)

    @work(group="revoke")
    async def _revoke(self, rule: Rule) -> None:
        what = f"{rule.effect} {rule.tool} {rule.shown_pattern()}"
        if rule.source == "toml":
            self.notify(f"Rule {rule.id} ({what}) is agentdeck.toml's: it is changed in "
                        "agentdeck.toml (then restart the runtime), not from here.",
                        title="Not revoked", severity="warning")  # fmt: skip
            return
        where = f"thread {rule.thread_id}" if rule.thread_id else "the whole room"
        made = f"made by {rule.made_by} at {when(rule.made_at)}, used {counted(rule.uses, 'time')}"
        ok = await self.app.push_screen_wait(ConfirmScreen(
            f"Revoke rule {rule.id}: {what} ({rule.scope}, {where}; {made})? From now on "
            "it decides no call.", yes="Revoke", no="Keep"))  # fmt: skip
        if not ok:
            return
        try:
            await self.bridge.api.revoke_rule(rule.id, "operator")
        except Exception as exc:  # shown to the operator, never a crash
            self.notify(f"Revoking rule {rule.id} failed: {exc}", severity="error")
        else:
            self.notify(f"Rule {rule.id} revoked: {what}.", title="Rules")
            self.post_message(self.Revoked(rule.id))
        self.refresh_rules()
