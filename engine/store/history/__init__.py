"""Reading a room's truth layer without owning the room: runs, threads, turns, search, one turn.

    async with History(room) as h:
        page = await h.turns(Filters(status="failed", group="chat"), limit=50)
        older = await h.turns(Filters(status="failed", group="chat"), after=page.next)
        detail = await h.turn(page.items[0]["turn_id"])

History reads through its own read-only connection (`mode=ro`): it never needs the room's
ownership and never blocks its owner (WAL readers don't). A room whose store is on
PostgreSQL is read through a read-only session there (engine/store/pg/reader.py), with the
same statements and the same answers; full-text search there is PostgreSQL's own
(engine/store/pg/history.py). Lists are keyset-paged, newest
first (`after` = the `cursor` of the last row seen; no OFFSET), by index only; totals come
from counters, never from count(*): kept by the writer's triggers in its own
transaction, and for the marks tool calls give their turns by the once-a-second batch,
with what it has not seen yet read beside them (`pending`), so they are exact too.

Shapes (also what `agentdeck history --json` prints; keys are only ever added):
- a turn row: `turn_id thread_id origin status reason text answer created_at ended_at
  calls` (call count), `steps group run_id channel sender strategy detail rounds
  input_tokens output_tokens updated_at cursor instructions` (the hash of what the turn
  was told; None: nothing, or a room that predates it) `model` (`provider:model`, the model
  that answered it; None: a room that predates it) `cached_tokens cost unpriced` (of its
  input tokens, those the provider's cache served; US dollars of its priced tokens; its
  tokens whose model has no known price; each None in a room that predates them: its
  tokens then count as unpriced, `History.spent`) `pruned_at` (when retention pruned its
  steps and events, None: it was not, or a room that predates retention; a pruned turn's
  `steps` is how many it had, its calls are kept without their results, its decisions
  whole: engine/services/retention.py) `origin` (where its thread came from, when a fork
  or a replay made it: engine/store/history/lineage.py's origin; None otherwise). Times
  are Unix seconds.
- a search hit: `kind` (message|call) `turn_id thread_id message_id role call_id tool
  status created_at snippet` (matches in [brackets]) `cursor`.
- a turn (`turn()`, `--turn ID`): `{"turn": <turn row>, "steps": [step_id idx kind status
  summary run_id started_at ended_at input_tokens output_tokens cached_tokens cost] (an
  inference's tokens, 0 for a tool round; `cost` None: no tokens or no price; all None in
  a room that predates them), "messages": [message_id seq role text created_at
  body], "calls": [call_id model_call_id step_id idx tool args status result error
  suspend_reason decision_id created_at updated_at ended_at], "decisions": [decision_id
  call_id tool action args result use_result reason remember decided_by status note
  created_at applied_at then sandbox], "suspended": null | {turn_id waiting step_id step_idx call_id
  calls: [call_id tool args reason status waiting step_id step_idx since decision_id]},
  "origin": null | <origin> (its thread's), "forks": [<origin>] (the threads made from it)}`.
  A decision's `then` (once applied): the call's `status args result error ended_at`.
  The turn row there also has `meta`, and `told`: null (a room that predates instructions)
  or `{hash parts: [source text] changed previous: null | {turn_id hash}}`, what the turn
  was told, part by part, and whether that differs from what the thread's turn before it
  was told (a thread's first turn has no turn before it).
- `runs()` rows: `run_id kind pid status started_at ended_at turns cursor`; `threads()`
  rows: `thread_id group created_at updated_at last_turn_id turns cursor`; `tree()` the
  same as a tree, each with `origin depth branch forks_more` (lineage.py).
- `fork_preview(turn_id, step_id)`: `turn_id step_id thread_id upto entries: [seq role
  text calls editable]`, what a fork at that step would copy (its last entries).
- `counts()`: `turns threads runs decisions steps calls messages suspended_calls`, and
  `status` (each status filter), `groups`, `origins`, `tools` (turns per name).
- `thread_usage(thread_id)`: what a thread spent, all days together (`Usage`; None in a
  room that predates costs), from its turns by index.

Status filters: running, waiting, done (the lifecycle's), failed (a call failed or the
turn ended with `error`), denied (a call was cancelled by a decision), cancelled (the turn
was cancelled).
"""

