"""The channels screen's tables (loops and channels; outbound deliveries), redrawn from
the client's snapshots.

On the deliveries table `r` asks to retry the selected dead delivery and `x` (or Delete)
to drop it (`Retry`, `Drop`): the screen asks first and carries it out through the bridge.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.message import Message

from console.widgets.keyed_table import KeyedTable

if TYPE_CHECKING:
    from engine.api.models import DeliveryRow, LoopState

LOOP_COLUMNS = ("name", "loop", "kind", "group", "state", "last ok", "errors", "received",
                "rejected", "lag", "detail")  # fmt: skip
DELIVERY_COLUMNS = ("id", "state", "channel", "thread", "turn", "tries", "created",
                    "sent / next", "last error", "answer")  # fmt: skip


def clock_time(at: float | None, none: str = "—") -> str:
    """A time as the tables show it (local time, to the second)."""
    return none if at is None else datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")


def ago(at: float | None, now: float) -> str:
    if at is None:
        return "never"
    seconds = max(0.0, now - at)
    return f"{seconds:.0f}s ago" if seconds < 120 else f"{seconds / 60:.0f}m ago"


def loop_cells(s: LoopState, now: float) -> tuple[str, ...]:
    """One loop or channel as the table's columns; its last error, else where it serves
    (a socket by its name: the room is known)."""
    detail = {k: PurePath(v).name if k == "socket" else v for k, v in s.detail.items()}
    where = " ".join(f"{k}={v}" for k, v in detail.items())
    last = "—" if s.kind == s.loop else ago(s.last_ok, now)  # a loop row has no last poll
    return (s.name, s.loop, s.kind, s.group or "—", s.state, last, str(s.errors),
            str(s.received), str(s.rejected), "—" if s.lag is None else f"{s.lag:.1f}s",
            s.last_error or where)  # fmt: skip


def delivery_cells(d: DeliveryRow, now: float) -> tuple[str, ...]:
    if d.state == "sent":
        when = clock_time(d.sent_at)
    elif d.state in ("pending", "retrying"):
        when = "now" if d.next_at <= now else f"in {d.next_at - now:.0f}s"
    else:
        when = "—"
    answer = " ".join(d.text.split())
    return (str(d.id), d.state, d.channel, d.thread_id, d.turn_id, str(d.tries),
            clock_time(d.created_at), when, d.last_error or "", answer)  # fmt: skip


class LoopsTable(KeyedTable):
    """One row per loop (server, pulse, hook listener), then one per channel."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(LOOP_COLUMNS, state_columns=("state",), give_way=("detail",), **kw)

    def show_loops(self, loops: list[LoopState], now: float) -> None:
        self.show({f"{s.loop}:{s.name}": loop_cells(s, now) for s in loops})


class DeliveriesTable(KeyedTable):
    """The answers owed to channels, newest first."""

    BINDINGS = [
        *KeyedTable.BINDINGS,
        Binding("r", "retry", "Retry delivery"),
        Binding("x,delete", "drop", "Drop delivery"),
    ]

    class Retry(Message):
        """The operator asked to send `delivery` again (the screen asks first)."""

        def __init__(self, delivery: DeliveryRow) -> None:
            super().__init__()
            self.delivery = delivery

    class Drop(Message):
        """The operator asked to give up on `delivery` (the screen asks first)."""

        def __init__(self, delivery: DeliveryRow) -> None:
            super().__init__()
            self.delivery = delivery

    def __init__(self, **kw: Any) -> None:
        super().__init__(DELIVERY_COLUMNS, state_columns=("state",),
                         give_way=("answer", "last error", "thread"), **kw)  # fmt: skip
        self.deliveries: dict[str, DeliveryRow] = {}

    def show_deliveries(self, rows: list[DeliveryRow], now: float) -> None:
        self.deliveries = {str(d.id): d for d in rows}
        self.show({str(d.id): delivery_cells(d, now) for d in rows})

    def selected(self) -> DeliveryRow | None:
        key = self.current_key()
        return self.deliveries.get(key) if key is not None else None

    def action_retry(self) -> None:
        if (d := self._chosen()) is not None:
            self.post_message(self.Retry(d))

    def action_drop(self) -> None:
        if (d := self._chosen()) is not None:
            self.post_message(self.Drop(d))

    def _chosen(self) -> DeliveryRow | None:
        d = self.selected()
        if d is None:
            self.notify("No delivery is selected.", severity="warning")
        return d
