"""The bodies of the breakpoint operations (`breakpoints`, `add_breakpoint`,
`remove_breakpoint`), apart from engine/api/models.py: they need engine/domain/
breakpoints.py, which a client that never sets one does not load."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from engine.api.models import _Body
from engine.domain.breakpoints import Breakpoint
from engine.domain.decisions import storable


class NewBreakpoint(_Body):
    """A breakpoint an operator sets (engine/domain/breakpoints.py): before an inference,
    before a call or after a result of `tool` (None: any) whose arguments match `pattern`
    (the rules' patterns), for the next pause only (`once`), a thread, a group or the room."""

    kind: Literal["inference", "call", "result"]
    tool: str | None = Field(None, min_length=1, max_length=200)
    pattern: str | None = Field(None, max_length=4096)
    scope: Literal["once", "thread", "group", "room"] = "room"
    thread_id: str | None = Field(None, min_length=1, max_length=512)
    group: str | None = Field(None, min_length=1, max_length=200)
    reason: str = Field("", max_length=10_000)
    made_by: str = Field("operator", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _storable(self) -> NewBreakpoint:
        for name in ("tool", "pattern", "thread_id", "group", "reason", "made_by"):
            storable(getattr(self, name), name)
        return self


class RemoveBody(_Body):
    by: str = Field("operator", min_length=1, max_length=200)


class Removed(_Body):
    """A breakpoint is removed: no turn pauses at it from now on (kept, marked); pauses it
    made already wait for their decision."""

    breakpoint: Breakpoint
    removed_by: str
    removed_at: float
