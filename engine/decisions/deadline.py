"""How long a suspended call may wait for a decision, and what its deadline decides.

agentdeck.toml's `[approvals]` gives a default deadline, one per thread group
(`[approvals.groups.NAME]`) and one per tool (`[approvals.tools.NAME]`); the most specific
applies (tool, then group, then the default), counted from when the call started waiting.
A call waiting for a review after a crash has no deadline. The timer that decides calls at
their deadline is engine/services/deadlines.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.config import ApprovalsConfig, OnDeadline
from engine.domain.events import CallChanged, Event
from engine.lifecycle import CallStatus
from engine.lifecycle.call import Awaiting


@dataclass(frozen=True)
class Deadline:
    """The deadline that applies to one call: after how long, what then, and where it is
    configured."""

    seconds: float
    on_deadline: OnDeadline
    source: str  # "approvals.tools.shell", "approvals.groups.task" or "approvals"


def deadline_for(approvals: ApprovalsConfig, tool: str, group: str | None) -> Deadline | None:
    """The most specific deadline for a call of `tool` in a thread of `group` (None: it may
    wait for ever). `on_deadline` is likewise the most specific one set."""
    levels = [(approvals.tools.get(tool), f"approvals.tools.{tool}")]
    if group is not None:
        levels.append((approvals.groups.get(group), f"approvals.groups.{group}"))
    seconds, source, action = approvals.deadline, "approvals", None
    for settings, where in levels:
        if settings is not None and settings.deadline is not None:
            seconds, source = settings.deadline, where
            break
    for settings, _ in levels:
        if settings is not None and settings.on_deadline is not None:
            action = settings.on_deadline
            break
    if seconds is None or math.isinf(seconds):
        return None
    return Deadline(seconds, action or approvals.on_deadline, source)


def deadline_of(
    approvals: ApprovalsConfig, tool: str, group: str | None, awaiting: Awaiting | None
) -> Deadline | None:
    """The deadline of a suspended call (None: it may wait for ever; a call under review
    after a crash always may, and so may a breakpoint's pause)."""
    if awaiting in ("review", "breakpoint"):
        return None
    return deadline_for(approvals, tool, group)


def stamp(event: Event, approvals: ApprovalsConfig, group: str | None) -> Event:
    """`event`, with its deadline when it says a call started waiting."""
    if not isinstance(event, CallChanged) or event.status != CallStatus.SUSPENDED:
        return event
    deadline = deadline_of(approvals, event.tool, group, event.awaiting)
    if deadline is None:
        return event
    when = event.at + deadline.seconds
    return event.model_copy(update={"deadline_at": when, "on_deadline": deadline.on_deadline})
