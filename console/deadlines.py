"""A waiting call's deadline (engine.services.deadlines) as the decision queue and the card
show it: the time left, and whether it is near (its row warns in the last minute, the
last fifth of a shorter deadline)."""

from __future__ import annotations

import math

from console.state import CallRow

WARN_LAST = 60.0  # seconds before a deadline its row warns (a fifth of a shorter deadline)


def time_left(seconds: float) -> str:
    """Time to a deadline as the queue shows it: 4m12s, 45s, 1h05m; "due now" once passed."""
    if seconds <= 0:
        return "due now"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def deadline_near(call: CallRow, now: float) -> bool:
    """Whether `call`'s deadline is in its last minute (the last fifth of a short one)."""
    if call.deadline_at is None:
        return False
    whole = call.deadline_at - call.updated_at
    return call.deadline_at - now <= min(WARN_LAST, whole / 5)


def left(call: CallRow, now: float, near: bool) -> str:
    """The `left` cell: the time to its deadline (marked ⚠ when near), else nothing."""
    if call.deadline_at is None:
        return ""
    return f"⚠ {time_left(call.deadline_at - now)}" if near else time_left(call.deadline_at - now)
