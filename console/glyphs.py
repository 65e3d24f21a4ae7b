"""Every state as a glyph and a word, so no state is shown by colour alone (NO_COLOR too).

The style name is the component class a widget uses to colour it from the theme's
`$state-*` variables. States are the engine's (`engine.lifecycle`: turn, call and step
statuses, a turn's end reason) plus the scheduler view's words for groups and threads
the rules screen's for rules, the channels screen's for loops and deliveries, the tools
screen's for MCP servers, and the rooms overview's for the owners of rooms.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.lifecycle import CallStatus, TurnStatus
from engine.lifecycle import turn as turn_lifecycle


class Look(NamedTuple):
    """How one state is drawn: glyph, word, and the component class that colours it."""

    glyph: str
    word: str
    style: str


# Keyed by the engine's members (string enums: a stored word finds its look too). A step's
# statuses are words of these: running, succeeded, failed, cancelled.
_LOOKS: dict[str, Look] = {
    CallStatus.NEW: Look("·", "new", "state--muted"),
    TurnStatus.RUNNING: Look("▶", "running", "state--running"),  # a call's and a step's too
    TurnStatus.WAITING: Look("⏸", "waiting", "state--waiting"),
    CallStatus.SUSPENDED: Look("◆", "suspended", "state--suspended"),
    "decided": Look("✓", "decided", "state--waiting"),  # a suspended call whose decision waits
    # a suspended call whose outcome a crash left unknown: it takes a review (!), not a decision
    "review": Look("⚠", "needs review", "state--failed"),
    CallStatus.RESUMING: Look("↻", "resuming", "state--running"),
    CallStatus.SUCCEEDED: Look("✔", "succeeded", "state--succeeded"),
    TurnStatus.DONE: Look("✔", "done", "state--succeeded"),
    CallStatus.FAILED: Look("✖", "failed", "state--failed"),
    turn_lifecycle.ERROR: Look("✖", "error", "state--failed"),  # a turn's end reason
    CallStatus.CANCELLED: Look("⊘", "cancelled", "state--cancelled"),
    # thread groups and threads in the scheduler view
    "active": Look("●", "active", "state--succeeded"),
    "paused": Look("‖", "paused", "state--waiting"),
    "held": Look("$", "held", "state--waiting"),  # by a spending budget, until raised
    "idle": Look("○", "idle", "state--muted"),
    # rules on the rules screen (and "active")
    "expired": Look("−", "expired", "state--muted"),
    "spent": Look("◌", "spent", "state--muted"),
    # loops and channels, and outbound deliveries, on the channels screen (issue 17)
    "up": Look("●", "up", "state--succeeded"),
    "starting": Look("◌", "starting", "state--running"),
    "failing": Look("✖", "failing", "state--failed"),
    "stopped": Look("○", "stopped", "state--muted"),
    "pending": Look("·", "pending", "state--running"),
    "retrying": Look("↻", "retrying", "state--waiting"),
    "sent": Look("✔", "sent", "state--succeeded"),
    "dead": Look("✖", "dead", "state--failed"),
    "dropped": Look("⊘", "dropped", "state--cancelled"),
    # MCP servers on the tools screen (issue 34; and "starting", "up", "failed", "stopped")
    "restarting": Look("↻", "restarting", "state--failed"),  # it stopped: its tools fail now
    "not running": Look("○", "not running", "state--muted"),  # nobody owns the room
    # owners of the machine's rooms, on the rooms overview (issue 38; and "connecting")
    "serving": Look("●", "serving", "state--succeeded"),
    "owner gone": Look("✖", "owner gone", "state--failed"),  # its lock is free: it died
    "other owner": Look("◐", "other owner", "state--waiting"),  # a one-off holds the room
    "not answering": Look("?", "not answering", "state--waiting"),
    "connecting": Look("◌", "connecting", "state--running"),
}

STATE_CLASSES = frozenset(look.style for look in _LOOKS.values())


def look(status: str, reason: str | None = None) -> Look:
    """The look of a step, call or turn status; a done turn is drawn by its reason."""
    if status == TurnStatus.DONE and reason and reason != turn_lifecycle.NATURAL:
        if reason == turn_lifecycle.CANCELLED:
            return _LOOKS[CallStatus.CANCELLED]
        return Look("✖", reason.removeprefix(turn_lifecycle.STOPPED_PREFIX), "state--failed")
    return _LOOKS.get(status, Look("?", status, "state--muted"))
