"""Thread groups as the console sees them: a thread's group and the timeline's group filter.

Runtime events name a thread, not its group, so the console derives the group from the
thread id's prefix, as the engine's `scheduler.group_for` does from a message's origin
(the pulse loop names its threads `task:…`, `chore:…` and `will:…`; everything else is
chat). A message that names another group in `meta.group` is not seen here.
"""

from __future__ import annotations

GROUPS = ("chat", "task", "chore", "will")
FILTERS = ("", *GROUPS)  # "" shows every group
_PREFIXED = frozenset(GROUPS[1:])


def group_of(thread_id: str) -> str:
    """The group of a thread, from its id's prefix: task:, chore:, will:, else chat."""
    prefix = thread_id.partition(":")[0]
    return prefix if prefix in _PREFIXED else "chat"


def next_filter(current: str) -> str:
    """The group filter after `current`: all → chat → task → chore → will → all."""
    index = FILTERS.index(current) if current in FILTERS else 0
    return FILTERS[(index + 1) % len(FILTERS)]
