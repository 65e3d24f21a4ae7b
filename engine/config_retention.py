"""`[retention]` of agentdeck.toml: how much finished history a room keeps (issue 35).

Off by default: a room keeps everything until its operator says otherwise. `days` prunes
turns that finished more than that many days ago; `gb` prunes the oldest finished turns
while the room's store holds more than that many gigabytes. Pruning keeps each turn's
summary and decisions (engine/services/retention.py says what goes and what stays); the
owner applies these settings by itself, at start and then every `every_hours`, and
`agentdeck gc` applies them now.

A module of its own so that engine/config.py only names it (`Config.retention`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

GB = 1024**3  # bytes in the `gb` of the settings


class RetentionConfig(BaseModel):
    """`[retention]`: finished turns older than `days`, and the oldest finished turns past
    `gb` gigabytes, lose their steps and events (None: no such limit)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    days: float | None = Field(None, gt=0, le=36_500)
    gb: float | None = Field(None, gt=0, le=1_000_000)
    every_hours: float = Field(1.0, ge=0.01, le=24 * 7)  # between two passes of the owner

    @field_validator("days", "gb", "every_hours", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        if isinstance(value, bool):  # (pydantic reads true as 1)
            raise ValueError("give a number, not true or false")
        return value

    @property
    def active(self) -> bool:
        """Whether the owner prunes by itself (some limit is set)."""
        return self.days is not None or self.gb is not None

    @property
    def max_bytes(self) -> int | None:
        return None if self.gb is None else int(self.gb * GB)
