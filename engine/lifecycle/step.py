"""Step statuses: a step runs, then ends once, succeeded, failed or cancelled.

running -> succeeded | failed | cancelled

A step's row is written when it ends, so only the three ends are stored; `running` is
what a view shows for a step that started and has not ended yet.
"""

from __future__ import annotations

from enum import StrEnum


class StepStatus(StrEnum):
    RUNNING = "running"  # started, not ended (never stored: a step's row is written at its end)
    SUCCEEDED = "succeeded"  # ended: the inference answered, the round's calls settled
    FAILED = "failed"  # ended: an error cut the step short
    CANCELLED = "cancelled"  # ended: the turn was cancelled during the step
