"""A tool's answer in the chat as people read it, not as the model does: a `shell` call as
`$ command`, an exit badge, its output as text (stderr set apart), cut after a screenful
("… +N lines": ctrl+r in the chat shows every output whole, and the call's details, Enter
in the calls pane, show it too); a file tool by its path; any other by its tool and arguments on one line. The JSON the model reads is
in the details only.

A chat entry of a tool holds the text the model read; its call is found among its turn's
calls by that text (console/state.py keeps them), so the chat draws what the calls pane
and the details show."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text

from console.format import one_line, visible
from console.state import CallRow
from engine.lifecycle import CallStatus
from engine.shell.result import ShellResult, shell_result

TOOL_LINES = 8  # lines of a tool's output the chat shows at least before "… +N lines"
PENDING = "pending: waiting for an operator decision"  # engine/turn/call.py's placeholder
FILE_TOOLS = frozenset({"read_file", "write_file", "list_dir"})


def model_text(call: CallRow) -> str:
    """The text the model read of `call` (engine.turn.call.CallState.model_text)."""
    if call.status == CallStatus.SUCCEEDED:
        return call.result or ""
    if call.status == CallStatus.SUSPENDED:
        return f"{PENDING} ({call.error})"
    return f"error: {call.error}"


def find_call(text: str, calls: Iterable[CallRow]) -> CallRow | None:
    """The call of a turn whose answer the model read as `text` (None: not known here)."""
    return next((call for call in calls if model_text(call) == text), None)


def header(call: CallRow) -> str:
    """What the call did, in a line: `$ command`, `read_file notes.md`, `calc {...}`."""
    args = call.args if isinstance(call.args, dict) else {}
    if call.tool == "shell" and isinstance(args.get("command"), str):
        return f"$ {args['command']}"
    if call.tool in FILE_TOOLS and isinstance(args.get("path"), str):
        return f"{call.tool} {args['path']}"
    return f"{call.tool} {one_line(call.args, 100)}"


def what(call: CallRow) -> str:
    """The call's arguments as a table cell reads them beside its tool: `$ command`, a
    file tool's path, else the arguments on one line (their JSON is in the details)."""
    args = call.args if isinstance(call.args, dict) else {}
    if call.tool == "shell" and isinstance(args.get("command"), str):
        return f"$ {one_line(args['command'], 200)}"
    if call.tool in FILE_TOOLS and isinstance(args.get("path"), str):
        return one_line(args["path"], 200)
    return one_line(call.args, 40)


def outcome(call: CallRow) -> str:
    """What came of the call, in a line: a command's exit code and the first line it
    printed (`exit 0 · 60 lines · 1`), another tool's result, or the error."""
    if call.status != CallStatus.SUCCEEDED:
        return one_line(call.error or "", 50)
    text = call.result or ""
    shell = shell_result(text)
    if shell is None:
        return one_line(text, 50)
    printed = shell.stdout or shell.stderr
    lines = printed.rstrip("\n").split("\n") if printed else []
    said = f"exit {shell.exit_code}"
    if len(lines) > 1:
        said += f" · {len(lines)} lines"
    first = next((line for line in lines if line.strip()), "")
    return f"{said} · {one_line(first, 50)}" if first else said


def tool_text(text: str, call: CallRow | None, styles: dict[str, Any],
              lines: int | None = TOOL_LINES) -> Text:  # fmt: skip
    """A tool entry drawn: its call's header and badge, then its output, cut after `lines`
    lines (None: whole)."""
    out = Text()
    if text.startswith(PENDING):  # its answer comes as an entry of its own, once decided
        reason = text[len(PENDING) :].strip(" ()") or "a decision"
        out.append(f"⏸ asked for a decision: {visible(reason)}", styles["muted"])
        return out
    shell = shell_result(text)
    if call is not None:
        out.append(visible(header(call)), styles["head"])
        badge, good = _badge(call, shell)
        if badge:
            out.append("  ")
            out.append(f" {badge} ", styles["ok"] if good else styles["bad"])
        out.append("\n")
    if shell is not None:
        stdout, stderr = shell.stdout, shell.stderr
        body = _cut(stdout, lines)
        out.append(visible(body, lines=True) or ("(no output)" if not stderr else ""))
        if stderr:
            if body:
                out.append("\n")
            out.append("stderr ", styles["muted"])
            out.append(
                visible(_cut(stderr, None if lines is None else max(2, lines // 2)), lines=True),
                styles["bad"],
            )
    else:
        body = text[len("error: ") :] if text.startswith("error: ") else text
        out.append(visible(_cut(body, lines), lines=True) or "(no output)")
    return out


def _badge(call: CallRow, shell: ShellResult | None) -> tuple[str, bool]:
    if shell is not None:
        return f"exit {shell.exit_code}", shell.exit_code == 0
    if call.status == CallStatus.FAILED:
        return "failed", False
    if call.status == CallStatus.CANCELLED:
        return "cancelled", False
    return "", True


def _cut(text: str, lines: int | None) -> str:
    """`text` up to `lines` lines (None: all); what is left said in a last line."""
    parts = text.rstrip("\n").split("\n")
    if lines is None or len(parts) <= lines:
        return "\n".join(parts)
    return "\n".join([*parts[:lines], f"… +{len(parts) - lines} lines (ctrl+r: show all)"])
