"""The breakpoints screen's table: every breakpoint set, one row each, with the keys that
add one and remove the selected one.

`a` asks for a new breakpoint (`Add`), `x` (or Delete) for the one under the cursor to be
removed (`Remove`); the screen opens the dialog, asks first and carries it out through
the bridge.
"""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.message import Message

from console.widgets.keyed_table import KeyedTable
from console.widgets.rules_table import when
from engine.domain.breakpoints import Breakpoint

COLUMNS = ("id", "kind", "where", "scope", "hits", "last hit", "made by", "made at", "state")


def where(point: Breakpoint) -> str:
    """What it pauses at: before each inference, before shell matching `git push*`."""
    if point.kind == "inference":
        return "before each inference"
    at = "before" if point.kind == "call" else "after"
    what = f"{at} {point.tool or 'any tool'}"
    return what + (f" matching {point.pattern}" if point.pattern is not None else "")


def reach(point: Breakpoint) -> str:
    """Which turns it pauses: thread chat:main, group task, room, once (thread chat:main)."""
    if point.scope == "thread":
        return f"thread {point.thread_id}"
    if point.scope == "group":
        return f"group {point.group}"
    if point.scope == "once":
        return f"once (thread {point.thread_id})" if point.thread_id else "once"
    return "room"


def point_cells(point: Breakpoint) -> tuple[str, ...]:
    """One breakpoint as the table's columns."""
    return (point.id, point.kind, where(point), reach(point), str(point.hits),
            when(point.last_hit, "never"), point.made_by, when(point.made_at),
            "spent" if point.spent else "active")  # fmt: skip


class BreakpointsTable(KeyedTable):
    """One row per breakpoint, oldest first."""

    BINDINGS = [
        *KeyedTable.BINDINGS,
        Binding("a", "add", "Add breakpoint"),
        Binding("x,delete", "remove", "Remove breakpoint"),
    ]

    class Add(Message):
        """The operator asked to set a new breakpoint (the screen opens the dialog)."""

    class Remove(Message):
        """The operator asked to remove `point` (the screen asks first)."""

        def __init__(self, point: Breakpoint) -> None:
            super().__init__()
            self.point = point

    def __init__(self, **kw: Any) -> None:
        super().__init__(COLUMNS, state_columns=("state",), give_way=("where", "scope", "made by"),
                         **kw)  # fmt: skip
        self.points: dict[str, Breakpoint] = {}

    def show_points(self, points: list[Breakpoint]) -> None:
        self.points = {p.id: p for p in points}
        self.show({p.id: point_cells(p) for p in points})

    def action_add(self) -> None:
        self.post_message(self.Add())

    def action_remove(self) -> None:
        key = self.current_key()
        if key is None or key not in self.points:
            self.notify("No breakpoint is selected.", severity="warning")
            return
        self.post_message(self.Remove(self.points[key]))
