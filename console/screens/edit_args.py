"""Edit a suspended call's arguments, then review the change as a diff before approving."""

from __future__ import annotations

import difflib
import json
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, TextArea

from console.screens.confirm import ConfirmScreen, may_discard


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


class EditArgsScreen(ModalScreen[dict[str, Any] | None]):
    """JSON editor for the arguments; ctrl+s reviews the diff and asks (default No); Esc
    goes back without deciding (asking first when the arguments were edited)."""

    BINDINGS = [
        Binding("ctrl+s", "review", "Review + approve", priority=True),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, tool: str, args: Any) -> None:
        super().__init__()
        self.tool, self.args = tool, args
        self.original = editable_json(args)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Edit the arguments of {self.tool}, then ctrl+s to review", id="question")
            yield TextArea(self.original, language=None, id="args-editor")
            yield Label("ctrl+s review the diff · Esc back without deciding", classes="hint")

    @work(exclusive=True)
    async def action_back(self) -> None:
        edited = self.query_one(TextArea).text != self.original
        question = "Discard the edited arguments? The call stays undecided."
        if await may_discard(self.app, edited, question, keep="Keep editing"):
            self.dismiss(None)

    @work
    async def action_review(self) -> None:
        raw = self.query_one(TextArea).text
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
