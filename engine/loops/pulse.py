"""The pulse loop: turns the room's tasks/, chores/ and will.md into turn requests.

It decides only WHEN to fire and fires each thing once; it never runs a turn. Everything
after `submit` (one running turn and at most one pending request per task or chore thread,
only the newest will request) is the scheduler's coalescing, so the loop can simply fire
every new task revision, every due chore occurrence and every will change or interval.

What has fired is kept in `pulse.json` in the room. Each fire becomes exactly one request:
before a tick offers anything it writes, in pulse.json, an idempotency key for each fire
it is about to offer (`intents`: thread -> key, and the revision, occurrence or will fire
the key stands for), and the runtime commits the key with the request and never makes a
second request for a key. A process that dies after a request committed and before
pulse.json marked it fired therefore offers the same key at its next start and gets the
first request back. A key is dropped once its fire is marked (or is no longer due), so a
task deleted and written again gets a new one.

The loop never makes the scheduler drop a request. It offers with `overflow=False`: a
group whose queue is full raises QueueFull instead of applying its overflow policy (for
tasks, drop_oldest would drop a request the loop had already marked fired), and the fire
stays pending, offered again each tick; one notice says how many wait (again if more do),
one says when none does. A queued request can still be dropped later by another
submitter's offer into the same group (a client's message with meta.group = "task"): the
runtime says so in a notice, and the loop does not offer that fire again, since it did
become its one request.

- Task `tasks/<name>.{md,txt}`: fires when its revision (sha256 of the file, front matter
  included) differs from the last fired one; `enabled: false` holds it. Deleting the file
  forgets it, so the same text written again fires again.
- Chore `chores/<file>.toml`: on first sight (or when its schedule changes) the loop only
  records the moment, so the first fire is the first occurrence strictly after it: for
  `every = "15m"` that is 15 minutes after first sight. Later occurrences count from the
  last fired occurrence. All occurrences due at a tick collapse into one request for the
  latest of them, meta {"chore", "occurrence" (ISO, in tz), "missed", "schedule"}, where
  `missed` counts the earlier due occurrences it stands in for (0 when on time). A disabled
  or deleted chore is forgotten; a malformed one keeps its place until it is fixed.
  Occurrences are computed in a worker thread, each computation bounded (see
  engine.loops.pulse_schedule): one that fails is reported once and the chore skipped
  until its schedule changes; one whose schedule has ended is said once.
- Will `will.md`: fires on first sight and whenever it changes (why="changed"), and when
  `will_interval` seconds passed since the last will fire (why="interval").

File formats and size limits are described in `engine.loops.pulse_files`. A bad file, a
failed `submit` and a bad pulse.json are reported through `notice(level, text)`, once
each, and never stop the loop. A `submit` that raises is retried on the next tick unless
the exception is final (class name "Rejected" or `final = True`): then the fire is
recorded and not retried.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from engine.domain.messages import Message
from engine.loops.pulse_files import ChoreFile, Limits, Malformed, Scan, scan_room
from engine.loops.pulse_schedule import Due, ScheduleError
from engine.loops.pulse_state import State, load_state, write_atomic
from engine.room import Room
from engine.services.scheduler import QueueFull, group_for

log = logging.getLogger(__name__)


@dataclass
class _Fire:
    """One thing due now: its message, what it stands for, and the mark it leaves once the
    runtime took it (`table[name] = entry`)."""

    msg: Message
    mark: str  # the task revision, chore occurrence or will fire its key stands for
    table: State
    name: str
    entry: Any


class PulseLoop:
    """Scan the room every `interval` seconds and submit what is due.

    `submit(message, key=..., overflow=False)` is `Runtime.submit`'s contract: `key` is an
    idempotency key, and with `overflow=False` a full queue raises QueueFull.
    """

    def __init__(
        self,
        room: Room,
        submit: Callable[..., Awaitable[Any]],
        notice: Callable[[str, str], None],
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        interval: float = 1.0,
        will_interval: float = 3600.0,
        agent: str = "agent",
        limits: Limits | None = None,
    ) -> None:
        self.room = room
        self.path = room.path / "pulse.json"
        self._submit, self._notify = submit, notice
        self._clock, self._sleep = clock, sleep
        self.interval, self.will_interval, self.agent = interval, will_interval, agent
        self.limits = limits or Limits()
        self._state: State | None = None
        self._dirty = False
        self._reported: dict[Path, str] = {}  # malformed file -> revision already reported
        self._failures: dict[str, str] = {}  # thread -> submit failure already reported
        # chore -> (schedule, since, last) and the next occurrence after last: a time, None
        # (the schedule has ended) or why it cannot be computed
        self._next: dict[str, tuple[tuple[Any, ...], float | str | None]] = {}
        self._said: dict[str, str] = {}  # chore -> schedule failure or end already reported
        self._waiting: dict[str, int] = {}  # group -> fires waiting for room, as reported
        self._save_error: str | None = None

    async def run(self) -> None:
        """Tick forever; a failing tick is reported (once while it keeps failing alike)."""
        last_error: str | None = None
        while True:
            try:
                await self.tick()
                last_error = None
            except Exception as exc:
                text = f"pulse loop: tick failed: {type(exc).__name__}: {exc}"
                if text != last_error:
                    self._notice("error", text)
                last_error = text
            await self._sleep(self.interval)

    async def tick(self) -> list[Message]:
        """One scan: read the files, submit what is due, persist; return what was accepted."""
        now = self._clock()
        if self._state is None:
            self._state, problem = await anyio.to_thread.run_sync(load_state, self.path, now)
            if problem:
                self._notice("warning", problem)
        scan = await anyio.to_thread.run_sync(scan_room, self.room.path, now, self.limits)
        self._report(scan.malformed)
        fires: list[_Fire] = []
        self._tasks(scan, now, fires)
        await self._chores(scan, now, fires)
        self._will(scan, now, fires)
        fired = await self._offer(fires)
        if self._dirty:
            await self._save()
        return fired

    # -- the three sources ------------------------------------------------------------------

    def _tasks(self, scan: Scan, now: float, fires: list[_Fire]) -> None:
        known = self._table("tasks")
        for name in [name for name in known if name not in scan.task_names]:
            del known[name]
            self._dirty = True
        for task in scan.tasks:
            if not task.enabled or known.get(task.name, {}).get("revision") == task.revision:
                continue
            meta = {**task.settings, "task": task.name, "revision": task.revision}
            msg = Message(
                origin="task", sender="self", channel=None, thread_id=f"task:{task.name}",
                text=task.text, meta=meta,
            )  # fmt: skip
            entry = {"revision": task.revision, "file": self._rel(task.path), "fired_at": now}
            fires.append(_Fire(msg, task.revision, known, task.name, entry))

    async def _chores(self, scan: Scan, now: float, fires: list[_Fire]) -> None:
        known = self._table("chores")
        live = {chore.key for chore in scan.chores if chore.enabled}
        broken = {self._rel(path) for path in scan.bad_chore_files}
        for key in [key for key in known if key not in live]:
            if known[key].get("file") not in broken:
                del known[key]
                self._next.pop(key, None)
                self._dirty = True
        for chore in scan.chores:
            if not chore.enabled:
                continue
            st = self._chore_state(chore, now)
            try:
                due = await self._due(chore, st, now)
                if due is None:
                    continue
                occurrence = chore.schedule.iso(due.occurrence)
            except (ValueError, OverflowError, OSError) as exc:  # ScheduleError is a ValueError
                self._say(chore, f"{exc} (the chore is skipped until its schedule changes)")
                continue
            self._said.pop(chore.key, None)
            meta = {
                **chore.settings, "chore": chore.key, "occurrence": occurrence,
                "missed": due.count - 1, "schedule": f"{chore.schedule.kind} {chore.schedule.expr}",
            }  # fmt: skip
            msg = Message(
                origin="chore", sender="self", channel=None, thread_id=f"chore:{chore.key}",
                text=chore.text, meta=meta,
            )  # fmt: skip
            entry = {**st, "last": due.occurrence, "occurrence": occurrence, "fired_at": now}
            fires.append(_Fire(msg, occurrence, known, chore.key, entry))

    def _will(self, scan: Scan, now: float, fires: list[_Fire]) -> None:
        state = self._state_now()
        st = state.get("will")
        if not scan.will_exists:
            if st is not None:
                state["will"] = None
                self._dirty = True
            return
        if (will := scan.will) is None:
            return  # malformed: reported; keep what we know until it is fixed
        if st is None or st["revision"] != will.revision:
            why = "changed"
        elif now - st["fired_at"] >= self.will_interval:
            why = "interval"
        else:
            return
        msg = Message(
            origin="will", sender="self", channel=None, thread_id=f"will:{self.agent}",
            text=will.text, meta={"will_revision": will.revision, "why": why},
        )  # fmt: skip
        mark = f"{why} {will.revision} after {st['fired_at'] if st else None}"
        fires.append(_Fire(msg, mark, state, "will", {"revision": will.revision, "fired_at": now}))

    # -- firing and state -------------------------------------------------------------------

    async def _offer(self, fires: list[_Fire]) -> list[Message]:
        """Put each fire's key in pulse.json, then offer them; mark what the runtime took.

        The keys are on disk before any request exists: a key not yet written could be
        offered again under a new key after a crash, and make a second request.
        """
        intents: State = self._state_now().setdefault("intents", {})
        due = {fire.msg.thread_id: fire for fire in fires}
        for thread in [thread for thread in intents if thread not in due]:
            del intents[thread]  # what it stood for is marked, or no longer due
            self._dirty = True
        for thread, fire in due.items():
            if intents.get(thread, {}).get("mark") != fire.mark:
                intents[thread] = {"key": f"{thread}#{secrets.token_hex(8)}", "mark": fire.mark}
                self._dirty = True
        if fires and self._dirty and not await self._save():
            return []
        fired: list[Message] = []
        full: dict[str, str] = {}  # group -> why its queue takes no more this tick
        waiting: dict[str, Counter[str]] = {}  # group -> origin -> fires left waiting
        for fire in fires:
            thread, group = fire.msg.thread_id, group_for(fire.msg)
            if group not in full:
                try:
                    await self._submit(fire.msg, key=intents[thread]["key"], overflow=False)
                except QueueFull as exc:
                    full[group] = str(exc)
                except Exception as exc:
                    self._failed(fire, exc)
                    continue
                else:
                    self._failures.pop(thread, None)
                    self._mark(fire)
                    fired.append(fire.msg)
                    continue
            waiting.setdefault(group, Counter())[fire.msg.origin] += 1
        self._say_waiting(waiting, full)
        return fired

    def _mark(self, fire: _Fire) -> None:
        fire.table[fire.name] = fire.entry
        self._state_now()["intents"].pop(fire.msg.thread_id, None)
        self._dirty = True

    def _failed(self, fire: _Fire, exc: Exception) -> None:
        """Report a failed submit once; a final one is marked as fired, not retried."""
        thread = fire.msg.thread_id
        final = type(exc).__name__ == "Rejected" or getattr(exc, "final", False) is True
        what = f"pulse: {thread}: submit failed: {type(exc).__name__}: {exc}"
        if final:
            self._failures.pop(thread, None)
            self._notice("error", f"{what} (final: recorded as fired, not retried)")
            self._mark(fire)
        elif self._failures.get(thread) != what:
            self._failures[thread] = what
            self._notice("error", f"{what} (retrying every tick)")

    def _say_waiting(self, waiting: dict[str, Counter[str]], full: dict[str, str]) -> None:
        """Say when fires start waiting for room in a group's queue (again when more wait
        than last said), and when none waits any more; draining is not news."""
        for group, counts in waiting.items():
            if (n := sum(counts.values())) > self._waiting.get(group, 0):
                self._waiting[group] = n
                what = " and ".join(
                    f"{k} {origin}{'s' if k > 1 else ''}" for origin, k in sorted(counts.items())
                )
                self._notice("warning", f"pulse: {what} {'waits' if n == 1 else 'wait'}: "
                                        f"{full[group]}; offered again once there is room")  # fmt: skip
        for group in [group for group in self._waiting if group not in waiting]:
            del self._waiting[group]
            self._notice("info", f"pulse: nothing waits for room in group {group} any more")

    async def _due(self, chore: ChoreFile, st: State, now: float) -> Due | None:
        """What of the chore is due now. Both computations run in a worker thread (each is
        bounded, but may take a fraction of a second); the next occurrence is cached until
        the schedule or the last fire changes, a failure too, so a bad rule costs its
        bound once."""
        stamp = (chore.schedule.signature, st["since"], st["last"])
        cached = self._next.get(chore.key)
        if cached is None or cached[0] != stamp:
            try:
                nxt: float | str | None = await anyio.to_thread.run_sync(
                    chore.schedule.next_after, st["last"], st["since"]
                )
            except ScheduleError as exc:
                nxt = str(exc)
            cached = self._next[chore.key] = (stamp, nxt)
            if nxt is None:
                last = chore.schedule.iso(st["last"])
                self._say(chore, f"{chore.schedule.kind}: no occurrence after {last}; the "
                                 "schedule has ended and the chore will not fire again")  # fmt: skip
        nxt = cached[1]
        if isinstance(nxt, str):
            raise ScheduleError(nxt)
        if nxt is None or nxt > now:
            return None
        try:
            return await anyio.to_thread.run_sync(chore.schedule.due, st["last"], st["since"], now)
        except ScheduleError as exc:
            self._next[chore.key] = (stamp, str(exc))
            raise

    def _say(self, chore: ChoreFile, text: str) -> None:
        """Report something about one chore's schedule, once."""
        text = f"{chore.path}: {text}"
        if self._said.get(chore.key) != text:
            self._said[chore.key] = text
            self._notice("warning", text)

    def _chore_state(self, chore: ChoreFile, now: float) -> State:
        """The chore's entry; first sight or a changed schedule (re)anchors it at `now`."""
        known = self._table("chores")
        st = known.get(chore.key)
        file = self._rel(chore.path)
        if st is None or st.get("schedule") != chore.schedule.signature:
            st = {"schedule": chore.schedule.signature, "file": file, "since": now, "last": now}
            st |= {"occurrence": None, "fired_at": None}
        elif st.get("file") != file:
            st = {**st, "file": file}
        else:
            return st
        known[chore.key] = st
        self._dirty = True
        return st

    def _state_now(self) -> State:
        assert self._state is not None, "tick() loads the state first"
        return self._state

    def _table(self, name: str) -> State:
        return self._state_now()[name]

    def _rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.room.path).as_posix()
        except ValueError:
            return str(path)

    async def _save(self) -> bool:
        """Write pulse.json; False (reported once) if it cannot be written."""
        data = json.dumps(self._state, indent=2, sort_keys=True) + "\n"
        try:
            await anyio.to_thread.run_sync(write_atomic, self.path, data)
        except OSError as exc:
            self._dirty = True  # try again next tick; in memory nothing fires twice
            text = f"{self.path}: cannot write: {exc} (nothing fires until it can be)"
            if text != self._save_error:
                self._notice("error", text)
            self._save_error = text
            return False
        self._dirty, self._save_error = False, None
        return True

    def _report(self, malformed: list[Malformed]) -> None:
        """Report each bad file once per revision; forget files that are fine again."""
        seen: dict[Path, str] = {}
        for bad in malformed:
            seen[bad.path] = bad.revision
            if self._reported.get(bad.path) != bad.revision:
                self._notice("warning", f"{bad.path}: {bad.reason}")
        self._reported = seen

    def _notice(self, level: str, text: str) -> None:
        try:
            self._notify(level, text)
        except Exception:  # a broken notice sink must not stop the loop
            log.exception("pulse notice failed: %s: %s", level, text)
