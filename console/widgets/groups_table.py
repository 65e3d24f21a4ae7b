"""The scheduler view's thread groups, with the keys that change the selected group.

`p` pauses or resumes it, `+` and `-` raise and lower its running budget. The table only
says what the operator asked for (`Configure`); the screen applies it through the bridge.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.binding import Binding
from textual.message import Message

from console.widgets.keyed_table import KeyedTable
from engine.services.scheduler import GroupStats

COLUMNS = ("group", "priority", "running", "queued", "waiting", "state", "overflow", "coalesce")


class GroupsTable(KeyedTable):
    """One row per thread group, highest priority first."""

    BINDINGS = [
        *KeyedTable.BINDINGS,
        Binding("p", "toggle_pause", "Pause/resume group"),
        Binding("plus,equals_sign", "budget(1)", "Raise budget"),
        Binding("minus", "budget(-1)", "Lower budget"),
    ]

    class Configure(Message):
        """Change `group`: pause or resume it (`toggle_pause`) or move its budget by `delta`."""

        def __init__(self, group: str, *, toggle_pause: bool = False, delta: int = 0) -> None:
            super().__init__()
            self.group, self.toggle_pause, self.delta = group, toggle_pause, delta

    def __init__(self, **kw: Any) -> None:
        super().__init__(COLUMNS, state_columns=("state",), **kw)

    def show_groups(self, groups: Iterable[GroupStats]) -> None:
        self.show({
            g.name: (g.name, str(g.priority), f"{g.running}/{g.max_running_turns}",
                     f"{g.queued}/{g.max_queued_turns}", str(g.waiting),
                     "paused" if g.paused else "active", g.overflow_policy, g.coalesce)
            for g in groups
        })  # fmt: skip

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
