"""The history screen's reader: its own read-only connection to the room, and the reads on it.

The screen reads through `engine.api.history.History`, never through the runtime, so it works
the same while another process owns the room, and never blocks the room's writer. The
connection is opened when the screen mounts and closed when it unmounts, each awaited by
the screen and never by a worker: a worker cancelled mid-connect or mid-close would leave
aiosqlite's thread to finish into a closed event loop.

Every query runs in a worker of the screen (`spawn`, one exclusive group per pane), so no
key waits on I/O; a newer read of a pane cancels the one it replaces, which the engine makes
safe (a cancelled read leaves no transaction open) and cheap (a read still queued for the
connection never begins). A read that fails is said (`report`), never raised. The queries
return what the panes draw (`console.history.view`'s cells). No Textual here: the screen hands in
how to run and cancel a worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.history.view import (
    Cells,
    Criteria,
    hit_cells,
    hit_key,
    run_cells,
    thread_cells,
    turn_cells,
)
from engine.api.history import READ_ERRORS, History, HistoryError
from engine.domain.turn_diff import TurnDiff, diff_turns
from engine.domain.usage import Usage
from engine.room import Room

PAGE = 50  # rows a page

# Run `work` in a worker of `group`; `exclusive`: cancel the group's other workers first.
Spawn = Callable[[Coroutine[Any, Any, None], str, bool], object]


@dataclass(frozen=True)
class Listing:
    """A page of one list, drawn: rows by key and the cursor of the next page (None: the
    last page). For turns also the items by key (a turn row or a search hit), the list's
    exact size when a counter holds it, and on the first page of a thread's turns what
    the thread spent (None: no thread, a later page, or a room that predates costs)."""

    rows: list[tuple[str, Cells]]
    next: str | None
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    total: int | None = None
    thread_spent: Usage | None = None


class HistoryReader:
    """One read-only connection (`history`, None until open) and the screen's reads on it."""

    def __init__(self, room: Room, *, spawn: Spawn, cancel: Callable[[str], object],
                 report: Callable[[str], None], page_size: int | None = None) -> None:  # fmt: skip
        self.room = room
        self.page_size = page_size or PAGE
        self.history: History | None = None
        self._spawn, self._cancel, self._report = spawn, cancel, report
        self._opened = asyncio.Event()

    # -- the connection ---------------------------------------------------------------------

    async def open(self) -> bool:
        """Open the connection (again, if open); False, and said, if the room cannot be read."""
        await self.close()
        history = History(self.room)
        try:
            await history.__aenter__()
        except READ_ERRORS as exc:
            self._report(f"History cannot be read: {exc}")
            return False
        self.history = history
        self._opened.set()
        return True

    async def close(self) -> None:
        """Close the connection and wait until its thread is done."""
        self._opened.clear()
        history, self.history = self.history, None
        if history is not None:
            await history.__aexit__(None, None, None)

    @property
    def stale(self) -> bool:
        """Nothing is open, or the room's database appeared after the connection opened."""
        return self.history is None or (not self.history.indexed and self.room.db.exists())

    # -- running reads ----------------------------------------------------------------------

    def read(self, group: str, read: Callable[..., Awaitable[None]], *args: Any,
             exclusive: bool = True) -> None:  # fmt: skip
        """Run `read(*args)` in a worker once the connection is open; a newer read of the
        group replaces it (cancels it) if `exclusive`."""

        async def run() -> None:
            await self._opened.wait()
            try:
                await read(*args)
            except HistoryError as exc:
                self._report(str(exc))
            except Exception as exc:  # shown to the operator, never a crash
                self._report(f"Reading history failed: {exc!r}")

        self._spawn(run(), group, exclusive)

    def cancel(self, group: str) -> None:
        """Cancel the group's reads (what they would draw is no longer wanted)."""
        self._cancel(group)

    def _connection(self) -> History:
        if self.history is None:
            raise HistoryError("the history is not open")
        return self.history

    # -- queries ----------------------------------------------------------------------------

    async def totals(self) -> dict[str, Any]:
        """The room's counters (`History.counts`); empty for a room without the indexes."""
        h = self._connection()
        return await h.counts() if h.indexed else {}

    async def runs(self, after: str | None) -> Listing:
        page = await self._connection().runs(after=after, limit=self.page_size)
        return Listing([(r["run_id"], run_cells(r)) for r in page.items], page.next)

    async def threads(self, group: str | None, after: str | None) -> Listing:
        h = self._connection()
        page = await h.threads(group=group, after=after, limit=self.page_size)
        tree = await h.tree(page.items)  # forks and replays beneath their thread
        return Listing([(t["thread_id"], thread_cells(t)) for t in tree], page.next)

    async def turns(self, query: Criteria, after: str | None) -> Listing:
        """Turns that pass the filters, or search hits when `query.search`; with a thread's,
        on the first page, what the thread spent."""
        h = self._connection()
        thread = query.filters.thread
        spent = await h.thread_usage(thread) if thread is not None and after is None else None
        if query.search:
            page = await h.search(query.search, query.filters, after=after, limit=self.page_size)
            keyed = {hit_key(x): x for x in page.items}
            return Listing([(k, hit_cells(x)) for k, x in keyed.items()], page.next, keyed,
                           thread_spent=spent)  # fmt: skip
        page = await h.turns(query.filters, after=after, limit=self.page_size)
        keyed = {t["turn_id"]: t for t in page.items}
        total = await h.count(query.filters) if h.indexed else None
        return Listing([(k, turn_cells(t)) for k, t in keyed.items()], page.next, keyed, total,
                       spent)  # fmt: skip

    async def turn(self, turn_id: str) -> dict[str, Any]:
        """The turn with its steps, messages, calls and decisions (`History.turn`)."""
        return await self._connection().turn(turn_id)

    async def where_suspended(self, turn_id: str) -> dict[str, Any] | None:
        return await self._connection().where_suspended(turn_id)

    async def diff(self, turn_a: str, turn_b: str) -> TurnDiff:
        """Two turns compared (engine/domain/turn_diff.py), both read on this connection."""
        h = self._connection()
        a, b = await h.turn(turn_a), await h.turn(turn_b)
        return await asyncio.to_thread(diff_turns, a, b)  # CPU work: the keys go on meanwhile

    async def export(self, turn_id: str) -> Path:
        """Write the turn as JSON in the room; returns where."""
        return await self._connection().export_turn(turn_id)
