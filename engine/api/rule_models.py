"""The bodies of the rule operations (`rules`, `add_rule`, `revoke_rule`), apart from
engine/api/models.py: they need engine/domain/rules.py's `Rule`, which a client that never
touches a rule does not load."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from engine.api.models import _Body
from engine.domain.decisions import storable
from engine.domain.rules import Rule


class NewRule(_Body):
    """A rule an operator adds (`agentdeck rules add`): engine/domain/rules.py says how its
    pattern matches; `expires_at` is Unix seconds."""

    effect: Literal["allow", "ask", "deny"]
    tool: str = Field(min_length=1, max_length=200)
    pattern: str | None = Field(None, max_length=4096)  # None: any arguments
    scope: Literal["once", "thread", "room"] = "room"
    thread_id: str | None = Field(None, min_length=1, max_length=512)
    # a finite time up to the year 9999 (NaN or 1e400 made a rule that never expired)
    expires_at: float | None = Field(None, ge=0, le=253_402_300_799, allow_inf_nan=False)
    reason: str = Field("", max_length=10_000)
    made_by: str = Field("operator", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _storable(self) -> NewRule:
        for name in ("tool", "pattern", "thread_id", "reason", "made_by"):
            storable(getattr(self, name), name)
        return self


class RevokeBody(_Body):
    by: str = Field("operator", min_length=1, max_length=200)


class Revoked(_Body):
    """A rule of execution.db is revoked: it decides no call from now on (kept, marked)."""

    rule: Rule
    revoked_by: str
    revoked_at: float
