"""The rules screen's table: every rule the runtime applies, one row each, with the key
that revokes the selected one.

`x` (or Delete) says the operator wants the rule under the cursor revoked (`Revoke`); the
screen asks first and carries it out through the bridge.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from textual.binding import Binding
from textual.message import Message

from console.widgets.keyed_table import KeyedTable
from engine.domain.rules import Rule

COLUMNS = ("id", "source", "effect", "tool", "pattern", "scope", "made by", "made at",
           "expires", "uses", "last use", "state")  # fmt: skip


def when(at: float | None, none: str = "—") -> str:
    """A rule's time as the table shows it (local time, to the minute)."""
    return none if at is None else datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M")


def rule_cells(rule: Rule, now: float) -> tuple[str, ...]:
    """One rule as the table's columns."""
    scope = rule.scope + (f" {rule.thread_id}" if rule.thread_id else "")
    return (rule.id, rule.source, rule.effect, rule.tool, rule.shown_pattern(), scope,
            rule.made_by, when(rule.made_at), when(rule.expires_at, "never"), str(rule.uses),
            when(rule.last_used, "never"), rule.state(now))  # fmt: skip


class RulesTable(KeyedTable):
    """One row per rule: agentdeck.toml's first, then execution.db's by id."""

    BINDINGS = [
        *KeyedTable.BINDINGS,
        Binding("x,delete", "revoke", "Revoke rule"),
    ]

    class Revoke(Message):
        """The operator asked to revoke `rule` (the screen asks first)."""

        def __init__(self, rule: Rule) -> None:
            super().__init__()
            self.rule = rule

    def __init__(self, **kw: Any) -> None:
        super().__init__(
            COLUMNS, state_columns=("state",), give_way=("pattern", "scope", "made by"), **kw
        )
        self.rules: dict[str, Rule] = {}

    def show_rules(self, rules: list[Rule], now: float) -> None:
        self.rules = {r.id: r for r in rules}
        self.show({r.id: rule_cells(r, now) for r in rules})

    def action_revoke(self) -> None:
        key = self.current_key()
        if key is None or key not in self.rules:
            self.notify("No rule is selected.", severity="warning")
            return
        self.post_message(self.Revoke(self.rules[key]))
