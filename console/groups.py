"""Thread groups as the console sees them: a thread's group and the timeline's group filter
(and its channel filter: the channels whose turns it shows).

A turn's events name its thread's group (`TurnStarted.group`, `TurnChanged.group`), and the
state keeps it on the turn's row and its steps' rows; rows read from history get it from
the room's threads. Only a row that has none (an event stored before events said it) falls
back to a guess from the thread id's prefix, as the engine's `scheduler.group_for` guesses
from a message's origin (the pulse loop names its threads `task:…`, `chore:…` and `will:…`;
everything else is chat), which misses a group named in a message's `meta.group`.
"""

from __future__ import annotations

from collections.abc import Iterable

GROUPS = ("chat", "task", "chore", "will")
FILTERS = ("", *GROUPS)  # "" shows every group
_PREFIXED = frozenset(GROUPS[1:])


def group_of(thread_id: str, said: str | None = None) -> str:
    """The group of a thread: the one the runtime `said`, else a guess from its id's
    prefix: task:, chore:, will:, else chat."""
    if said:
        return said
    prefix = thread_id.partition(":")[0]
    return prefix if prefix in _PREFIXED else "chat"


def next_filter(current: str) -> str:
    """The group filter after `current`: all → chat → task → chore → will → all."""
    index = FILTERS.index(current) if current in FILTERS else 0
    return FILTERS[(index + 1) % len(FILTERS)]


def channel_filters(seen: Iterable[str | None]) -> list[str]:
    """The timeline's channel filters: all (""), the console's, then each channel `seen`
    on a turn, by name."""
    return ["", "console", *sorted({c for c in seen if c and c != "console"})]


def next_channel(current: str, filters: list[str]) -> str:
    """The channel filter after `current` among `filters` (from all again after the last,
    or when `current` is no longer among them)."""
    index = filters.index(current) if current in filters else len(filters) - 1
    return filters[(index + 1) % len(filters)]
