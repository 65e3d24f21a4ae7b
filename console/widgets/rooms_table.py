"""The rooms of this machine, one row each: the room, its owner (kind, pid, whether it
serves or is gone), its turns running and waiting, the calls waiting for the operator,
and since when its owner serves. Drawn from the overview's followers (console/machine.py),
each redraw touching only the cells that changed."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.binding import Binding

from console.format import age
from console.widgets.keyed_table import KeyedTable
from engine.room import shown

if TYPE_CHECKING:
    from console.machine import Feed

COLUMNS = ("room", "owner", "kind", "pid", "running", "waiting", "decide", "since", "path")


class RoomsTable(KeyedTable):
    """One row a registered room, keyed by its folder; Enter picks it (the screen shows
    its calls alone)."""

    BINDINGS = [*KeyedTable.BINDINGS, Binding("enter", "select_cursor", "Its calls alone / all")]

    def __init__(self, **kw: Any) -> None:
        super().__init__(COLUMNS, state_columns=("owner",), give_way=("path", "room"), **kw)

    def show_rooms(self, feeds: Iterable[Feed], now: float, here: Path | None = None) -> None:
        """The rooms as followed now (`here`: this console's room, said in its row)."""
        self.show({str(f.room): cells(f, now, f.room == here) for f in feeds})


def cells(feed: Feed, now: float, here: bool = False) -> tuple[str, ...]:
    def n(value: int | None) -> str:
        return "-" if value is None else str(value)

    reg = feed.reg
    return (feed.label + (" (here)" if here else ""), feed.owner, reg.kind, str(reg.pid), n(feed.running), n(feed.waiting),
            n(feed.decisions), age(now - reg.started_at), shown(reg.room))  # fmt: skip
