"""Edit a suspended call's arguments, then review the change as a diff before approving."""

from __future__ import annotations

import difflib
import json
from typing import Any

from rich.text import Text
from textual import work
from textual.binding import Binding

from console.screens.confirm import ConfirmScreen
from console.screens.editor import EditorScreen


def args_diff(old: Any, new: Any) -> Text:
    """A unified diff of two argument objects, as JSON, with +/- lines marked."""
    a = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    b = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    text = Text()
    for line in difflib.unified_diff(a, b, "arguments (model)", "arguments (edited)", lineterm=""):
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

    BINDINGS = [Binding("ctrl+s", "review", "Review + approve", priority=True)]
    DISCARD = "Discard the edited arguments? The call stays undecided."

    def __init__(self, tool: str, args: Any) -> None:
        super().__init__(f"Edit the arguments of {tool}, then ctrl+s to review",
                         editable_json(args), "ctrl+s review the diff · Esc back without "
                         "deciding", "args-editor")  # fmt: skip
        self.tool, self.args = tool, args

    @work
    async def action_review(self) -> None:
        raw = self.edited_text
        try:
            edited = json.loads(raw)
        except json.JSONDecodeError as exc:
            self.notify(f"Not valid JSON: {exc}", severity="error")
            return
        if not isinstance(edited, dict):
            self.notify("The arguments must be a JSON object.", severity="error")
            return
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Approve {self.tool} with the edited arguments?",
                args_diff(self.args, edited),
                yes="Approve",
            )  # fmt: skip
        )
        if ok:
            self.dismiss(edited)
