"""Every state as a glyph and a word, so no state is shown by colour alone (NO_COLOR too).

The style name is the component class a widget uses to colour it from the theme's
`$state-*` variables.
"""

from __future__ import annotations

from typing import NamedTuple


class Look(NamedTuple):
    """How one state is drawn: glyph, word, and the component class that colours it."""

    glyph: str
    word: str
    style: str


_LOOKS = {
    "new": Look("·", "new", "state--muted"),
    "running": Look("▶", "running", "state--running"),
    "waiting": Look("⏸", "waiting", "state--waiting"),
    "suspended": Look("◆", "suspended", "state--suspended"),
    "resuming": Look("↻", "resuming", "state--running"),
    "succeeded": Look("✔", "succeeded", "state--succeeded"),
    "done": Look("✔", "done", "state--succeeded"),
    "failed": Look("✖", "failed", "state--failed"),
    "error": Look("✖", "error", "state--failed"),
    "cancelled": Look("⊘", "cancelled", "state--cancelled"),
    # thread groups and threads in the scheduler view
    "active": Look("●", "active", "state--succeeded"),
    "paused": Look("‖", "paused", "state--waiting"),
    "idle": Look("○", "idle", "state--muted"),
}

STATE_CLASSES = frozenset(look.style for look in _LOOKS.values())


def look(status: str, reason: str | None = None) -> Look:
    """The look of a step, call or turn status; a done turn is drawn by its reason."""
    if status == "done" and reason and reason != "natural":
        if reason == "cancelled":
            return _LOOKS["cancelled"]
        return Look("✖", reason.removeprefix("stopped:"), "state--failed")
    return _LOOKS.get(status, Look("?", status, "state--muted"))
