"""The channels screen: every loop (server, pulse, hook listener) and channel with its state
(up, failing, last poll or delivery, errors, lag), and the answers owed to the channels
with theirs (pending, retrying, sent, dead, dropped).

It reads through the bridge (the runtime's client: this process's or the owner's) when
opened, `REFRESH` times a second while shown, and again when a DeliveryChanged event
arrives (the main screen tells it). On the deliveries table `r`
retries the selected dead delivery and `x` drops it, each after a confirmation whose
default is No; `o` opens the rooms overview (console/screens/rooms.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen

from console.bridge import Bridge
from console.format import counted, set_title
from console.screens.confirm import ConfirmScreen
from console.widgets.channel_tables import DeliveriesTable, LoopsTable, clock_time
from console.widgets.key_bar import KeyBar
from console.widgets.text import Static

if TYPE_CHECKING:
    from engine.api.models import DeliveryRow

REFRESH = 1  # readings a second while a screen is shown
STATES = ("pending", "retrying", "sent", "dead", "dropped")
LIMIT = 200  # deliveries listed, newest first


class ChannelsScreen(Screen[None]):
    """Opened by `l` (or the palette's "Channels"); Esc or q closes it."""

    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("o", "rooms", "Rooms on this machine"),
    ]

    def __init__(self, bridge: Bridge, clock: Callable[[], float]) -> None:
        super().__init__()
        self.bridge, self.clock = bridge, clock
        self.readings = 0  # how many times the screen read the channels (tests look)

    def compose(self) -> ComposeResult:
        yield Static(id="channels-summary")
        with Vertical(id="loops-pane", classes="pane"):
            yield LoopsTable(id="loops")
        with Vertical(id="deliveries-pane", classes="pane"):
            yield DeliveriesTable(id="deliveries")
        yield Static(
            "A channel's answers go out in order per thread, retried with backoff; dead ones "
            "wait for you: r retries the selected one, x drops it. o: the machine's rooms.",
            classes="hint", id="channels-hint",
        )  # fmt: skip
        yield KeyBar()

    def on_mount(self) -> None:
        set_title(self.query_one("#loops-pane"), "Loops and channels")
        set_title(self.query_one("#deliveries-pane"), "Deliveries")
        self.refresh_view()
        self.set_interval(1 / REFRESH, self.refresh_view, name="channels")
        self.query_one(DeliveriesTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_rooms(self) -> None:
        from console.screens.rooms import RoomsScreen  # (loaded on use)

        room = getattr(self.app, "room", None)
        self.app.push_screen(RoomsScreen(self.clock, getattr(room, "path", None)))

    def refresh_view(self) -> None:
        """Read the channels and deliveries (in a worker: an attached console asks the
        owner) and redraw."""
        self.run_worker(self._refresh, group="channels", exclusive=True)  # type: ignore[arg-type]

    async def _refresh(self) -> None:
        summary = self.query_one("#channels-summary", Static)
        try:
            view = await self.bridge.api.channels()
            rows = await self.bridge.api.deliveries(None, LIMIT)
        except Exception as exc:  # no runtime, an owner gone: said on the screen
            summary.update(f" channels: {exc}")
            return
        self.readings += 1
        now = self.clock()
        up = sum(s.state == "up" for s in view.channels)
        failing = sum(s.state == "failing" for s in view.channels)
        counts = " · ".join(f"{view.deliveries.get(s, 0)} {s}" for s in STATES)
        worker = "" if view.delivering else " (the delivery worker is not running)"
        n = len(view.channels)
        summary.update(f" {n} channel{'' if n == 1 else 's'}, {up} up, {failing} failing · "
                       f"deliveries: {counts}{worker}")  # fmt: skip
        self.query_one(LoopsTable).show_loops([*view.loops, *view.channels], now)
        self.query_one(DeliveriesTable).show_deliveries(rows, now)
        title = f"Deliveries ({sum(view.deliveries.values())})"
        pane = self.query_one("#deliveries-pane")
        set_title(pane, title)

    @on(DeliveriesTable.Retry)
    def retry(self, event: DeliveriesTable.Retry) -> None:
        event.stop()
        self._operate(event.delivery, "retry")

    @on(DeliveriesTable.Drop)
    def drop(self, event: DeliveriesTable.Drop) -> None:
        event.stop()
        self._operate(event.delivery, "drop")

    @work(group="deliveries")
    async def _operate(self, d: DeliveryRow, what: str) -> None:
        can = ("dead",) if what == "retry" else ("dead", "retrying")
        if d.state not in can:
            self.notify(f"Delivery {d.id} is {d.state}: only a {' or '.join(can)} one can be "
                        f"{'retried' if what == 'retry' else 'dropped'}.",
                        title="Nothing done", severity="warning")  # fmt: skip
            return
        about = (
            f"its answer to {d.channel} on {d.thread_id} (turn {d.turn_id}), made "
            f"{clock_time(d.created_at)}, tried {counted(d.tries, 'time')}: {d.last_error or 'no error'}"
        )
        question = (f"Send delivery {d.id} again? {about}. It is tried afresh." if what == "retry"
                    else f"Drop delivery {d.id}? {about}. It is never sent (kept, marked dropped).")  # fmt: skip
        ok = await self.app.push_screen_wait(ConfirmScreen(
            question, yes="Retry" if what == "retry" else "Drop", no="Keep as is"))  # fmt: skip
        if not ok:
            return
        try:
            if what == "retry":
                row = await self.bridge.api.retry_delivery(d.id)
            else:
                row = await self.bridge.api.drop_delivery(d.id)
        except Exception as exc:  # shown to the operator, never a crash
            self.notify(f"Delivery {d.id} was not {'retried' if what == 'retry' else 'dropped'}:"
                        f" {exc}", severity="error")  # fmt: skip
        else:
            self.notify(f"Delivery {row.id}: {row.state}.", title="Deliveries")
        self.refresh_view()
