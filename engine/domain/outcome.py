"""Where a turn stands: the CLI's `--json` object and the API's answer (read by
`engine.store.outcome`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TurnOutcome:
    """Where a turn stands: the CLI's `--json` object."""

    turn_id: str
    thread_id: str
    status: str
    reason: str | None
    detail: str | None
    text: str
    pending: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    input_tokens: int = 0
    output_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "thread_id": self.thread_id,
            "status": self.status,
            "reason": self.reason,
            "detail": self.detail,
            "text": self.text,
            "pending": self.pending,
            "calls": self.calls,
        }
