"""Retention: a room's disk stays bounded where its operator asks (`[retention]`,
engine/config_retention.py; `agentdeck gc`).

Only finished (`done`) turns are pruned, never one with a call still open (running,
waiting for a decision or for a review after a crash), oldest first: those that ended more
than `days` ago, then, while the store uses more than `gb`, the oldest finished turns. What
pruning a turn does, table by table, and why:

- `turns`: kept, as the turn's summary (status, reason, origin, thread, group, times,
  tokens, cost, answer), marked `pruned_at` with its step count (`pruned_steps`): history
  lists the turn as it was and says what went.
- `decisions`: kept whole. They are the record of what an operator approved or refused,
  and the rules they made point at them.
- `tool_calls`: kept, slimmed. A decision names its call by id only: the call's row is what
  ties the decision to its turn and tool (history reads them so), and keeps the turn's
  marks (tool:, failed, denied) and call count true. Its result and metadata go, its error
  is cut to 200 characters, its arguments go unless a decision names it (what was
  approved is part of the audit).
- `steps`, `checkpoints`, `events`: deleted. Steps and checkpoints serve a turn that can
  still run (replay, crash repair); events are the outbox of the bus projection, which
  has copied them. The newest step and event row of the room are never deleted: step ids
  and the bus's sequence go on from them.
- the bus (bus/events.db): the turn's events deleted (by their seqs, before the truth's,
  so that a pass cut short finds them again).
- `outbox`: an answer sent or dropped goes; one still owed or dead stays for delivery and
  the operator.
- `messages`: the thread's conversation, which the runtime loads to continue the thread
  (engine/services/supervisor.py reads every entry; engine/turn/view.py sends those after
  the newest compaction's summary). So its entries are kept, by position (a compaction
  marker names entries by index), and only those the thread's newest compaction covers
  (the summary stands for them) lose their outputs: a tool result's text and the
  arguments of the calls an assistant entry asked for, each left as a short note. The
  words of user and assistant entries stay; a thread keeps going with the same requests
  as before. (An operator's undo of that compaction would show the notes in place of the
  outputs.)
- `rule_calls`, `usage`, `turn_requests`, `turn_marks`, `instructions`: kept (small, and
  read for rule use counts, spending, idempotency and history's filters).

A pass prunes `BATCH` turns per transaction through the store's one writer, so a running
room's checkpoints interleave with it, and then gives freed pages back to the disk where
the store does so by itself (engine/store/space.py). The first pass in a room makes the
index of events by turn that it reads (engine/store/retention.py): a room that never
prunes never pays for it; a dry run makes it too, and changes no row. The owner runs a pass at start and
every `every_hours`; `agentdeck gc` runs one now, through the owner when there is one.
"""

from __future__ import annotations

import json
import logging
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from engine.config import Config
from engine.config_retention import GB
from engine.domain.messages import ConvMessage
from engine.domain.retention import GcReport, SpaceView
from engine.store import Store
from engine.store import retention as rows
from engine.store.space import files_of

BATCH = 100  # turns pruned in one transaction
DAY = 86400.0
log = logging.getLogger("agentdeck")


class Retention:
    """A room's retention: one pass at a time (the owner's own, an operator's gc)."""

    _of: weakref.WeakKeyDictionary[Store, Retention] = weakref.WeakKeyDictionary()

    def __init__(self, store: Store, room: Path, config: Config,
                 clock: Callable[[], float]) -> None:  # fmt: skip
        from engine.services.projector import bus_path

        self.store, self.room, self.clock = store, room, clock
        self.settings = config.retention
        self.bus = bus_path(room, config.bus)
        self._lock = anyio.Lock()

    @classmethod
    def of(cls, store: Store, room: Path, config: Config, clock: Callable[[], float]) -> Retention:
        """The retention of the room whose store is `store` (one per store, so that its
        passes never overlap)."""
        found = cls._of.get(store)
        if found is None:
            found = cls._of[store] = cls(store, room, config, clock)
        return found

    async def run(self, sleep: Callable[[float], Awaitable[Any]]) -> None:
        """The owner's passes: one now, then one every `every_hours`, until cancelled."""
        while True:
            try:
                report = await self.gc()
                if report.turns:
                    log.info("retention pruned %d turns (%d steps, %d events; about %d bytes)",
                             report.turns, report.steps, report.events, report.freed_estimate)  # fmt: skip
            except Exception:  # (a full disk, a database gone away: the next pass tries again)
                log.warning("retention failed", exc_info=True)
            await sleep(self.settings.every_hours * 3600)

    async def gc(self, *, dry_run: bool = False, vacuum: bool = False,
                 days: float | None = None, gb: float | None = None) -> GcReport:  # fmt: skip
        """One pass with the room's settings (`days`, `gb`: these instead, for this pass);
        `dry_run`: say what it would prune, and change nothing; `vacuum`: give all freed
        space back to the disk, rewriting the database if it must."""
        days = self.settings.days if days is None else days
        gb = self.settings.gb if gb is None else gb
        async with self._lock:
            return await _Pass(self, days, gb, dry_run).run(vacuum)

    async def space(self) -> tuple[SpaceView, bool]:
        """The store's size and the bus file's, and whether the store gives freed space
        back to the disk by itself."""
        found = await self.store.space()
        bus = await anyio.to_thread.run_sync(files_of, self.bus)
        return SpaceView(file_bytes=found.file_bytes, used_bytes=found.used_bytes,
                         bus_bytes=bus), found.returns  # fmt: skip


