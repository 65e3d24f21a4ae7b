"""Normalizing a planner's answer: whatever shape it comes in, a PlanDecision comes out.

Rules (the seed's, with the issue's corrections):
- `execution_commands` (a list) wins, then `tool_commands` (a list), then a single
  `tool_command` promoted to a list; commands without `tool_name` are dropped;
- `purpose` defaults to "Use <tool>"; arguments that are not an object become `{}`, and
  an object a tool or execution.db cannot take (nested past 64, see `storable`) stays as
  its JSON text, so that the call fails with the reason, as a model's unusable ones do;
- `todo_suggestion` falls back to the command's `next`, then to the decision's
  `todo_suggestion` or `next`; `next` mirrors it;
- `next_action` is read case-insensitively; missing or invalid, it is inferred from
  whether commands exist; a boolean `use_tool` is ANDed in;
- an answer that is not an object (or not JSON at all) means "response".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.domain.decisions import storable

NextAction = Literal["execute", "response"]
ACTION_RESULTS = "action_results:\n"  # how the final answer's request begins
_VALUE = re.compile(r'\s*:\s*"([^"]*)"')  # a complete string value after a key
_PARTIAL_VALUE = re.compile(r'\s*(:\s*("[^"]*)?)?')  # a value that may still be streaming


@dataclass(frozen=True)
class Command:
    """One tool use the planner asked for."""

    purpose: str
    tool_name: str
    tool_kwargs: dict[str, Any] | str  # text: arguments the call will refuse (see `_arguments`)
    todo_suggestion: str
    next: str


@dataclass(frozen=True)
class PlanDecision:
    next_action: NextAction
    commands: list[Command] = field(default_factory=list)
    use_tool: bool = True

    @property
    def executes(self) -> bool:
        return self.next_action == "execute" and self.use_tool and bool(self.commands)


def parse_planner_text(text: str) -> Any:
    """The planner's JSON value, tolerating code fences and prose around one object."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`")
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
    for candidate in (stripped, _outer_object(stripped)):
        if candidate is None:
            continue
        try:
            value = json.loads(candidate)
            json.dumps(value)  # nested too deeply to write back: absurd, treat as not JSON
            return value
        except (ValueError, RecursionError):  # bad JSON, huge numbers, absurd nesting
            continue
    return None


def _outer_object(text: str) -> str | None:
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if 0 <= start < end else None


class NextActionScanner:
    """Finds the top-level `next_action` of a JSON object as it streams, reading each
    character once. A `next_action` nested inside a command's arguments does not count."""

    def __init__(self) -> None:
        self.text = ""
        self._pos = 0  # next character to read
        self._depth = 0
        self._string_start: int | None = None  # inside a string that opened here
        self._escaped = False
        self._key_end: int | None = None  # just read the top-level key "next_action"

    def feed(self, piece: str) -> str | None:
        """Add streamed text; the value (lowercase) once it is complete, else None."""
        self.text += piece
        text = self.text
        while self._pos < len(text):
            if self._key_end is not None:
                match = _VALUE.match(text, self._key_end)
                if match:
                    return match.group(1).strip().lower()
                if _PARTIAL_VALUE.fullmatch(text, self._key_end):
                    return None  # the value is still streaming
                self._key_end = None  # not a string value: keep scanning
            ch = text[self._pos]
            self._pos += 1
            if self._string_start is not None:
                if self._escaped:
                    self._escaped = False
                elif ch == "\\":
                    self._escaped = True
                elif ch == '"':
                    key = text[self._string_start + 1 : self._pos - 1]
                    self._string_start = None
                    if self._depth == 1 and key == "next_action":
                        self._key_end = self._pos
            elif ch == '"':
                self._string_start = self._pos - 1
            elif ch in "{[":
                self._depth += 1
            elif ch in "}]":
                self._depth -= 1
        if self._key_end is not None:
            match = _VALUE.match(text, self._key_end)
            return match.group(1).strip().lower() if match else None
        return None


def early_next_action(text: str) -> str | None:
    """The top-level `next_action`'s value once it has streamed completely, else None."""
    return NextActionScanner().feed(text)


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def normalize(raw: Any) -> PlanDecision:
    """Turn any planner answer into a PlanDecision; never raises."""
    if not isinstance(raw, dict):
        return PlanDecision("response")
    if isinstance(raw.get("execution_commands"), list):
        items = raw["execution_commands"]
    elif isinstance(raw.get("tool_commands"), list):
        items = raw["tool_commands"]
    elif isinstance(raw.get("tool_command"), dict):
        items = [raw["tool_command"]]
    else:
        items = []
    fallback = _text(raw.get("todo_suggestion")) or _text(raw.get("next"))
    commands = []
    for item in items:
        if not isinstance(item, dict) or not _text(item.get("tool_name")):
            continue
        tool = _text(item["tool_name"])
        kwargs = item.get("tool_kwargs", item.get("arguments"))
        todo = _text(item.get("todo_suggestion")) or _text(item.get("next")) or fallback
        commands.append(
            Command(
                purpose=_text(item.get("purpose")) or f"Use {tool}",
                tool_name=tool,
                tool_kwargs=_arguments(kwargs),
                todo_suggestion=todo,
                next=todo,
            )
        )
    action = _text(raw.get("next_action")).lower()
    if action not in ("execute", "response"):
        action = "execute" if commands else "response"
    use_tool = raw.get("use_tool")
    return PlanDecision(action, commands, use_tool if isinstance(use_tool, bool) else True)  # type: ignore[arg-type]


def _arguments(value: Any) -> dict[str, Any] | str:
    """A command's arguments: an object a tool and execution.db can take; else its JSON text,
    which the call's admission refuses with the reason (nesting past 64 ended the turn in
    error when it reached the conversation); `{}` when it is not an object at all."""
    if not isinstance(value, dict):
        return {}
    try:
        storable(value, "the arguments JSON")
    except ValueError as exc:
        try:
            return json.dumps(value)
        except (ValueError, RecursionError):  # parse_planner_text lets no such value through
            return str(exc)
    return value


def action_results(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Execution records keyed by purpose; a repeated purpose gets " (2)", " (3)"."""
    out: dict[str, Any] = {}
    for record in records:
        key, n = record["purpose"], 1
        while key in out:
            n += 1
            key = f"{record['purpose']} ({n})"
        out[key] = {k: record[k] for k in ("tool_name", "success", "result", "error")}
    return out
