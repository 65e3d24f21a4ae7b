"""Edit a suspended call's arguments, then review the change as a diff before approving.

On a breakpoint's pause (`pause`), what it holds is edited: the pending messages' text,
the held calls' arguments or the held results, nothing else of it (engine.domain.
breakpoints.changes says what may change, and it is checked here before the diff)."""

from __future__ import annotations

import difflib
import json
from typing import Any

from rich.text import Text
from textual import work
from textual.binding import Binding

from console.pause import editable
from console.screens.confirm import ConfirmScreen
from console.screens.editor import EditorScreen


def args_diff(old: Any, new: Any, names: tuple[str, str] = ("arguments (model)",
                                                            "arguments (edited)")) -> Text:  # fmt: skip
    """A unified diff of two argument objects, as JSON, with +/- lines marked."""
    a = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    text = Text()
    for line in difflib.unified_diff(a, b, *names, lineterm=""):
        style = (
            "bold" if line.startswith(("+", "-")) and not line.startswith(("+++", "---")) else ""
        )
        text.append(line + "\n", style)
    return text if text.plain else Text("(no change)")


def editable_json(value: Any) -> str:
    """`value` as indented JSON, with the characters an editor takes for line breaks inside
    strings escaped (JSON allows them raw; a text editor would turn them into \\n)."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    for char in "\u2028\u2029\x85":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


class EditArgsScreen(EditorScreen[dict[str, Any]]):
    """JSON editor for the arguments; ctrl+s reviews the diff and asks (default No); Esc
    goes back without deciding."""

    BINDINGS = [
        Binding("ctrl+s", "review('approve')", "Review + approve", priority=True),
        Binding("ctrl+s", "review('continue')", "Review + continue", priority=True),  # a pause's
    ]
    DISCARD = "Discard the edited arguments? The call stays undecided."

    def __init__(self, tool: str, args: Any, *, pause: bool = False) -> None:
        what = (f"what the breakpoint paused on ({editable(args)} only)" if pause
                else f"the arguments of {tool}")  # fmt: skip
        super().__init__(f"Edit {what}, then ctrl+s to review", editable_json(args),
                         "ctrl+s review the diff · Esc back without deciding", "args-editor")  # fmt: skip
        self.tool, self.args, self.pause = tool, args, pause
        if pause:
            self.DISCARD = "Discard the edits? The turn stays paused."

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ctrl+s says what it leads to: approve a call, or continue from a pause."""
        if action != "review" or not parameters:
            return True
        return (parameters[0] == "continue") == self.pause

    @work
    async def action_review(self, then: str = "approve") -> None:
        """Check the edit, show the diff and ask (`then`: the footer's word, nothing more)."""
        raw = self.edited_text
        try:
            edited = json.loads(raw)
        except json.JSONDecodeError as exc:
            self.notify(f"Not valid JSON: {exc}", severity="error")
            return
        if not isinstance(edited, dict):
            self.notify("The arguments must be a JSON object.", severity="error")
            return
        if self.pause:
            from engine.domain.breakpoints import changes

            try:
                changes(self.args, edited)
            except ValueError as exc:
                self.notify(f"Not sent: {exc}", title="Edit refused", severity="error")
                return
        question, yes, names = (
            ("Continue the turn with these edits?", "Continue", ("as paused", "edited"))
            if self.pause else (f"Approve {self.tool} with the edited arguments?", "Approve",
                                ("arguments (model)", "arguments (edited)"))
        )  # fmt: skip
        ok = await self.app.push_screen_wait(
            ConfirmScreen(question, args_diff(self.args, edited, names), yes=yes)
        )
        if ok:
            self.dismiss(edited)
