"""The rooms overview and their inbox (`o`): every room on this machine, and one queue of
every room's waiting calls, needs input first, decided from here.

The rooms are the machine's registry's (engine/rooms_registry.py), each followed live by
one light client of its own (console/machine.py): its owner (serving, or `owner gone`
within a second of its death), its turns running and waiting, its calls to decide. The
inbox below is the decision queue (console/widgets/decision_queue.py) over every serving
room's waiting calls, ordered needs input first: a call a deadline will decide first, the
nearest deadline first; then the longest waiting (engine/api/machine.py). A call's thread
is named with its room (`alpha › task:deploy`). Its keys are the queue's, and the card
beside it (console/widgets/decision_card.py) shows the call under the cursor whole, with
the card's keys (Tab reaches it); each decision goes through that room's own bridge and
`Decider` (console/screens/decide_flow.py), bound to the arguments shown, to its room's
owner. Enter on a room shows its calls alone (Enter again, or Esc, every room's); `P`
forgets the rooms whose owner is gone; Esc or q closes, and the followers with it.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable

from console.bridge import Bridge
from console.format import set_title
from console.machine import Feed, Machine
from console.screens.call_detail import CallDetailScreen
from console.screens.decide_flow import Decider
from console.state import CallRow
from console.widgets.decision_card import DecisionCard
from console.widgets.decision_queue import DecisionQueue
from console.widgets.key_bar import KeyBar
from console.widgets.rooms_table import RoomsTable
from console.widgets.text import Static

EMPTY = "no call waits for the operator in any room"
HINT = ("Every room whose owner serves it on this machine (a console, agentdeck run or "
        "start). The inbox: every room's waiting calls, needs input first (the nearest "
        "deadline, then the longest waiting); its keys decide in the call's own room. "
        "Enter on a room: its calls alone. P forgets rooms whose owner is gone.")  # fmt: skip


class RoomsScreen(Screen[None]):
    """Opened by `o` (the main screen, the channels screen, or the palette)."""

    DEFAULT_CSS = """
    RoomsScreen #machine-summary { height: 1; background: $panel; color: $foreground; }
    RoomsScreen #machine-rooms-pane { height: auto; max-height: 40%; }
    RoomsScreen #machine-rooms { height: auto; max-height: 14; }
    RoomsScreen #machine-lower { height: 1fr; }
    RoomsScreen #machine-inbox-pane { width: 3fr; height: 1fr; }
    RoomsScreen #machine-inbox { height: 1fr; }
    RoomsScreen #machine-card { width: 2fr; max-height: 100%; }
    RoomsScreen.-narrow #machine-lower { layout: vertical; }
    RoomsScreen.-narrow #machine-inbox-pane { width: 1fr; }
    RoomsScreen.-narrow #machine-card { width: 1fr; max-height: 50%; }
    RoomsScreen #machine-hint { margin: 0 1; height: auto; color: $foreground-muted; }
    RoomsScreen.-narrow #machine-hint, RoomsScreen.-short #machine-hint { display: none; }
    """
    BINDINGS = [
        Binding("escape", "back", "Every room / close"),
        Binding("q", "close", "Close"),
        Binding("d", "inbox", "Inbox", show=False),
        Binding("P", "prune", "Forget rooms whose owner is gone"),
    ]

    def __init__(self, clock: Callable[[], float], here: Path | None = None, *,
                 keys_clock: Callable[[], float] | None = None,
                 where: Path | None = None) -> None:  # fmt: skip
        """`here`: this console's room (its row says so); `where`: the registry's folder
        (default: the user's, engine/rooms_registry.py)."""
        super().__init__()
        self.clock, self.here = clock, here
        self.keys_clock = keys_clock
        self.machine = Machine(self, where)
        self.only: Path | None = None  # the room whose calls alone the inbox shows
        self._where: dict[str, Feed] = {}  # call id -> its room, as the inbox drew it
        self._shown: dict[str, CallRow] = {}  # call id -> the row the inbox drew
        self._redraw_due = False

    def compose(self) -> ComposeResult:
        keys_clock = self.keys_clock or getattr(getattr(self.app, "main", None), "keys_clock", None)
        timed = {} if keys_clock is None else {"keys_clock": keys_clock}
        yield Static(id="machine-summary")
        with Vertical(id="machine-rooms-pane", classes="pane"):
            yield RoomsTable(id="machine-rooms")
        with Horizontal(id="machine-lower"):
            with Vertical(id="machine-inbox-pane", classes="pane"):
                yield DecisionQueue(self.clock, id="machine-inbox", **timed)  # type: ignore[arg-type]
            yield DecisionCard(self.clock, id="machine-card", **timed)  # type: ignore[arg-type]
        yield Static(HINT, id="machine-hint")
        yield KeyBar()

    def on_mount(self) -> None:
        set_title(self.query_one("#machine-rooms-pane"), "Rooms on this machine")
        self._titles()
        self.run_worker(self.machine.run(), group="machine", exit_on_error=False)
        self.set_interval(1.0, self._tick, name="ages")
        self.query_one(DecisionQueue).focus()

    # -- drawing ---------------------------------------------------------------------------

    @on(Machine.Changed)
    def machine_changed(self) -> None:
        self.machine.took()
        self._redraw_soon()

    @on(Bridge.Changed)
    def calls_changed(self, event: Bridge.Changed) -> None:
        event.stop()
        self.machine.take()
        self._redraw_soon()

    def _redraw_soon(self) -> None:
        """One redraw for every change already queued (each room's bridge posts its own)."""
        if not self._redraw_due:
            self._redraw_due = True
            self.call_later(self.redraw)

    def redraw(self) -> None:
        """The rooms, the summary, and the inbox (the card follows the cursor)."""
        self._redraw_due = False
        feeds = list(self.machine.feeds.values())
        for feed in feeds:
            if feed.decider is None or feed.decider.bridge is not feed.bridge:
                feed.decider = Decider(self, feed.bridge, self.redraw, self._act, feed.workspace)
        if self.only is not None and self.only not in self.machine.feeds:
            self.only = None
        self.query_one(RoomsTable).show_rooms(feeds, self.clock(), self.here)
        waiting = self.machine.waiting(self.only)
        self._where = {call.call_id: feed for feed, call in waiting}
        self._shown = {call.call_id: feed.shown(call) for feed, call in waiting}
        queue = self.query_one(DecisionQueue)
        queue.show_pending(dict(self._shown), self.machine.decided())
        self._summary(feeds, len(waiting))
        self._titles()
        self._follow_cursor()

    def _summary(self, feeds: list[Feed], waiting: int) -> None:
        serving = sum(f.serving for f in feeds)
        gone = sum(f.owner == "owner gone" for f in feeds)
        parts = [f"{len(feeds)} room{'' if len(feeds) == 1 else 's'} on this machine",
                 f"{serving} serving"]  # fmt: skip
        if gone:
            parts.append(f"{gone} owner gone")
        if other := len(feeds) - serving - gone:
            parts.append(f"{other} not serving")
        running = sum(f.running or 0 for f in feeds if f.serving)
        held = sum(f.waiting or 0 for f in feeds if f.serving)
        parts.append(f"{running} running, {held} waiting, {waiting} to decide")
        if self.machine.problems:
            parts.append(f"{len(self.machine.problems)} unreadable file(s) in the registry")
        self.query_one("#machine-summary", Static).update(" " + " · ".join(parts))

    def _titles(self) -> None:
        n = len(self._shown)
        where = "" if self.only is None else f" of {self._label(self.only)} (Esc: every room)"
        title = f"Inbox{where}: needs input first ({n})" if n else f"Inbox{where}: {EMPTY}"
        set_title(self.query_one("#machine-inbox-pane"), title)
        rooms = len(self.machine.feeds)
        set_title(self.query_one("#machine-rooms-pane"), f"Rooms on this machine ({rooms})")

    def _label(self, room: Path) -> str:
        feed = self.machine.feeds.get(room)
        return feed.label if feed is not None else str(room)

    def _tick(self) -> None:
        """Ages and deadlines move: the rooms' `since`, the card's wait."""
        self.query_one(RoomsTable).show_rooms(self.machine.feeds.values(), self.clock(), self.here)
        self.query_one(DecisionCard).tick()

    def _follow_cursor(self) -> None:
        """The card shows the call under the inbox's cursor, of its room's workspace and
        tools."""
        queue, card = self.query_one(DecisionQueue), self.query_one(DecisionCard)
        key = queue.current_key()
        call = self._shown.get(key) if key is not None else None
        feed = self._where.get(key) if key is not None else None
        if feed is not None:
            card.workspace, card.tools = feed.workspace, feed.bridge.state.tools
            queue.tools = feed.bridge.state.tools  # (O and N: this room's sandbox)
        card.show_call(call)

    @on(DataTable.RowHighlighted, "#machine-inbox")
    def inbox_moved(self) -> None:
        self._follow_cursor()

    # -- rooms -----------------------------------------------------------------------------

    @on(DataTable.RowSelected, "#machine-rooms")
    def room_picked(self, event: DataTable.RowSelected) -> None:
        event.stop()
        room = Path(str(event.row_key.value))
        self.only = None if self.only == room else room
        self.redraw()

    def action_back(self) -> None:
        if self.only is not None:
            self.only = None
            self.redraw()
            return
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_inbox(self) -> None:
        self.query_one(DecisionQueue).focus()

    @work(group="prune", thread=True)
    def action_prune(self) -> None:
        try:
            removed = self.machine.prune()
        except OSError as exc:  # said, never a crash
            self.app.call_from_thread(self.notify, f"Nothing forgotten: {exc}", severity="error")
            return
        said = ", ".join(self._label(r.room) for r in removed)
        text = (f"Forgot {len(removed)} room{'' if len(removed) == 1 else 's'} whose owner is "
                f"gone: {said}." if removed else "No room's owner is gone: nothing to forget.")  # fmt: skip
        self.app.call_from_thread(self.notify, text, title="Rooms")

    # -- deciding --------------------------------------------------------------------------

    @on(DecisionQueue.Decide)
    def decide(self, event: DecisionQueue.Decide) -> None:
        event.stop()
        self._decide(event.action, event.call, event.ask)

    @on(DecisionCard.Decide)
    def card_decide(self, event: DecisionCard.Decide) -> None:
        event.stop()
        self._decide(event.action, event.call)

    @on(DecisionCard.GiveBack)
    def card_gives_back(self, event: DecisionCard.GiveBack) -> None:
        event.stop()
        self.query_one(DecisionQueue).focus()

    @on(DecisionQueue.DecideMarked)
    def decide_marked(self, event: DecisionQueue.DecideMarked) -> None:
        """Marked calls are decided room by room: one confirmation a room, each call bound
        to the arguments its row showed."""
        event.stop()
        rooms: dict[int, tuple[Feed, list[CallRow]]] = {}
        for call in event.calls:
            if (feed := self._where.get(call.call_id)) is not None:
                rooms.setdefault(id(feed), (feed, []))[1].append(call)
        if not rooms:
            self.notify("The marked calls' rooms are gone: nothing decided.", severity="warning")
            return
        self._marked(event.action, list(rooms.values()))

    @work(group="decide")
    async def _marked(self, action: str, rooms: list[tuple[Feed, list[CallRow]]]) -> None:
        for feed, calls in rooms:
            await feed.decider._decide_marked(action, calls)

    def _decide(self, action: str, call: CallRow, ask: str = "") -> None:
        feed = self._where.get(call.call_id)
        if feed is None or not feed.serving:
            self.notify(f"{call.tool} on {call.thread_id}: its room's owner is gone; nothing "
                        "decided.", title="Nothing decided", severity="warning")  # fmt: skip
            return
        if action == "details":
            self._details(feed, call)
            return
        feed.decider.decide(action, call, ask)

    @work(group="decide")
    async def _details(self, feed: Feed, call: CallRow) -> None:
        """The call whole, in its room's workspace; its keys decide as the inbox's do."""
        call = replace(call, args=copy.deepcopy(call.args))  # (the room's row may change)
        picked = await self.app.push_screen_wait(CallDetailScreen(
            call, feed.decider.refusal_here, feed.workspace,
            feed.bridge.state.output.get))  # fmt: skip
        if picked is not None:
            feed.decider.decide(picked, call)

    def _act(self, action: str, call_id: str, work: Awaitable[Any]) -> None:
        self.run_worker(self._carry(action, call_id, work), group="act")

    async def _carry(self, action: str, call_id: str, work: Awaitable[Any]) -> None:
        """A decision's answer from its room's owner: said when it did not take."""
        feed = self._where.get(call_id)
        where = f" in {feed.label}" if feed is not None else ""
        try:
            result = await work
        except Exception as exc:  # shown to the operator, never a crash
            self.notify(f"{action}{where} failed: {exc}", severity="error")
            return
        status = getattr(result, "status", None)
        if status == "refused":
            self.notify(f"Your decision on {call_id}{where} was refused: {result.note}. The "
                        "call still waits.", title="Nothing ran", severity="error")  # fmt: skip
        elif status == "duplicate":
            self.notify(f"Your decision on {call_id}{where} was not applied: the call was "
                        "already decided.", title="Decided elsewhere", severity="warning")  # fmt: skip
