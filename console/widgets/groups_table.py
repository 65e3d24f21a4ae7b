"""The scheduler view's thread groups, with the keys that change the selected group.

`p` pauses or resumes it, `+` and `-` raise and lower its running budget, `b` sets its
daily spending budget. The table only says what the operator asked for (`Configure`,
`SetBudget`); the screen asks and applies it through the bridge.

Each row says what the group spent today and against which daily budget, and when that
budget holds its new turns, that it is held and why (its queued requests say it too).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.binding import Binding
from textual.message import Message

from console.spend import budget_text
from console.widgets.keyed_table import KeyedTable, wrapped
from engine.domain.usage import spent_text
from engine.services.scheduler import GroupStats

COLUMNS = ("group", "priority", "running", "queued", "waiting", "state", "today", "budget",
           "overflow", "coalesce", "held because")  # fmt: skip
HELD_LINES = 3  # lines a held group's why may wrap over when its column is narrow


class GroupsTable(KeyedTable):
    """One row per thread group, highest priority first."""

    BINDINGS = [
        *KeyedTable.BINDINGS,
        Binding("p", "toggle_pause", "Pause/resume group"),
        Binding("plus,equals_sign", "budget(1)", "Raise budget"),
        Binding("minus", "budget(-1)", "Lower budget"),
        Binding("b", "daily_budget", "Daily budget", tooltip="Set the group's spending budget"),
    ]

    class Configure(Message):
        """Change `group`: pause or resume it (`toggle_pause`) or move its budget by `delta`."""

        def __init__(self, group: str, *, toggle_pause: bool = False, delta: int = 0) -> None:
            super().__init__()
            self.group, self.toggle_pause, self.delta = group, toggle_pause, delta

    class SetBudget(Message):
        """Set the daily spending budget of `group` (the screen asks how much)."""

        def __init__(self, group: str) -> None:
            super().__init__()
            self.group = group

    def __init__(self, **kw: Any) -> None:
        super().__init__(COLUMNS, state_columns=("state",), give_way=("held because",), **kw)

    def show_groups(self, groups: Iterable[GroupStats]) -> None:
        self.show({
            g.name: (g.name, str(g.priority), f"{g.running}/{g.max_running_turns}",
                     f"{g.queued}/{g.max_queued_turns}", str(g.waiting),
                     "paused" if g.paused else "held" if g.held else "active",
                     spent_text(g.today) if g.today is not None else "—",
                     budget_text(g.today, g.budget), g.overflow_policy, g.coalesce,
                     (g.held or "").removeprefix(f"group {g.name}'s "))  # (the row says whose)
            for g in groups
        })  # fmt: skip

    def row_height(self, key: str, cells: tuple[str, ...]) -> int:
        """A held group's why wraps over up to HELD_LINES lines rather than be cut."""
        why, room = cells[-1], self.room_of("held because")
        if not why or room is None:
            return self.lines
        return max(self.lines, min(HELD_LINES, len(wrapped(why, max(room, 2)))))

    def _selected(self) -> str | None:
        key = self.current_key()
        if key is None:
            self.notify("No group is selected.", severity="warning")
        return key

    def action_toggle_pause(self) -> None:
        if (name := self._selected()) is not None:
            self.post_message(self.Configure(name, toggle_pause=True))

    def action_budget(self, delta: int) -> None:
        if (name := self._selected()) is not None:
            self.post_message(self.Configure(name, delta=delta))

    def action_daily_budget(self) -> None:
        if (name := self._selected()) is not None:
            self.post_message(self.SetBudget(name))