from __future__ import annotations

import sqlite3
from typing import Any

import aiosqlite

from engine.domain.usage import Usage
from engine.room import Room
from engine.store.history import lineage, records
from engine.store.history.filters import (
    STATUSES,
    Filters,
    HistoryError,
    UnknownTurn,
    check_limit,
    fts_query,
    hit_filter_sql,
    legacy_thread_sql,
    parse_search_cursor,
    parse_time,
    parse_turn_cursor,
    pending_turns_sql,
    search_sql,
    turns_sql,
)
from engine.store.history.one_turn import TurnReads
from engine.store.history.pending import counters_sql, is_call_mark, sums, tool_counters_sql
from engine.store.history.rows import (
    Page,
    merge_hits,
    page,
    run_item,
    spent,
    thread_item,
    turn_item,
)
from engine.store.pg import history as pg_history
from engine.store.reader import connect_postgres, connect_readonly
from engine.store.select import room_store_url
from engine.store.sql import Dialect, dialect
from engine.store.sqlite import StoreError
from engine.store.usage import of_row

__all__ = ["READ_ERRORS", "STATUSES", "Filters", "History", "HistoryError", "Page",
           "UnknownTurn", "connect_readonly", "parse_time"]  # fmt: skip

# What reading a room's history can raise: bad input, a database that cannot be read
# (locked past the timeout, damaged; a PostgreSQL store that cannot be reached: StoreError),
# or a file that cannot be opened.
READ_ERRORS = (HistoryError, StoreError, sqlite3.Error, OSError)

# Where a list's first page starts: above every row's key (time, id).
_TOP = (1e300, "")


