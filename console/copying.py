"""Copying a call to the clipboard, from wherever it is selected: its command (a `shell`
call's command itself, any other call's arguments as indented JSON) with `y`, its output
(the result, or the error) with `Y`. Sent by OSC 52 (Textual's `copy_to_clipboard`), which
works over SSH and in tmux (with `set -g set-clipboard on`, tmux's default for most
terminals)."""

from __future__ import annotations

from typing import Any, Literal

from console.format import pretty
from console.state import CallRow

What = Literal["command", "output"]


def copied_text(call: CallRow, what: What) -> str | None:
    """What `y` (command) or `Y` (output) copies of `call` (None: it has none)."""
    if what == "output":
        return call.result if call.result is not None else call.error
    args = call.args
    if call.tool == "shell" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return str(args["command"])
    return pretty(args)


def copy_call(node: Any, call: CallRow | None, what: What) -> None:
    """Copy `what` of `call` and say so (or why nothing was copied)."""
    if call is None:
        node.notify("No call is selected.", severity="warning")
        return
    text = copied_text(call, what)
    if not text:
        node.notify(f"{call.tool} has no {what} yet.", severity="warning")
        return
    node.app.copy_to_clipboard(text)
    lines = text.count("\n") + 1
    size = f"{len(text):,} characters" + (f", {lines} lines" if lines > 1 else "")
    word = "command" if what == "command" and call.tool == "shell" else (
        "arguments" if what == "command" else what)  # fmt: skip
    node.notify(f"Copied the {word} of {call.tool} ({size}).", title="Clipboard")
