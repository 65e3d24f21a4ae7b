"""The pulse loop: turns the room's tasks/, chores/ and will.md into turn requests.

It decides only WHEN to fire and fires each thing once; it never runs a turn. Everything
after `submit` (one running turn and at most one pending request per task or chore thread,
only the newest will request) is the scheduler's coalescing, so the loop can simply fire
every new task revision, every due chore occurrence and every will change or interval.

What has fired is kept in `pulse.json` in the room, written atomically after `submit`
returned for that fire (the scheduler makes admission durable before it returns). A
restart therefore does not lose a fire; it repeats one only if the process died in the
moment between `submit` returning and the write, and the scheduler coalesces that repeat.

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
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from engine.loops.pulse_files import ChoreFile, Limits, Malformed, Scan, scan_room
from engine.loops.pulse_schedule import Due, ScheduleError
from engine.loops.pulse_state import State, load_state, write_atomic
from engine.messages import Message
from engine.room import Room

log = logging.getLogger(__name__)


@dataclass
class _Fire:
    """One thing due now: its message, what it stands for, and the mark it leaves once the
    runtime took it (`table[name] = entry`)."""

    msg: Message
    mark: str  # the task revision, chore occurrence or will fire it stands for
    table: State
    name: str
    entry: Any


class PulseLoop:
    """Scan the room every `interval` seconds and submit what is due."""

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
        """Submit each fire; mark (and save) what the runtime took."""
        fired: list[Message] = []
        for fire in fires:
            try:
                await self._submit(fire.msg)
            except Exception as exc:
                self._failed(fire, exc)
                if self._dirty:  # a final failure is marked fired
                    await self._save()
                continue
            self._failures.pop(fire.msg.thread_id, None)
            self._mark(fire)
            await self._save()
            fired.append(fire.msg)
        return fired

    def _mark(self, fire: _Fire) -> None:
        fire.table[fire.name] = fire.entry
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
