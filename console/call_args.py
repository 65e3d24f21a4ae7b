"""A call's arguments in full, as the operator approves them: a `shell` command whole
(wrapped, never cut), a `write_file` as a unified diff against the file it would replace
in the room's workspace, any other tool as indented JSON.

The current file is read through `engine.tools.workspace.Workspace` (no symlink followed, no
FIFO waited on) and at most DIFF_LIMIT bytes of it: a larger file, or one that is not
UTF-8 text or cannot be read, is not compared, and the view says why and shows the new
text whole instead.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from textual.content import Content

from console.format import pretty, visible
from engine.tools import ToolError
from engine.tools.workspace import NoSuchFile, Workspace

DIFF_LIMIT = 256 * 1024  # bytes of the current file read to compare with the new text
ADDED, REMOVED, HUNK = "bold $state-succeeded", "bold $state-failed", "$foreground-muted"

Section = tuple[str, Content]  # a label and what is shown under it


def shown_args(tool: str, args: Any, workspace: Path | None) -> list[Section]:
    """The sections that show `args` of a call of `tool` whole."""
    if not isinstance(args, dict):
        return [("arguments", _text(pretty(args)))]
    rest = dict(args)
    if tool == "shell" and isinstance(args.get("command"), str):
        command = rest.pop("command")
        sections = [("command", _text(command))]
    elif (
        tool == "write_file"
        and isinstance(args.get("path"), str)
        and isinstance(args.get("text"), str)
    ):
        text, path = rest.pop("text"), rest.pop("path")  # the diff names the path
        sections = [file_diff(workspace, path, text)]
    else:
        return [("arguments", _text(pretty(args)))]
    if rest:
        sections.insert(0, ("arguments", _text(pretty(rest))))
    return sections


def file_diff(workspace: Path | None, path: str, new: str) -> Section:
    """`new` as a unified diff against the file at `path` now (a new file: all added)."""
    old, why = _current(workspace, path)
    if why:
        return f"new text of {visible(path)} ({visible(why)})", _text(new)
    before = f"{path} (now)" if old is not None else "/dev/null"
    lines = difflib.unified_diff((old or "").splitlines(), new.splitlines(), before,
                                 f"{path} (after)", lineterm="")  # fmt: skip
    parts: list[str | tuple[str, str]] = []
    for line in lines:
        style = (HUNK if line.startswith(("---", "+++", "@@")) else
                 ADDED if line.startswith("+") else REMOVED if line.startswith("-") else "")  # fmt: skip
        line = visible(line, lines=True) + "\n"
        parts.append((line, style) if style else line)
    label = f"changes to {visible(path)}" + (" (a new file)" if old is None else "")
    if not parts:
        return label, Content("(no change: the file holds this text already)")
    return label, Content.assemble(*parts).rstrip()


def _current(workspace: Path | None, path: str) -> tuple[str | None, str]:
    """The file's text now (None: there is none) and, when it cannot be compared, why."""
    if workspace is None:
        return None, "the workspace is not known here"
    try:
        data, size = Workspace(workspace).read(path, DIFF_LIMIT)
    except NoSuchFile:
        return None, ""
    except ToolError as exc:
        return None, f"the current file cannot be read: {exc}"
    except OSError as exc:
        return None, f"the current file cannot be read: {exc.strerror or exc}"
    if size > len(data):
        return None, f"the current file is {size:,} bytes, too large to compare"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return None, "the current file is not UTF-8 text"


def _text(text: str) -> Content:
    """Text from the model as shown: its control characters escaped, so the operator
    sees every character of what would run."""
    return Content(visible(text, lines=True))
