"""The bodies of the fork and replay operations (engine/api/forkbook.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from engine.api.models import _Body
from engine.domain.decisions import storable


class ForkBody(_Body):
    """Fork `turn_id`'s thread at its step `step_id` (engine/domain/forks.py)."""

    turn_id: str = Field(min_length=1, max_length=512)
    step_id: int = Field(ge=0, lt=2**63)
    group: str | None = Field(None, min_length=1, max_length=200)  # None: the thread's
    thread_id: str | None = Field(None, min_length=1, max_length=512)  # None: one is made
    edits: dict[str, str] = Field(default_factory=dict, max_length=100)  # "seq" -> new text
    by: str = Field("operator", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _storable(self) -> ForkBody:
        for name in ("turn_id", "group", "thread_id", "by"):
            storable(getattr(self, name), name)
        storable(list(self.edits.values()), "edits")
        return self


class ReplayBody(_Body):
    """Replay `turn_id` on its recorded results in a scratch thread; `model` as
    `provider:model` (e.g. `offline:b`, `openai:gpt-4o`), None: the thread's."""

    turn_id: str = Field(min_length=1, max_length=512)
    model: str | None = Field(None, min_length=3, max_length=300, pattern=r"^[a-z]+:.+$")
    strategy: Literal["react", "direct", "plan_execute"] | None = None
    instructions: str | None = Field(None, max_length=100_000)
    group: str | None = Field(None, min_length=1, max_length=200)
    thread_id: str | None = Field(None, min_length=1, max_length=512)
    by: str = Field("operator", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _storable(self) -> ReplayBody:
        for name in ("turn_id", "model", "instructions", "group", "thread_id", "by"):
            storable(getattr(self, name), name)
        return self
