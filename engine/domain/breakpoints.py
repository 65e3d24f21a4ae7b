"""Breakpoints: where a turn pauses for an operator, as a debugger's do.

A breakpoint pauses a turn before an inference (`inference`), before a tool call
(`call`) or after a call's result (`result`); the last two for one tool (or any) and an
argument pattern, the rules' patterns (engine/domain/rules.py, read as an `ask` rule reads
them: any spelling of a matching command matches). Its scope is `once` (the next pause it
makes, then it is spent; for one thread if it names one), `thread`, `group` or `room`.

A pause is a suspended call of its own, of the pseudo-tool `breakpoint` (BREAKPOINT), with
what it paused on as its arguments (`PauseArgs`): so a turn waits only when every outcome
is suspended, the pause is durable across restarts, and it is decided in the same queue,
bound to what the operator saw and recorded as any decision is. The model never sees it.
From it the operator continues (`resume`), steps (`step`: one inference or one tool round,
then it pauses again), edits what it paused on (a `resume` or `step` with edited
arguments: the pending message, a held call's arguments, a held result) or cancels (the
turn ends `cancelled`). engine/turn/breaks.py carries these out.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engine.domain.rules import Rule, check_pattern

Kind = Literal["inference", "call", "result"]
Scope = Literal["once", "thread", "group", "room"]
KINDS: tuple[Kind, ...] = ("inference", "call", "result")
SCOPES: tuple[Scope, ...] = ("once", "thread", "group", "room")
BREAKPOINT = "breakpoint"  # the pseudo-tool of a pause
STEP = "step"  # what a pause made by stepping names as its breakpoint
# What each kind of pause lets an operator edit in its arguments.
EDITABLE = {"inference": "messages", "call": "calls", "result": "calls"}


def new_id() -> str:
    return f"b{uuid.uuid4().hex[:6]}"


class Breakpoint(BaseModel):
    """One breakpoint, as stored and listed (`hits` and `last_hit` as of the listing)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: Kind
    tool: str | None = Field(None, min_length=1, max_length=200)  # call, result: None is any
    pattern: str | None = None  # the rules' pattern for `tool`'s arguments (None: any)
    scope: Scope = "room"
    thread_id: str | None = None  # a thread breakpoint's thread (a once one's, if any)
    group: str | None = None  # a group breakpoint's group
    made_by: str = "operator"
    made_at: float | None = None
    reason: str = ""
    id: str = ""
    hits: int = 0
    last_hit: float | None = None

    @model_validator(mode="after")
    def _valid(self) -> Breakpoint:
        if self.scope == "thread" and not self.thread_id:
            raise ValueError("a thread breakpoint names its thread")
        if self.scope == "group" and not self.group:
            raise ValueError("a group breakpoint names its group")
        if self.scope in ("group", "room") and self.thread_id:
            raise ValueError(f"a {self.scope} breakpoint names no thread")
        if self.scope != "group" and self.group:
            raise ValueError("only a group breakpoint names a group")
        if self.kind == "inference" and (self.tool or self.pattern):
            raise ValueError("an inference breakpoint names no tool or pattern")
        if self.pattern is not None and not self.tool:
            raise ValueError("a pattern is for one tool's arguments: name the tool")
        if self.tool is not None:
            check_pattern(self.tool, self.pattern)
        return self

    @property
    def spent(self) -> bool:
        return self.scope == "once" and self.hits >= 1

    def covers(self, thread_id: str, group: str | None) -> bool:
        """Whether turns of `thread_id` (in `group`) are within its reach."""
        if self.scope == "group":
            return self.group == group
        return self.thread_id is None or self.thread_id == thread_id

    def matches(self, tool: str | None, args: Any, workspace: Path | None) -> bool:
        """Whether a call of `tool` with `args` is one it pauses at (an inference's: any)."""
        if self.tool is None:
            return True
        if tool != self.tool:
            return False
        probe = Rule(tool=self.tool, effect="ask", pattern=self.pattern)
        return probe.matches(args, workspace)

    def where(self) -> str:
        """What it pauses at, in a few words."""
        if self.kind == "inference":
            what = "before each inference"
        else:
            at = "before a call" if self.kind == "call" else "after a result"
            what = f"{at} of {self.tool or 'any tool'}"
            if self.pattern is not None:
                what += f" matching {self.pattern}"
        reach = {"once": "once", "thread": f"thread {self.thread_id}",
                 "group": f"group {self.group}", "room": "room"}[self.scope]  # fmt: skip
        if self.scope == "once" and self.thread_id:
            reach += f" (thread {self.thread_id})"
        return f"{what}, {reach}"

    def describe(self) -> str:
        return f"breakpoint {self.id} ({self.where()})"


