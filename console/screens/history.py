"""The history screen: every run, thread and turn of the room, filtered, searched, paged.

It reads through `engine.history.History`, its own read-only connection, opened in a
worker when the screen mounts and closed when it unmounts: never through the runtime, so it
works the same while another process owns the room, and never blocks the room's writer.
Every query runs in a worker (one exclusive group per pane), so no key waits on I/O.
Lists are keyset-paged (`n`, or scrolling near the end, loads the next page by cursor).

A turn is drawn with the live view's own widgets: its steps in a `Timeline`, its calls
in a `CallsTable` (Enter opens a call), and its facts, suspension, decisions and messages
in the turn pane. Esc clears every filter and the search; with nothing to clear it
closes the screen, as `q` does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input

from console.history_view import (
    STATUS_CYCLE,
    Criteria,
    active_filters,
    call_rows,
    hit_cells,
    hit_key,
    next_value,
    notes,
    parse_range,
    run_cells,
    step_rows,
    suspension_notice,
    thread_cells,
    turn_cells,
    turn_title,
)
from console.screens.call_detail import CallDetailScreen
from console.screens.prompt import PromptScreen
from console.state import CallRow, StepRow
from console.widgets.calls_table import CallsTable
from console.widgets.filter_bar import FilterBar
from console.widgets.history_filters import HistoryFilters
from console.widgets.history_list import HistoryList
from console.widgets.history_notes import HistoryNotes
from console.widgets.key_bar import KeyBar
from console.widgets.timeline import Timeline
from engine.history import READ_ERRORS, History, HistoryError
from engine.history_filters import fts_query
from engine.room import Room

PAGE = 50  # rows a page
CYCLED = {"origin": "origins", "group": "groups", "tool": "tools"}  # filter -> counts() key


class HistoryScreen(Screen[None]):
    """Opened by `h` (or the palette's "History"); Esc clears filters, then closes."""

    DEFAULT_CSS = """
    HistoryScreen #hist-filters { height: 1; background: $panel; color: $foreground; }
    HistoryScreen #hist-panes { height: 1fr; }
    HistoryScreen #hist-left { width: 50%; }
    HistoryScreen #hist-right { width: 1fr; }
    HistoryScreen #hist-runs-pane { height: 6; }
    HistoryScreen #hist-threads-pane { height: 9; }
    HistoryScreen #hist-steps-pane { height: 10; }
    HistoryScreen #hist-calls-pane { height: 8; }
    HistoryScreen #hist-turns-pane, HistoryScreen #hist-turn-pane { height: 1fr; }
    HistoryList, HistoryNotes {
        height: 1fr; background: $background; scrollbar-size-vertical: 1; overflow-x: hidden;
    }
    .history--cursor { background: $boost; text-style: bold; }
    HistoryList:focus > .history--cursor { background: $primary 30%; }
    .history--dim { color: $state-muted; }
    .history--bold { text-style: bold; }
    .history--match { text-style: bold underline; color: $state-waiting; }
    """

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
        Binding("ctrl+r", "reload", "Reload", show=False),
    ]

    class Listed(Message):
        """A list was drawn: `what` (runs, threads, turns, hits), rows loaded, more to page."""

        def __init__(self, what: str, rows: int, more: bool) -> None:
            super().__init__()
            self.what, self.rows, self.more = what, rows, more

    class TurnShown(Message):
        """The turn pane, steps and calls now show `turn_id`."""

        def __init__(self, turn_id: str) -> None:
            super().__init__()
            self.turn_id = turn_id

    class Jumped(Message):
        """`w` selected the step and call where `turn_id` suspended."""

        def __init__(self, turn_id: str, step_id: int | None, call_id: str) -> None:
            super().__init__()
            self.turn_id, self.step_id, self.call_id = turn_id, step_id, call_id

    class Exported(Message):
        """The turn was written as JSON to `path` (in the room)."""

        def __init__(self, turn_id: str, path: Path) -> None:
            super().__init__()
            self.turn_id, self.path = turn_id, path

    def __init__(self, room: Room, *, clock: Callable[[], float] = time.time,
                 page_size: int | None = None) -> None:  # fmt: skip
        super().__init__()
        self.room, self.clock, self.page_size = room, clock, page_size or PAGE
        self.criteria = Criteria()
        self.history: History | None = None
        self.totals: dict[str, Any] = {}
        self.detail: dict[str, Any] | None = None
        self._opened = asyncio.Event()
        self._next: dict[str, str | None] = {"runs": None, "threads": None, "turns": None}
        self._items: dict[str, dict[str, Any]] = {}  # turns-pane key -> turn row or hit
        self._steps: list[StepRow] = []  # the timeline's rows (it holds this list)
        self._calls: list[CallRow] = []
        self._seq = 0
        self._wanted: tuple[str, str | None] | None = None  # the turn to show next
        self._reading_turn = False

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
            with Vertical(id="hist-right"):
                with Vertical(id="hist-steps-pane", classes="pane"):
                    yield Timeline(self._steps, id="hist-steps")
                with Vertical(id="hist-calls-pane", classes="pane"):
                    yield CallsTable(id="hist-calls")
                with Vertical(id="hist-turn-pane", classes="pane"):
                    yield HistoryNotes("select a turn", id="hist-turn")
        yield KeyBar()

    async def on_mount(self) -> None:
        for pane, title in (("runs", "Runs"), ("threads", "Threads"), ("turns", "Turns"),
                            ("steps", "Steps"), ("calls", "Calls"), ("turn", "Turn")):  # fmt: skip
            self.query_one(f"#hist-{pane}-pane").border_title = title
        self.query_one("#hist-turns").focus()
        # Awaited, not a worker: a worker cancelled mid-connect would leave aiosqlite's
        # thread behind to post into a closed event loop. A read-only open takes ms.
        await self._open()

    async def on_unmount(self) -> None:
        # The screen, not a worker, closes the connection, and waits for it: its thread
        # must be done before the event loop is (a cancelled worker would not wait).
        await self._shut()

    # -- reading ----------------------------------------------------------------------------

    async def _open(self) -> None:
        """Open the read-only connection (again, after `_shut`), then read every pane."""
        await self._shut()
        history = History(self.room)
        try:
            await history.__aenter__()
        except READ_ERRORS as exc:
            self.notify(f"History cannot be read: {exc}", severity="error", title="History")
            return
        self.history = history
        self._opened.set()
        self.reload()

    async def _shut(self) -> None:
        self._opened.clear()
        history, self.history = self.history, None
        if history is not None:
            await history.__aexit__(None, None, None)

    def _read(self, group: str, read: Callable[..., Awaitable[None]], *args: Any,
              exclusive: bool = True) -> None:  # fmt: skip
        """Run `read(history, *args)` in a worker; a newer read of the group replaces it
        (cancels it) if `exclusive`. Reads of one turn are never cancelled: see `_detail`."""

        async def run() -> None:
            await self._opened.wait()
            assert self.history is not None
            try:
                await read(self.history, *args)
            except HistoryError as exc:
                self.notify(str(exc), severity="error", title="History")
            except Exception as exc:  # shown to the operator, never a crash
                self.notify(f"Reading history failed: {exc!r}", severity="error", title="History")

        self.run_worker(run(), group=group, exclusive=exclusive)

    def reload(self) -> None:
        """Read everything again (the room may have grown since)."""
        self._read("totals", self._load_totals)
        self._read("runs", self._load_runs, None)
        self._read("threads", self._load_threads, None)
        self._read("turns", self._load_turns, None)

    async def _load_totals(self, h: History) -> None:
        self.totals = await h.counts() if h.indexed else {}
        self.query_one(HistoryFilters).totals = self.totals
        self._title("runs", f"Runs ({self.totals.get('runs', 0)})")

    async def _load_runs(self, h: History, after: str | None) -> None:
        page = await h.runs(after=after, limit=self.page_size)
        self._fill("runs", [(r["run_id"], run_cells(r)) for r in page.items], page.next, after)

    async def _load_threads(self, h: History, after: str | None) -> None:
        group = self.criteria.filters.group
        page = await h.threads(group=group, after=after, limit=self.page_size)
        if group != self.criteria.filters.group:
            return
        self._fill("threads", [(t["thread_id"], thread_cells(t)) for t in page.items],
                   page.next, after)  # fmt: skip
        self._title("threads", f"Threads · {group}" if group else "Threads")

    async def _load_turns(self, h: History, after: str | None) -> None:
        query = self.criteria
        if query.search:
            page = await h.search(query.search, query.filters, after=after, limit=self.page_size)
            keyed = [(hit_key(x), x) for x in page.items]
            rows = [(key, hit_cells(x)) for key, x in keyed]
        else:
            page = await h.turns(query.filters, after=after, limit=self.page_size)
            keyed = [(t["turn_id"], t) for t in page.items]
            rows = [(key, turn_cells(t)) for key, t in keyed]
        if query is not self.criteria:
            return  # asked for before the filters changed: a newer read draws the pane
        if after is None:
            self._items = {}
        self._items.update(keyed)
        view = self._fill("turns", rows, page.next, after)
        shown = len(view.rows)
        more = "+" if page.next else ""
        if query.search:
            title = f"Search “{query.search}” ({shown}{more} hit{'s' if shown != 1 else ''})"
        else:
            total = await h.count(query.filters) if h.indexed else None
            title = f"Turns ({total if total is not None else f'{shown}{more}'})"
        if used := [f for f in active_filters(query) if f != "search"]:
            title += " · " + ", ".join(used)
        self._title("turns", title)
        if not view.rows:
            self._wanted = None
            self._show_detail(None)
        self.post_message(self.Listed("hits" if query.search else "turns", shown, bool(more)))

    def _fill(self, pane: str, rows: list, next_cursor: str | None,
              after: str | None) -> HistoryList:  # fmt: skip
        view = self.query_one(f"#hist-{pane}", HistoryList)
        if after is None:
            view.show(rows, next_cursor is not None, keep=view.current_key())
        else:
            view.extend(rows, next_cursor is not None)
        self._next[pane] = next_cursor
        if pane != "turns":
            self.post_message(self.Listed(pane, len(view.rows), next_cursor is not None))
        return view

    def _title(self, pane: str, title: str) -> None:
        widget = self.query_one(f"#hist-{pane}-pane")
        if widget.border_title != title:
            widget.border_title = title

    # -- one turn ---------------------------------------------------------------------------

    def _want_detail(self, turn_id: str, call_id: str | None = None) -> None:
        """Show this turn as soon as the reads before it are done (the latest wins)."""
        self._wanted = (turn_id, call_id)
        if not self._reading_turn:
            self._reading_turn = True
            self._read("detail", self._detail, exclusive=False)

    async def _detail(self, h: History) -> None:
        # `History.turn` must not be cancelled: cancelled at the wrong await it leaves its
        # read transaction open, and every later `turn()` on the connection fails (an
        # engine bug). So a cursor moving fast does not cancel reads; it replaces the turn
        # wanted next, and the turns passed over on the way are never read.
        try:
            while self._wanted is not None:
                (turn_id, call_id), self._wanted = self._wanted, None
                try:
                    detail = await h.turn(turn_id)
                except HistoryError as exc:
                    self.notify(str(exc), severity="error", title="History")
                    continue
                if self._wanted is None:
                    self._show_detail(detail)
                    if call_id is not None:
                        self._select_call(call_id)
        finally:
            self._reading_turn = False

    def _show_detail(self, detail: dict[str, Any] | None) -> None:
        self.detail = detail
        timeline = self.query_one("#hist-steps", Timeline)
        self._steps[:] = step_rows(detail, self._seq) if detail else []
        self._seq += len(self._steps)
        timeline.follow = False
        timeline.refresh_rows()
        timeline.action_first()
        self._calls = call_rows(detail) if detail else []
        turn_id = detail["turn"]["turn_id"] if detail else ""
        self.query_one("#hist-calls", CallsTable).show(turn_id, self._calls)
        pane = self.query_one("#hist-turn", HistoryNotes)
        pane.show(notes(detail) if detail else [(("no turn to show", "history--dim"),)])
        self._title("steps", f"Steps · {turn_id}" if detail else "Steps")
        self._title("calls", f"Calls · {turn_id}" if detail else "Calls")
        self._title("turn", turn_title(detail["turn"]) if detail else "Turn")
        if detail:
            self.post_message(self.TurnShown(turn_id))

    def _select_call(self, call_id: str) -> None:
        keys = [c.call_id for c in self._calls]
        if call_id not in keys:
            return
        table = self.query_one("#hist-calls", CallsTable)
        target = keys.index(call_id)
        for _ in range(len(keys)):
            if table.cursor < target:
                table.action_cursor_down()
            elif table.cursor > target:
                table.action_cursor_up()

    def selected_turn(self) -> str | None:
        """The turn the keys act on: the one under the turns list's cursor."""
        key = self.query_one("#hist-turns", HistoryList).current_key()
        item = self._items.get(key) if key is not None else None
        if item is not None:
            return str(item["turn_id"])
        return self.detail["turn"]["turn_id"] if self.detail else None

    @on(HistoryList.Highlighted, "#hist-turns")
    def turn_highlighted(self, event: HistoryList.Highlighted) -> None:
        item = self._items.get(event.key)
        if item is not None:
            call = item.get("call_id") if "kind" in item else None
            self._want_detail(item["turn_id"], call)

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

    @on(Timeline.OpenTurn)
    def steps_open(self, event: Timeline.OpenTurn) -> None:
        event.stop()
        self.query_one("#hist-calls", CallsTable).focus()

    @on(Timeline.Selected)
    def steps_selected(self, event: Timeline.Selected) -> None:
        event.stop()

    @on(CallsTable.ShowDetails)
    def call_details(self, event: CallsTable.ShowDetails) -> None:
        event.stop()
        if call := next((c for c in self._calls if c.call_id == event.call_id), None):
            self.app.push_screen(CallDetailScreen(call))

    # -- filters and search -----------------------------------------------------------------

    def _apply(self, query: Criteria) -> None:
        group_changed = query.filters.group != self.criteria.filters.group
        self.criteria = query
        self.query_one(HistoryFilters).criteria = query
        self._next["turns"] = None
        self.workers.cancel_group(self, "turns-more")
        self._read("turns", self._load_turns, None)
        if group_changed:
            self._next["threads"] = None
            self.workers.cancel_group(self, "threads-more")
            self._read("threads", self._load_threads, None)

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
        self._read(f"{pane}-more", load, after)
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
        self._read("jump", self._jump, turn_id, exclusive=False)

    async def _jump(self, h: History, turn_id: str) -> None:
        where = await h.where_suspended(turn_id)
        if where is None:
            self.notify(f"Turn {turn_id} never suspended.", severity="warning", title="History")
            return
        if self.detail is None or self.detail["turn"]["turn_id"] != turn_id:
            self._show_detail(await h.turn(turn_id))
        timeline = self.query_one("#hist-steps", Timeline)
        index = next((i for i, s in enumerate(self._steps) if s.step_id == where["step_id"]), 0)
        timeline.action_first()
        if index:
            timeline.action_cursor(index)
        self._select_call(where["call_id"])
        self.query_one("#hist-calls", CallsTable).focus()
        pane = self.query_one("#hist-turn", HistoryNotes)
        pane.scroll_to_line(next((i for i, line in enumerate(pane.lines)
                                  if line and line[0][0].startswith("Where")), 0))  # fmt: skip
        assert self.detail is not None
        self.notify(suspension_notice(self.detail), title="Where it suspended")
        self.post_message(self.Jumped(turn_id, where["step_id"], where["call_id"]))

    def action_export(self) -> None:
        if (turn_id := self.selected_turn()) is None:
            self.notify("Select a turn to export.", severity="warning")
            return
        self._read("export", self._export, turn_id, exclusive=False)

    async def _export(self, h: History, turn_id: str) -> None:
        try:
            path = await h.export_turn(turn_id)
        except OSError as exc:
            self.notify(f"Export failed: {exc}", severity="error", title="Export")
            return
        self.notify(f"Turn {turn_id} written to {path}", title="Exported as JSON")
        self.post_message(self.Exported(turn_id, path))

    async def action_reload(self) -> None:
        if self.history is None or (not self.history.indexed and self.room.db.exists()):
            await self._open()  # the database appeared since: open it again
            return
        self.reload()

    def action_close(self) -> None:
        self.dismiss(None)

    # -- the command palette ----------------------------------------------------------------

    def commands(self) -> Iterator[tuple[str, str, Callable[[], Any]]]:
        """(title, help, callback) for the palette while this screen is shown."""
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.description and b.action != "close":
                yield (f"History: {b.description}", f"key {b.key}",
                       lambda action=b.action: self.run_action(action))  # fmt: skip
        yield "Close history", "Back to the main screen (q)", self.action_close