class History(TurnReads):
    """Read-only history of a room; an async context manager that holds one connection."""

    def __init__(self, room: Room) -> None:
        self.room = room
        self._db: aiosqlite.Connection | None = None
        self._pg: Any = None  # a PgReader when the room's store is on PostgreSQL
        self.indexed = False  # the room's database has the history tables
        self.batched = False  # ... and its call marks are the batch's (issue 16)
        self.told = False  # ... and its turns record their instructions (issue 32)
        self.modelled = False  # ... and the model that answered them (issue 32)
        self.priced = False  # ... and what they spent (issue 33)
        self.pruned = False  # ... and whether retention pruned them (issue 35)
        self.forked = False  # ... and where forks came from (issue 37)
        self.d: Dialect = dialect("sqlite")  # the statements of the database below

    async def __aenter__(self) -> History:
        url = room_store_url(self.room.config)
        if url is not None:
            pg = await connect_postgres(url)
            if not await pg.migrated():  # no runtime opened it yet: an empty history
                await pg.close()
                return self
            self._pg, self.indexed, self.batched = pg, True, True
            self.d = dialect("postgres")
            try:
                self._records(await self._all(records.POSTGRES))
            except BaseException:
                await self.__aexit__()
                raise
        elif self.room.db.exists():
            self._db = await connect_readonly(self.room)
            try:
                rows = await self._all(
                    "SELECT name FROM sqlite_master WHERE name IN ('turn_marks', 'open_calls')"
                )
                self._records(await self._all(records.SQLITE))
            except BaseException:
                await self.__aexit__()  # (the connection's thread would keep us alive)
                raise
            names = {r[0] for r in rows}
            self.indexed = "turn_marks" in names
            self.batched = "open_calls" in names
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._db is not None:
            await self._db.close()
            self._db = None
        if self._pg is not None:
            await self._pg.close()
            self._pg = None

    def _records(self, rows: list[sqlite3.Row]) -> None:
        found = records.records(rows)
        self.told, self.modelled, self.priced = found.told, found.modelled, found.priced
        self.pruned, self.forked = found.pruned, found.forked

    # -- plumbing ---------------------------------------------------------------------------

    async def _all(self, sql: str, params: Any = ()) -> list[sqlite3.Row]:
        """The rows of a statement (a name, or SQL composed in `self.d`)."""
        sql = self.d.text(sql)
        if self._pg is not None:
            return list(await self._pg.execute_fetchall(sql, params))
        if self._db is None:
            return []
        try:
            return list(await self._db.execute_fetchall(sql, params))
        except sqlite3.OperationalError as exc:
            if "fts5" in str(exc) or "unterminated" in str(exc):
                raise HistoryError(f"bad search query: {exc}") from None
            raise

    async def _one(self, sql: str, params: Any = ()) -> sqlite3.Row | None:
        rows = await self._all(sql, params)
        return rows[0] if rows else None

    def _need_index(self) -> None:
        if self._db is not None and not self.indexed:
            raise HistoryError(
                f"{self.room.db} predates the history indexes; open the room once with the "
                "runtime (any agentdeck command but history) to add them"
            )

    async def _counter(self, names: list[str]) -> dict[str, int]:
        if self.batched:
            found = sums(await self._all(*counters_sql(self.d, names)))
        else:
            rows = await self._all(
                f"SELECT name, value FROM counters WHERE name IN ({self.d.params(len(names))})",
                names,
            )
            found = {r["name"]: r["value"] for r in rows}
        return {n: found.get(n, 0) for n in names}

    # -- lists ------------------------------------------------------------------------------

    async def turns(
        self, filters: Filters | None = None, *, after: str | None = None, limit: int = 50
    ) -> Page:
        """Turns, newest first, that pass every filter; `after` a row's `cursor`."""
        filters, limit = filters or Filters(), check_limit(limit)
        cursor = parse_turn_cursor(after) if after else None
        marks = filters.marks()
        if not self.indexed and filters.marks() == [f"thread:{filters.thread}"]:
            sql, params = legacy_thread_sql(filters, cursor, limit + 1)  # a room not upgraded
            return page(await self._all(sql, params), limit, turn_item)
        if not filters.empty:
            self._need_index()
        driver = None
        if marks:  # walk the rarest facet; check the others by key
            sizes = await self._counter(marks)
            driver = min(marks, key=lambda m: sizes[m])
        extra: list[sqlite3.Row] = []
        if driver is not None and self.batched and is_call_mark(driver):
            # Read first: a batch between the two reads moves a turn from here to the
            # marks, where the page finds it again (kept once), never out of both.
            extra = await self._all(*pending_turns_sql(self.d, filters, driver, cursor,
                                                       self.told, self.modelled,
                                                       self.priced, self.pruned))  # fmt: skip
        sql, params = turns_sql(self.d, filters, driver, cursor, limit + 1, self.batched,
                                self.told, self.modelled, self.priced, self.pruned)  # fmt: skip
        rows = await self._all(sql, params)
        if extra:
            merged = {r["id"]: r for r in [*rows, *extra]}
            rows = sorted(merged.values(), key=lambda r: (r["created_at"], r["id"]),
                          reverse=True)[: limit + 1]  # fmt: skip
        found = page(rows, limit, turn_item)
        await lineage.with_origins(self, found.items)  # where forked threads came from
        return found

    async def runs(self, *, after: str | None = None, limit: int = 50) -> Page:
        """Runs (console sessions, `run`, `invoke`...), newest first, with their turn counts."""
        limit = check_limit(limit)
        below = parse_turn_cursor(after) if after else _TOP
        rows = await self._all(
            "history.runs" if self.indexed else "history.runs_unindexed", (*below, limit + 1)
        )
        return page(rows, limit, run_item)

    async def threads(
        self, *, group: str | None = None, after: str | None = None, limit: int = 50
    ) -> Page:
        """Threads, most recently used first (a thread that runs again moves to the top)."""
        limit = check_limit(limit)
        below = parse_turn_cursor(after) if after else _TOP
        rows = await self._all(
            "history.threads" if group is None else "history.group_threads",
            (*([] if group is None else [group]), *below, limit + 1),
        )
        return page(rows, limit, thread_item)

    async def tree(self, threads: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A page of `threads()` as a tree: each followed by the threads forked or replayed
        from it, indented (engine/store/history/lineage.py)."""
        return await lineage.tree(self, threads)

    async def fork_preview(self, turn_id: str, step_id: int, show: int = 8) -> dict[str, Any]:
        """What a fork at the step would copy, and its last `show` entries (lineage.py)."""
        return await lineage.fork_preview(self, turn_id, step_id, show)

    async def search(
        self, query: str, filters: Filters | None = None, *, after: str | None = None,
        limit: int = 50, raw: bool = False,
    ) -> Page:  # fmt: skip
        """Full-text hits in message text and tool-call arguments, results and errors, newest
        first. Words are matched as given (all of them; `word*` for a prefix); quotes and
        operators are plain text. `raw=True` passes the store's own syntax: FTS5's on SQLite
        (a bad one: HistoryError), web search's on PostgreSQL (websearch_to_tsquery)."""
        filters, limit = filters or Filters(), check_limit(limit)
        self._need_index()
        on_pg = self._pg is not None
        if raw:
            match = query.strip()
        else:
            match = fts_query(query)  # nothing to search for: HistoryError, on both
            match = pg_history.tsquery(query) if on_pg else match
        if not match:
            raise HistoryError("nothing to search for")
        bounds = parse_search_cursor(after) if after else (None, None)
        found: list[list[sqlite3.Row]] = []
        for kind, bound in zip(("message", "call"), bounds, strict=True):
            at, turn = ("m.created_at", "m.turn_id") if kind == "message" else \
                ("c.created_at", "c.turn_id")  # fmt: skip
            where, params = hit_filter_sql(self.d, filters, at, turn, self.batched)
            sql = pg_history.search_sql(kind, where, bound is not None, raw) if on_pg else \
                search_sql(kind, where, bound is not None)  # fmt: skip
            args = [match, *([bound] if bound is not None else []), *params, limit + 1]
            found.append(await self._all(sql, args))
        items, more = merge_hits(found[0], found[1], bounds, limit)
        return Page(items, items[-1]["cursor"] if more and items else None)

    # -- totals -----------------------------------------------------------------------------

    async def thread_usage(self, thread_id: str) -> Usage | None:
        """What the thread spent, all days together: the sums of its turns, by index (None:
        a room that predates costs, or no database)."""
        if not self.priced:
            return None
        return of_row(await self._one("history.thread_usage", (thread_id,)))

    @staticmethod
    def spent(item: dict[str, Any]) -> Usage:
        """What a listed turn or a turn's step spent, as a `Usage` (their tokens unpriced
        where they have no cost: a step without a price, a room that predates costs)."""
        return spent(item)

    async def counts(self) -> dict[str, Any]:
        """Totals, none of them a count of a big table: turns, threads, runs, decisions and
        the facets from counters; steps, calls and messages (append-only tables) by their
        last rowid; calls waiting for a decision from the index of open calls."""
        self._need_index()
        out: dict[str, Any] = await self._counter(["turns", "threads", "runs", "decisions"])
        for key, table in (("steps", "steps"), ("calls", "tool_calls"), ("messages", "messages")):
            last = pg_history.LAST_ID[table] if self._pg is not None else "rowid"
            row = await self._one(f"SELECT coalesce(max({last}), 0) FROM {table}")
            out[key] = row[0] if row else 0
        row = await self._one("history.suspended")
        out["suspended_calls"] = row[0] if row else 0
        status_marks = {s: Filters(status=s).marks()[0] for s in STATUSES}
        sizes = await self._counter(list(status_marks.values()))
        out["status"] = {s: sizes[m] for s, m in status_marks.items()}
        for key, prefix in (("groups", "group:"), ("origins", "origin:"), ("tools", "tool:")):
            if key == "tools" and self.batched:
                found = sums(await self._all(*tool_counters_sql()))
            else:
                rows = await self._all("history.counter_range", (prefix, prefix[:-1] + ";"))
                found = {r["name"]: r["value"] for r in rows}
            out[key] = {n[len(prefix) :]: v for n, v in sorted(found.items()) if v}
        return out

    async def count(self, filters: Filters | None = None) -> int | None:
        """The exact size of a turn list when a counter holds it (no filter, or one facet
        and no time range); None otherwise."""
        filters = filters or Filters()
        marks = filters.marks()
        if filters.since is not None or filters.until is not None or len(marks) > 1:
            return None
        if self._db is None and self._pg is None:
            return 0
        self._need_index()
        name = marks[0] if marks else "turns"
        return (await self._counter([name]))[name]