def changes(shown: Any, edited: Any) -> list[tuple[str | int, str, Any]]:
    """What an operator's edit of a pause's arguments changes: (an entry's seq, "text",
    its text) for a pending message, (a held call's id, "args" or "result", the value) for
    a call; ValueError says why it cannot apply (only what a pause offers may change)."""
    shown = shown if isinstance(shown, dict) else {}
    at = shown.get("at")
    part = EDITABLE.get(str(at), "")
    if not isinstance(edited, dict) or _without(edited, part) != _without(shown, part):
        raise ValueError(
            f"only `{part}` of a breakpoint's pause can be edited; nothing was changed"
        )
    before, after = shown.get(part) or [], edited.get(part)
    if not isinstance(after, list) or len(after) != len(before):
        raise ValueError(f"`{part}` must keep its {len(before)} entries, in order")
    field = "text" if at == "inference" else "args" if at == "call" else "result"
    out: list[tuple[str | int, str, Any]] = []
    for old, new in zip(before, after, strict=True):
        if not isinstance(new, dict) or _without(new, field) != _without(old, field):
            what = "a pending message's text" if at == "inference" else f"a held call's {field}"
            raise ValueError(f"{what} can change, nothing else of it")
        if at == "inference" and not isinstance(new.get("text"), str):
            raise ValueError("a message's text is a string")
        if at == "call" and not isinstance(new.get("args"), dict):
            raise ValueError("a call's arguments are a JSON object")
        if new.get(field) != old.get(field):
            key = int(old["seq"]) if at == "inference" else str(old["call_id"])
            out.append((key, field, new.get(field)))
    return out


def _without(entry: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key}


class BreakBook:
    """The breakpoints a runtime pauses at, with their hits; changes are written by the
    caller (engine/api/breakbook.py), hits with the pause's call."""

    def __init__(self, points: Iterable[Breakpoint] = (), workspace: Path | None = None) -> None:
        self.workspace = workspace
        self._points: dict[str, Breakpoint] = {}
        for point in points:
            self.add(point)

    def load(self, points: Iterable[Breakpoint]) -> None:
        """Hold `points` (and no other), keeping hits counted here that the store does not
        have yet, so a once breakpoint never pauses twice."""
        held = dict(self._points)
        self._points.clear()
        for point in points:
            mine = held.get(point.id)
            if mine is not None and mine.hits > point.hits:
                point = point.model_copy(update={"hits": mine.hits, "last_hit": mine.last_hit})
            self.add(point)

    def add(self, point: Breakpoint) -> None:
        self._points[point.id] = point

    def get(self, point_id: str) -> Breakpoint | None:
        return self._points.get(point_id)

    def remove(self, point_id: str) -> Breakpoint | None:
        return self._points.pop(point_id, None)

    def listed(self) -> list[Breakpoint]:
        return sorted(self._points.values(), key=lambda p: (p.made_at or 0.0, p.id))

    def __bool__(self) -> bool:
        return bool(self._points)

    def hit(self, kind: Kind, thread_id: str, group: str | None, clock: Callable[[], float],
            tool: str | None = None, args: Any = None) -> Breakpoint | None:  # fmt: skip
        """The breakpoint that pauses here, its hit counted (as the returned copy says); None
        when none does. Narrower ones first (once, thread, group, room), then the older."""
        found = [p for p in self._points.values()
                 if p.kind == kind and not p.spent and p.covers(thread_id, group)
                 and p.matches(tool, args, self.workspace)]  # fmt: skip
        if not found:
            return None
        best = min(found, key=lambda p: (SCOPES.index(p.scope), p.made_at or 0.0, p.id))
        now = clock()
        used = best.model_copy(update={"hits": best.hits + 1, "last_hit": now})
        self._points[best.id] = used
        return used
