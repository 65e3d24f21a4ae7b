"""Approve and remember: what will be allowed from now on, shown and editable before it is
saved.

The screen names the tool and the scope (this thread, or the whole room) and holds the
argument pattern in an input, prefilled with the narrowest pattern that matches this call
(for `shell` its exact command: engine.domain.rules.narrowest), never the whole tool. A line
under it says, as the operator types, whether the pattern can be read and whether it
matches this call. Enter saves only a pattern that does both; Esc backs out (nothing is
decided).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input

from console.format import facts, one_line
from console.state import CallRow
from console.widgets.text import Label, Static
from engine.domain.rules import FILE_TOOLS, URL_TOOLS, Rule, RuleError, check_pattern, narrowest
from engine.domain.rules import simple_command as simple

HELP = {
    "shell": "a glob on the command as the shell reads it: `git status`, `pytest *`; a "
    "command that chains, pipes, redirects or substitutes, or a program that runs others "
    "(git -c, find -exec, sudo…), is allowed only by its exact text",
    "file": "a path glob inside the workspace: `notes/*.md`, `src/**` (* stays in a folder)",
    "url": "a URL, or a prefix ending in *: `https://api.github.com/*`",
    "other": "the exact arguments, as a JSON object",
}


def verdict(call: CallRow, pattern: str, scope: str,
            workspace: Path | None) -> tuple[bool, str]:  # fmt: skip
    """Whether `pattern` may be saved for `call` (readable, and matching this call), and
    the line that says so."""
    try:
        check_pattern(call.tool, pattern)
    except RuleError as exc:
        return False, f"✗ invalid: {exc}"
    rule = Rule(tool=call.tool, effect="allow", pattern=pattern, scope=scope,  # type: ignore[arg-type]
                thread_id=None if scope == "room" else call.thread_id)  # fmt: skip
    if rule.matches(call.args, workspace):
        return True, "✓ valid, and it matches this call: Enter saves it"
    command = call.args.get("command") if isinstance(call.args, dict) else None
    if call.tool == "shell" and isinstance(command, str) and not simple(command.strip()):
        return False, ("✗ this command chains, pipes, redirects or substitutes: no rule allows "
                       "it. Approve it once with a instead.")  # fmt: skip
    return False, "✗ does not match this call (the pattern is valid): it would not allow it"


def _help(tool: str) -> str:
    kind = ("shell" if tool == "shell" else "file" if tool in FILE_TOOLS else
            "url" if tool in URL_TOOLS else "other")  # fmt: skip
    return HELP[kind]


class RememberScreen(ModalScreen[str | None]):
    """Dismissed with the pattern to save, or None (Esc)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Back out")]

    def __init__(self, call: CallRow, scope: Literal["thread", "room"],
                 workspace: Path | None = None) -> None:  # fmt: skip
        super().__init__()
        self.call, self.scope, self.workspace = call, scope, workspace
        self.proposed = narrowest(call.tool, call.args)
        self.ok = False

    def compose(self) -> ComposeResult:
        call = self.call
        where = (f"this thread only ({call.thread_id})" if self.scope == "thread" else
                 "the whole room (every thread)")  # fmt: skip
        known = facts((
            ("tool", call.tool), ("this call", one_line(call.args, 300)),
            ("scope", f"{self.scope}: {where}"),
            ("effect", "allow, without asking, until revoked (rules screen: r)"),
        ))  # fmt: skip
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Approve this {call.tool} call and allow from now on the "
                        f"{call.tool} calls whose arguments match:", id="question")  # fmt: skip
            yield Static(known)
            yield Label("pattern", classes="section")
            yield Input(self.proposed, id="remember-pattern", select_on_focus=False)
            yield Static(id="remember-check")
            yield Static(_help(call.tool), classes="hint")
            yield Static("Enter approves and saves the rule · Esc backs out", classes="hint")

    def on_mount(self) -> None:
        self._check(self.proposed)
        self.query_one(Input).focus()

    def _check(self, pattern: str) -> None:
        self.ok, line = verdict(self.call, pattern, self.scope, self.workspace)
        check = self.query_one("#remember-check", Static)
        check.update(Text(line))
        check.set_class(not self.ok, "-refused")

    @on(Input.Changed, "#remember-pattern")
    def changed(self, event: Input.Changed) -> None:
        event.stop()
        self._check(event.value)

    @on(Input.Submitted, "#remember-pattern")
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._check(event.value)
        if not self.ok:
            line = verdict(self.call, event.value, self.scope, self.workspace)[1]
            self.notify(f"Nothing saved: {line.removeprefix('✗ ')}", title="Pattern refused",
                        severity="warning")  # fmt: skip
            return
        self.dismiss(event.value)