class _Pass:
    """One walk over the finished turns, oldest first, pruning those the limits take."""

    def __init__(self, owner: Retention, days: float | None, gb: float | None,
                 dry_run: bool) -> None:  # fmt: skip
        self.owner, self.store = owner, owner.store
        self.now = owner.clock()
        self.cutoff = -math.inf if days is None else self.now - days * DAY
        self.report = GcReport(dry_run=dry_run, days=days, gb=gb,
                               before=SpaceView(file_bytes=0, used_bytes=0))  # fmt: skip
        self.gb = gb
        self.need = 0  # bytes the gb limit still wants freed
        self.covers: dict[str, int] = {}  # thread -> entries its newest compaction covers

    async def run(self, vacuum: bool) -> GcReport:
        report = self.report
        await self.store.write([rows.events_indexed()])  # (a dry run too: no row changes)
        report.before, returns = await self.owner.space()
        if self.gb is not None:
            self.need = max(0, report.before.used_bytes - int(self.gb * GB))
        before = math.inf if self.need > 0 else self.cutoff
        after: tuple[float, str] = (-math.inf, "")
        while before > -math.inf:
            page = await rows.candidates(self.store, before, after, BATCH)
            if not page:
                break
            after = (page[-1].ended_at, page[-1].turn_id)
            weights = {
                w.turn_id: w for w in await rows.weights(self.store, [c.turn_id for c in page])
            }
            taken = []
            for c in page:
                if not (c.ended_at < self.cutoff or self.need > 0):
                    break
                taken.append(c)
                self.need -= weights[c.turn_id].bytes
            if taken:
                await self._prune(taken, [weights[c.turn_id] for c in taken])
            if len(taken) < len(page):
                break
            await anyio.lowlevel.checkpoint()
        if not report.dry_run and (report.turns or vacuum):
            await self.store.index()  # the full-text index lets the old text go first
            await self.store.reclaim(full=vacuum)
            report.vacuumed = vacuum
        if not report.dry_run:
            report.after = (await self.owner.space())[0]
        if report.turns and not vacuum and not returns:
            report.note = ("the freed space is reused, not given back to the disk; "
                           "`agentdeck gc --vacuum` gives it back (it holds the room's writes "
                           "while it rewrites the database)")  # fmt: skip
        return report

    async def _prune(self, taken: list[rows.Candidate], weights: list[rows.Weight]) -> None:
        report, ids = self.report, [c.turn_id for c in taken]
        slims = await self._slimmed(taken)
        report.turns += len(taken)
        report.steps += sum(w.steps for w in weights)
        report.calls += sum(w.calls for w in weights)
        report.events += sum(w.events for w in weights)
        report.messages += len(slims)
        report.freed_estimate += sum(w.bytes for w in weights) + sum(s[3] for s in slims)
        report.oldest_ended_at = report.oldest_ended_at or taken[0].ended_at
        report.newest_ended_at = taken[-1].ended_at
        if report.dry_run:
            return
        seqs = await rows.event_ids(self.store, ids)  # the bus first: a pass cut short
        report.bus_events += await anyio.to_thread.run_sync(  # finds them again next time
            rows.bus_forget, self.owner.bus, str(self.owner.room), seqs
        )
        ops = rows.pruned(ids, self.now)
        ops += [rows.message_slimmed(m, text, body) for m, text, body, _ in slims]
        await self.store.write(ops)

    async def _slimmed(self, taken: list[rows.Candidate]) -> list[tuple[int, str, str, int]]:
        """The turns' conversation entries that the newest compaction of their thread
        covers, without their outputs: (message id, text, body, bytes saved)."""
        for thread in {c.thread_id for c in taken} - set(self.covers):
            self.covers[thread] = covered(await rows.markers(self.store, thread))
        out = []
        day = time.strftime("%Y-%m-%d", time.gmtime(self.now))
        for r in await rows.outputs(self.store, [c.turn_id for c in taken]):
            if r["seq"] >= self.covers.get(r["thread_id"], 0):
                continue
            found = slimmed(r["body"], day)
            if found is not None:
                text, body = found
                out.append((int(r["id"]), text, body, max(0, len(r["body"]) - len(body))))
        return out


def covered(markers: list[tuple[int, str]]) -> int:
    """How many leading entries of a thread its compaction in effect stands for (0: none),
    from its system entries (seq, body): the newest marker not undone (as
    engine/turn/view.py's `marker_of` reads the whole log)."""
    undone: set[int] = set()
    for seq, body in reversed(markers):
        try:
            mark = json.loads(body).get("compaction")
        except (ValueError, AttributeError):
            continue
        if not isinstance(mark, dict):
            continue
        if mark.get("kind") == "undo":
            undone.add(int(mark.get("of", -1)))
        elif seq not in undone:
            return int(mark.get("covers", 0))
    return 0


def slimmed(body: str, day: str) -> tuple[str, str] | None:
    """A tool result's or an assistant entry's (text, body) without its outputs: the
    result's text, the arguments of the calls it asked for; None when it has none left."""
    try:
        msg = ConvMessage.model_validate_json(body)
    except ValueError:
        return None
    note = f"[output pruned {day}]"
    if msg.role == "tool":
        if msg.text.startswith("[output pruned") or len(msg.text) <= len(note):
            return None
        msg = msg.model_copy(update={"text": note})
    elif msg.tool_calls and any(c.arguments for c in msg.tool_calls):
        calls = [c.model_copy(update={"arguments": {}}) for c in msg.tool_calls]
        msg = msg.model_copy(update={"tool_calls": calls})
    else:
        return None
    return msg.text, msg.model_dump_json()
