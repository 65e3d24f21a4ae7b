"""The shell tool's result as its text carries it: a JSON object with `exit_code`,
`stdout` and `stderr` (engine/tools/builtin.py writes it). Read here once, for whoever
shows it or speaks of it (the console's chat, the offline model)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ShellResult:
    exit_code: Any
    stdout: str
    stderr: str


def shell_result(text: str) -> ShellResult | None:
    """`text` as a shell result, or None when it is not one."""
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not (isinstance(value, dict) and "exit_code" in value and "stdout" in value):
        return None
    return ShellResult(value["exit_code"], str(value.get("stdout") or ""),
                       str(value.get("stderr") or ""))  # fmt: skip
