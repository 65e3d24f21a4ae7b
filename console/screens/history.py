"""The history screen: every run, thread and turn of the room, filtered, searched, paged.

It wires three keyset-paged lists (`HistoryList`: runs, threads, turns or search hits; `n`,
or scrolling near the end, loads the next page by cursor), the filter line and the search
bar to a `HistoryReader`, which owns the screen's read-only connection to the room and
runs every query in a worker, and shows the turn under the cursor in a `TurnDetail`.
Esc clears every filter and the search; with nothing to clear it closes the screen, as
`q` does. ctrl+e writes the turn shown as JSON; E the room's whole decision audit as JSON
lines (read through the runtime's client: the owner's, or this console's own runtime); `m`
marks a turn and `d` on another diffs the two (console/screens/diff.py); `P` replays the
turn, `F` on one of its steps forks from there (console/travel.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Input

from console.format import set_title
from console.history.audit import export_audit
from console.history.reader import HistoryReader, Listing
from console.history.said import AuditExported, Exported, Jumped, Listed
from console.history.view import (
    STATUS_CYCLE,
    Criteria,
    next_value,
    parse_range,
    suspension_notice,
    turns_title,
)
from console.screens.call_detail import CallDetailScreen
from console.screens.diff import TurnPair
from console.screens.prompt import PromptScreen
from console.travel import ReplayOf
from console.widgets.calls_table import CallsTable
from console.widgets.filter_bar import FilterBar
from console.widgets.history_filters import HistoryFilters
from console.widgets.history_list import HistoryList
from console.widgets.key_bar import KeyBar
from console.widgets.timeline import Timeline
from console.widgets.turn_detail import TurnDetail
from engine.api.history import HistoryError, fts_query
from engine.domain.usage import Usage
from engine.room import Room

if TYPE_CHECKING:
    from console.bridge import Bridge

CYCLED = {"origin": "origins", "group": "groups", "tool": "tools"}  # filter -> counts() key


class HistoryScreen(Screen[None]):
    """Opened by `h` (or the palette's "History"); Esc clears filters, then closes."""

    BINDINGS = [
        Binding("escape", "clear", "Clear/back"),
        Binding("q", "close", "Close", show=False),
        Binding("slash", "search", "Search"),
        Binding("s", "cycle('status')", "Status"),
        Binding("o", "cycle('origin')", "Origin"),
        Binding("ctrl+g", "cycle('group')", "Group"),
        Binding("t", "thread", "Thread"),
        Binding("T", "cycle('tool')", "Tool"),
        Binding("r", "time_range", "Time"),
        Binding("n", "next_page", "Next page"),
        Binding("w", "where_suspended", "Where suspended"),
        Binding("ctrl+e", "export", "Export"),
        Binding("E", "export_audit", "Export decision audit", show=False),
        Binding("ctrl+r", "reload", "Reload", show=False),
        Binding("m", "pair('mark')", "Mark for diff"),
        Binding("d", "pair('diff')", "Diff with marked"),
        Binding("P", "replay", "Replay turn", show=False),
    ]

    # what it says it did (console/history/said.py: handlers named as if defined here)
    Listed, Jumped, Exported, AuditExported = Listed, Jumped, Exported, AuditExported

    def __init__(self, room: Room, *, clock: Callable[[], float] = time.time,
                 page_size: int | None = None, bridge: Bridge | None = None) -> None:  # fmt: skip
        super().__init__()
        self.room, self.clock, self.bridge = room, clock, bridge
        self.reader = HistoryReader(
            room,
            spawn=lambda work, group, exclusive: self.run_worker(
                work, group=group, exclusive=exclusive
            ),
            cancel=lambda group: self.workers.cancel_group(self, group),
            report=lambda text: self.notify(text, severity="error", title="History"),
            page_size=page_size,
        )
        self.criteria = Criteria()
        self.totals: dict[str, Any] = {}
        self._next: dict[str, str | None] = {"runs": None, "threads": None, "turns": None}
        self._items: dict[str, dict[str, Any]] = {}  # turns-pane key -> turn row or hit
        self._thread_spent: Usage | None = None  # what the listed thread spent, if one is
        self.pair = TurnPair()  # the turn `m` marked, to diff with `d`

    def compose(self) -> ComposeResult:
        yield HistoryFilters(id="hist-filters")
        yield FilterBar(placeholder="search messages, tool arguments and results · Enter "
                        "searches · word* for a prefix · Esc clears", id="hist-search")  # fmt: skip
        with Horizontal(id="hist-panes"):
            with Vertical(id="hist-left"):
                with Vertical(id="hist-runs-pane", classes="pane"):
                    yield HistoryList("no runs", id="hist-runs")
                with Vertical(id="hist-threads-pane", classes="pane"):
                    yield HistoryList("no threads", id="hist-threads")
                with Vertical(id="hist-turns-pane", classes="pane"):
                    yield HistoryList("no turns", id="hist-turns")
            yield TurnDetail(id="hist-right")
        yield KeyBar()

    async def on_mount(self) -> None:
        for pane, title in (("runs", "Runs"), ("threads", "Threads"), ("turns", "Turns")):
            set_title(self.query_one(f"#hist-{pane}-pane"), title)
        self.query_one("#hist-turns").focus()
        if await self.reader.open():  # a read-only open takes ms
            self.reload()

    async def on_unmount(self) -> None:
        await self.reader.close()

    @property
    def detail(self) -> dict[str, Any] | None:
        """The turn shown (`History.turn`'s dict), if any."""
        return self.query_one(TurnDetail).detail

    # -- the lists --------------------------------------------------------------------------

    def reload(self) -> None:
        """Read everything again (the room may have grown since)."""
        read = self.reader.read
        read("totals", self._load_totals)
        read("runs", self._load_runs, None)
        read("threads", self._load_threads, None)
        read("turns", self._load_turns, None)

    async def _load_totals(self) -> None:
        self.totals = await self.reader.totals()
        self.query_one(HistoryFilters).totals = self.totals
        self._title("runs", f"Runs ({self.totals.get('runs', 0)})")

    async def _load_runs(self, after: str | None) -> None:
        self._fill("runs", await self.reader.runs(after), after)

    async def _load_threads(self, after: str | None) -> None:
        group = self.criteria.filters.group
        listing = await self.reader.threads(group, after)
        if group != self.criteria.filters.group:
            return
        self._fill("threads", listing, after)
        self._title("threads", f"Threads · {group}" if group else "Threads")

    async def _load_turns(self, after: str | None) -> None:
        query = self.criteria
        listing = await self.reader.turns(query, after)
        if query is not self.criteria:
            return  # asked for before the filters changed: a newer read draws the pane
        if after is None:
            self._items, self._thread_spent = {}, listing.thread_spent
        self._items.update(listing.items)
        view = self._fill("turns", listing, after)
        shown, more = len(view.rows), listing.next is not None
        self._title("turns", turns_title(query, shown, more, listing.total, self._thread_spent))
        if not view.rows:
            self.reader.cancel("detail")
            self.query_one(TurnDetail).show(None)
        self.post_message(self.Listed("hits" if query.search else "turns", shown, more))

    def _fill(self, pane: str, listing: Listing, after: str | None) -> HistoryList:
        view = self.query_one(f"#hist-{pane}", HistoryList)
        more = listing.next is not None
        if after is None:
            view.show(listing.rows, more, keep=view.current_key())
        else:
            view.extend(listing.rows, more)
        self._next[pane] = listing.next
        if pane != "turns":
            self.post_message(self.Listed(pane, len(view.rows), more))
        return view

    def _title(self, pane: str, title: str) -> None:
        widget = self.query_one(f"#hist-{pane}-pane")
        set_title(widget, title)

    # -- one turn ---------------------------------------------------------------------------

    async def _load_turn(self, turn_id: str, call_id: str | None) -> None:
        pane = self.query_one(TurnDetail)
        pane.show(await self.reader.turn(turn_id))
        if call_id is not None:
            pane.select_call(call_id)

    def selected_turn(self) -> str | None:
        """The turn the keys act on: the one under the turns list's cursor."""
        key = self.query_one("#hist-turns", HistoryList).current_key()
        item = self._items.get(key) if key is not None else None
        if item is not None:
            return str(item["turn_id"])
        return self.query_one(TurnDetail).turn_id

    @on(HistoryList.Highlighted, "#hist-turns")
    def turn_highlighted(self, event: HistoryList.Highlighted) -> None:
        item = self._items.get(event.key)
        if item is not None:  # a turn the cursor passes over quickly is never drawn
            call = item.get("call_id") if "kind" in item else None
            self.reader.read("detail", self._load_turn, item["turn_id"], call)

    @on(HistoryList.Chosen, "#hist-turns")
    def turn_chosen(self) -> None:
        self.query_one("#hist-steps", Timeline).focus()

    @on(HistoryList.Chosen, "#hist-runs")
    def run_chosen(self, event: HistoryList.Chosen) -> None:
        self._apply(
            self.criteria.set(run=None if self.criteria.filters.run == event.key else event.key)
        )

    @on(HistoryList.Chosen, "#hist-threads")
    def thread_chosen(self, event: HistoryList.Chosen) -> None:
        same = self.criteria.filters.thread == event.key
        self._apply(self.criteria.set(thread=None if same else event.key))

    @on(HistoryList.NeedMore)
    def need_more(self, event: HistoryList.NeedMore) -> None:
        self._next_page(str(event.view.id).removeprefix("hist-"))

    @on(CallsTable.ShowDetails)
    def call_details(self, event: CallsTable.ShowDetails) -> None:
        event.stop()
        if call := self.query_one(TurnDetail).call(event.call_id):
            self.app.push_screen(CallDetailScreen(call))

    # -- filters and search -----------------------------------------------------------------

    def _apply(self, query: Criteria) -> None:
        group_changed = query.filters.group != self.criteria.filters.group
        self.criteria = query
        self.query_one(HistoryFilters).criteria = query
        self._next["turns"] = None
        self.reader.cancel("turns-more")
        self.reader.read("turns", self._load_turns, None)
        if group_changed:
            self._next["threads"] = None
            self.reader.cancel("threads-more")
            self.reader.read("threads", self._load_threads, None)

    def _set(self, **changes: Any) -> None:
        try:
            self._apply(self.criteria.set(**changes))
        except HistoryError as exc:
            self.notify(str(exc), severity="error", title="History")

    def action_cycle(self, name: str) -> None:
        options = STATUS_CYCLE if name == "status" else sorted(self.totals.get(CYCLED[name], {}))
        if not options:
            self.notify(f"No {name} is recorded in this room.", severity="warning")
            return
        self._set(**{name: next_value(options, getattr(self.criteria.filters, name))})

    def action_thread(self) -> None:
        """Only the selected turn's thread (the threads list's, when it has the focus);
        again: every thread."""
        if self.criteria.filters.thread is not None:
            self._set(thread=None)
            return
        thread = None
        if isinstance(self.focused, HistoryList) and self.focused.id == "hist-threads":
            thread = self.focused.current_key()
        elif (key := self.query_one("#hist-turns", HistoryList).current_key()) is not None:
            thread = self._items[key]["thread_id"] if key in self._items else None
        if thread is None:
            self.notify("Select a turn or a thread first.", severity="warning")
            return
        self._set(thread=thread)

    @work(group="time-range")
    async def action_time_range(self) -> None:
        answer = await self.app.push_screen_wait(PromptScreen(
            "Time range: SINCE [UNTIL], each an ISO date or time or an age (90m, 2h, 3d). "
            "Empty: all time.", "2h   or   2025-01-31 2025-02-01T12:00"))  # fmt: skip
        if answer is None:
            return
        try:
            since, until = parse_range(answer, self.clock())
        except HistoryError as exc:
            self.notify(str(exc), severity="error", title="History")
            return
        self._set(since=since, until=until)

    def action_search(self) -> None:
        bar = self.query_one("#hist-search", FilterBar)
        bar.add_class("-shown")
        bar.focus()

    @on(Input.Submitted, "#hist-search")
    def search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self._end_search()
            return
        try:
            fts_query(text)  # what the search will ask: nothing to search for is said now
        except HistoryError as exc:  # the bar keeps the text to change; the results stay
            self.notify(str(exc), severity="error", title="History")
            return
        self._apply(replace(self.criteria, search=text))
        self.query_one("#hist-turns").focus()

    @on(FilterBar.Cleared)
    def search_cleared(self, event: FilterBar.Cleared) -> None:
        event.stop()
        self._end_search()

    def _end_search(self) -> None:
        bar = self.query_one("#hist-search", FilterBar)
        bar.value = ""
        bar.remove_class("-shown")
        self.query_one("#hist-turns").focus()
        if self.criteria.search:
            self._apply(replace(self.criteria, search=""))

    def action_clear(self) -> None:
        bar = self.query_one("#hist-search", FilterBar)
        if self.criteria.empty and not bar.has_class("-shown"):
            self.action_close()
            return
        if bar.has_focus:
            self.query_one("#hist-turns").focus()
        bar.value = ""
        bar.remove_class("-shown")
        if not self.criteria.empty:
            self._apply(Criteria())

    # -- paging, jumping, export ------------------------------------------------------------

    def _next_page(self, pane: str) -> bool:
        after = self._next.get(pane)
        if after is None:
            return False
        self._next[pane] = None  # asked once
        load = {"runs": self._load_runs, "threads": self._load_threads,
                "turns": self._load_turns}[pane]  # fmt: skip
        self.reader.read(f"{pane}-more", load, after)
        return True

    def action_next_page(self) -> None:
        focused = self.focused
        pane = "turns"
        if isinstance(focused, HistoryList) and focused.id in ("hist-runs", "hist-threads"):
            pane = str(focused.id).removeprefix("hist-")
        view = self.query_one(f"#hist-{pane}", HistoryList)
        if self._next_page(pane):
            view.loading = True
            view.refresh()
        elif not view.loading:
            self.notify(f"No more {pane}: every one is listed.", title="History")

    def action_where_suspended(self) -> None:
        if (turn_id := self.selected_turn()) is None:
            self.notify("Select a turn first.", severity="warning")
            return
        self.reader.read("jump", self._jump, turn_id, exclusive=False)

    async def _jump(self, turn_id: str) -> None:
        where = await self.reader.where_suspended(turn_id)
        if where is None:
            self.notify(f"Turn {turn_id} never suspended.", severity="warning", title="History")
            return
        pane = self.query_one(TurnDetail)
        if pane.turn_id != turn_id:
            self.reader.cancel("detail")  # this turn is the one to show
            pane.show(await self.reader.turn(turn_id))
        pane.jump(where["step_id"], where["call_id"])
        assert pane.detail is not None
        self.notify(suspension_notice(pane.detail), title="Where it suspended")
        self.post_message(self.Jumped(turn_id, where["step_id"], where["call_id"]))

    def action_export(self) -> None:
        if (turn_id := self.selected_turn()) is None:
            self.notify("Select a turn to export.", severity="warning")
            return
        self.reader.read("export", self._export, turn_id, exclusive=False)

    async def _export(self, turn_id: str) -> None:
        try:
            path = await self.reader.export(turn_id)
        except OSError as exc:
            self.notify(f"Export failed: {exc}", severity="error", title="Export")
            return
        self.notify(f"Turn {turn_id} written to {path}", title="Exported as JSON")
        self.post_message(self.Exported(turn_id, path))

    @work(group="audit", exclusive=True)
    async def action_export_audit(self) -> None:
        try:
            target, told = await export_audit(self.bridge, self.room.path, self.clock())
        except Exception as exc:  # no runtime, an owner gone, a full disk: said, never a crash
            self.notify(f"Exporting the decision audit failed: {exc}", severity="error")
            return
        self.notify(told, title="Audit exported as JSON lines")
        self.post_message(self.AuditExported(target))

    async def action_reload(self) -> None:
        if self.reader.stale:  # the database appeared since: open it again
            if not await self.reader.open():
                return
        self.reload()

    def action_pair(self, what: str) -> None:
        self.pair.act(self, what, self.selected_turn(), self.room)

    def action_replay(self) -> None:
        """Replay the selected turn: the app opens the dialog (console/travel.py)."""
        item = self._items.get(self.query_one("#hist-turns", HistoryList).current_key() or "")
        if item is None:
            self.notify("Select a turn to replay.", severity="warning")
            return
        self.post_message(ReplayOf(item["turn_id"], item["thread_id"], item.get("group")))

    def action_close(self) -> None:
        self.dismiss(None)

    # -- the command palette ----------------------------------------------------------------

    def commands(self) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        """(title, help, callback) for the palette while this screen is shown."""
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.description and b.action != "close":
                yield (f"History: {b.description}", f"key {b.key}",
                       partial(self.run_action, b.action))  # fmt: skip
        yield "Close history", "Back to the main screen (q)", self.action_close
