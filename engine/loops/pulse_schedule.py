"""Chore schedules: when the next occurrence falls, and which occurrences are due now.

Three syntaxes share one interface so the pulse loop never cares which one a chore uses:
`every` (a fixed interval counted from the last fire), `cron` (five fields, via cronsim)
and `rrule` (RFC 5545, via dateutil). Times are POSIX seconds. Cron and RRULE are read as
wall-clock time in the chore's zone (`tz`, default UTC), so the same file means the same
thing on every machine, and an operator who wants "9 o'clock local" says which local.

Every computation is bounded (`bounded`): a rule that matches nothing, or too rarely to be
found, ends in a ScheduleError after a fixed amount of work instead of a walk to year 9999
(or, with INTERVAL=0, for ever). Within the bound a computation can still take a fraction
of a second, so callers on an event loop run it in a worker thread. `make_schedule` checks
a schedule when its file is read: it must have an occurrence after that day's midnight.
"""

from __future__ import annotations

import functools
import math
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from dateutil.rrule import rrule, rrulestr

T = TypeVar("T")

# Counting missed occurrences stops here; the latest due one is still found exactly.
COUNT_CAP = 10_000
# The work one computation may do, counted in calls (see `bounded`): some tenths of a
# second of one core; room for about 150 years of day-by-day search by a sub-daily rule,
# or 50,000 occurrences.
STEP_BUDGET = 1_000_000
EVERY_MIN, EVERY_MAX = 0.001, 100 * 365.25 * 86400  # seconds: 1 ms to 100 years

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_EVERY = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
# RFC 5545 3.3.10 ranges (BYSECOND without the leap second 60, which dateutil cannot make).
_RANGES = {
    "BYSECOND": (0, 59), "BYMINUTE": (0, 59), "BYHOUR": (0, 23), "BYMONTH": (1, 12),
    "BYMONTHDAY": (1, 31), "BYYEARDAY": (1, 366), "BYWEEKNO": (1, 53), "BYSETPOS": (1, 366),
}  # fmt: skip
_FROM_END = {"BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYSETPOS"}  # -n counts from the end
# One period of each fixed-length frequency, in (naive, wall-clock) seconds.
_PERIOD = {"SECONDLY": 1, "MINUTELY": 60, "HOURLY": 3600, "DAILY": 86400, "WEEKLY": 604800}


class ScheduleError(ValueError):
    """A schedule that cannot be read or computed; the text says why."""


class _Spent(BaseException):
    """Raised inside a computation that used up its budget (a BaseException, so that no
    `except Exception` in the library computing it can swallow it)."""


def bounded(fn: Callable[[], T], what: str, budget: int = STEP_BUDGET) -> T:
    """`fn()`, stopped with ScheduleError once it has made `budget` calls.

    dateutil looks for an RRULE's next occurrence in a loop that yields nothing until a day
    matches, so a rule that matches nothing walks to year 9999 (~15 s) and INTERVAL=0
    never ends; nothing outside that loop can stop it, and a thread cannot be killed. A
    profile hook counts the calls made in this thread and stops the walk from within. The
    bound is a count, not a time, so it is the same on every machine and in every test.
    """
    left = budget

    def spend(frame: Any, event: str, arg: Any) -> None:
        nonlocal left
        left -= 1
        if left < 0 and event == "call":
            raise _Spent

    previous = sys.getprofile()
    sys.setprofile(spend)
    try:
        return fn()
    except _Spent:
        raise ScheduleError(
            f"{what}: no occurrence found within the search bound "
            "(the rule matches nothing, or too rarely or slowly to be found)"
        ) from None
    except ScheduleError:
        raise
    except Exception as exc:  # dateutil raises ValueError, OverflowError, IndexError...
        raise ScheduleError(f"{what}: cannot compute an occurrence: {exc}") from None
    finally:
        sys.setprofile(previous)


@dataclass(frozen=True)
class Due:
    """The latest occurrence due now, and how many fell due since the last fire (>= 1)."""

    occurrence: float
    count: int


@dataclass(frozen=True)
class Schedule:
    """One chore schedule. `since` (first sight of the chore) anchors RRULE's DTSTART.

    `next_after` and `due` are bounded (they raise ScheduleError past the bound) and may
    take a fraction of a second: call them from a worker thread, not an event loop.
    """

    kind: str  # "every" | "cron" | "rrule"
    expr: str
    zone: tzinfo = UTC
    seconds: float = 0.0  # for "every"
    _rules: dict[datetime, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def signature(self) -> str:
        """What identifies the schedule in pulse.json; a change re-anchors the chore."""
        return f"{self.kind} {self.expr} tz={self.zone}"

    def iso(self, ts: float) -> str:
        return datetime.fromtimestamp(ts, self.zone).isoformat(timespec="seconds")

    def next_after(self, ts: float, since: float) -> float | None:
        """The first occurrence strictly after `ts`, or None if the schedule has ended."""
        if self.kind == "every":
            return ts + self.seconds
        return bounded(lambda: next(self._after(ts, since), None), self.kind)

    def due(self, last: float, since: float, now: float) -> Due | None:
        """Occurrences in (last, now]: the latest one and their number, or None."""
        if self.kind == "every":
            n = math.floor((now - last) / self.seconds)
            return Due(last + n * self.seconds, n) if n >= 1 else None
        return bounded(lambda: self._due(last, since, now), self.kind)

    # -- cron and rrule ---------------------------------------------------------------------

    def _due(self, last: float, since: float, now: float) -> Due | None:
        latest, count = None, 0
        for occ in self._after(last, since):
            if occ > now:
                break
            latest, count = occ, count + 1
            if count >= COUNT_CAP:
                latest = self._latest(now, since, latest)
                break
        return Due(latest, count) if latest is not None else None

    def _dt(self, ts: float) -> datetime:
        return datetime.fromtimestamp(ts, self.zone)

    def _after(self, ts: float, since: float) -> Iterator[float]:
        if self.kind == "cron":
            # Whole seconds: an occurrence at second s counts as "after ts" iff s > floor(ts).
            it = CronSim(self.expr, self._dt(math.floor(ts)))
            while True:
                try:
                    yield next(it).timestamp()
                except (StopIteration, CronSimError):
                    return
        else:
            for occ in self._rule(since, ts).xafter(self._dt(ts), inc=False):
                yield occ.timestamp()

    def _latest(self, now: float, since: float, known: float) -> float:
        """The latest occurrence at or before `now`, given `known`, one that is (used when
        counting hit the cap). An RRULE, which can only go forwards, is bisected: if the
        first occurrence after x is still <= now, the latest is at or after it, else
        before x. Each step costs one short forward search, however dense the rule."""
        if self.kind == "cron":
            it = CronSim(self.expr, self._dt(math.floor(now) + 1), reverse=True)
            try:
                return max(next(it).timestamp(), known)
            except (StopIteration, CronSimError):
                return known
        low, high = known, now  # low is an occurrence; none falls in (high, now]
        while high - low >= 1:  # occurrences fall on whole seconds
            found = next(self._after((low + high) / 2, since), None)
            if found is not None and found <= now:
                low = found
            else:
                high = (low + high) / 2
        return low

    def _rule(self, since: float, near: float) -> Any:
        """The RRULE with DTSTART at midnight (in `zone`) of the day the chore was first seen,
        moved forward by whole periods to just before `near`.

        Midnight, not the moment of first sight: otherwise "FREQ=DAILY;BYHOUR=9" would
        inherit the minutes and seconds of whenever the runtime happened to see the file.
        Moved forward because dateutil walks every occurrence from DTSTART: a minutely rule
        seen a year ago would walk half a million of them for each question.
        """
        start = self._dt(since).replace(hour=0, minute=0, second=0, microsecond=0)
        naive = _anchor(start.replace(tzinfo=None), self._dt(near).replace(tzinfo=None),
                        self._step)  # fmt: skip
        rule = self._rules.get(naive)
        if rule is None:
            if len(self._rules) >= 16:
                self._rules.clear()
            rule = self._rules[naive] = rrulestr(self.expr, dtstart=naive.replace(tzinfo=self.zone))
        return rule

    @functools.cached_property
    def _step(self) -> tuple[str, int] | None:
        """How DTSTART may move without changing the rule: by ("seconds", n) or ("months", n)
        at a time; None when it must stay (COUNT counts from it)."""
        try:
            parts = rrule_parts(self.expr)
            interval = int(parts.get("INTERVAL", "1"))
        except (ScheduleError, ValueError):
            return None
        freq = parts.get("FREQ", "").upper()
        if "COUNT" in parts or interval < 1:
            return None
        if freq in _PERIOD:
            return ("seconds", interval * _PERIOD[freq])
        return {"MONTHLY": ("months", interval), "YEARLY": ("months", 12 * interval)}.get(freq)


def _anchor(start: datetime, near: datetime, step: tuple[str, int] | None) -> datetime:
    """The point of the rule's period grid (periods start at `start`, `step` apart) at least
    one whole period before `near`, so the period holding `near` is generated in full.

    Moving DTSTART by whole periods keeps everything it sets by default: its time of day
    (whole days, or whole hours or minutes from midnight for sub-daily rules, whose
    defaults are only the smaller units), its weekday (whole weeks) and its day of month.
    Wall-clock arithmetic, as dateutil's own.
    """
    if step is None or near <= start:
        return start
    unit, n = step
    if unit == "seconds":
        k = int((near - start).total_seconds() // n) - 1
        return start + timedelta(seconds=k * n) if k > 0 else start
    months = (near.year - start.year) * 12 + near.month - start.month
    first = months // n - 1
    for k in range(first, max(0, first - 48), -1):
        years, month = divmod(start.month - 1 + k * n, 12)
        try:
            return start.replace(year=start.year + years, month=month + 1)
        except ValueError:  # no 31st (or 29 February) in that month: try a period earlier
            continue
    return start


def parse_every(value: object) -> float:
    """`"15m"`, `"1h30m"`, `"2d"`, `"90s"`, or a number of seconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ScheduleError(f'every: expected a duration like "15m", got {value!r}')
    if isinstance(value, str):
        text = value.strip().lower()
        parts = _EVERY.findall(text)
        if not parts or _EVERY.sub("", text).strip():
            raise ScheduleError(
                f'every: cannot read {value!r} (use a number with s, m, h or d, like "15m")'
            )
        seconds = sum(float(n) * _UNITS[unit] for n, unit in parts)
    else:
        seconds = float(value)
    if not seconds > 0:
        raise ScheduleError(f"every: the interval must be positive, got {value!r}")
    if not EVERY_MIN <= seconds <= EVERY_MAX:
        raise ScheduleError(f"every: the interval must be between 1ms and 100 years, got {value!r}")
    return seconds


def parse_zone(value: object) -> tzinfo:
    if not isinstance(value, str) or not value.strip():
        raise ScheduleError(f'tz: expected a zone name like "Europe/Berlin", got {value!r}')
    if value.strip().upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(value.strip())
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise ScheduleError(f"tz: unknown zone {value!r}") from None


def rrule_parts(expr: str) -> dict[str, str]:
    """The NAME=VALUE parts of one RRULE line (an "RRULE:" prefix allowed), names upper-case,
    with INTERVAL, COUNT and the BY* numbers checked against RFC 5545's ranges."""
    text = expr.strip()
    if text.upper().startswith("RRULE:"):
        text = text[len("RRULE:") :]
    if any(c in text for c in "\r\n:"):
        raise ScheduleError(f"rrule: one RRULE line only (no DTSTART, RDATE, EXDATE), got {expr!r}")
    parts: dict[str, str] = {}
    for item in text.split(";"):
        name, sep, value = item.partition("=")
        if not sep:
            raise ScheduleError(f"rrule: cannot read {item!r} in {expr!r} (expected NAME=VALUE)")
        parts[name.strip().upper()] = value.strip()
    for name in ("INTERVAL", "COUNT"):
        if name in parts and _number(name, parts[name]) < 1:
            raise ScheduleError(f"rrule: {name} must be at least 1, got {parts[name]}")
    for name, (low, high) in _RANGES.items():
        for item in parts[name].split(",") if name in parts else ():
            n = _number(name, item)
            if not low <= abs(n) <= high or (n < 0 and name not in _FROM_END):
                span = f"{low} to {high}" + (f" or -{high} to -{low}" if name in _FROM_END else "")
                raise ScheduleError(f"rrule: {name}={item.strip()} is out of range ({span})")
    return parts


def _number(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ScheduleError(f"rrule: {name}: {text[:40]!r} is not a whole number") from None


def make_schedule(kind: str, value: object, zone: tzinfo = UTC, *, now: float) -> Schedule:
    """Validate one schedule now, so a bad one is reported when the file is read: it must be
    readable and have an occurrence after midnight of `now`'s day (in `zone`), found
    within the bound."""
    if kind == "every":
        seconds = parse_every(value)
        return Schedule("every", str(value).strip(), zone, seconds)
    if not isinstance(value, str) or not value.strip():
        raise ScheduleError(f"{kind}: expected a non-empty string, got {value!r}")
    expr = value.strip()
    probe = datetime(2000, 1, 1, tzinfo=zone)
    if kind == "cron":
        try:
            CronSim(expr, probe)
        except CronSimError as exc:
            raise ScheduleError(f"cron: cannot read {expr!r}: {exc}") from None
    elif kind == "rrule":
        if "DTSTART" in expr.upper():
            raise ScheduleError(
                "rrule: DTSTART is not supported (occurrences count from midnight of the "
                "day the chore was first seen, in tz)"
            )
        rrule_parts(expr)
        try:
            parsed = rrulestr(expr, dtstart=probe)
        except Exception as exc:  # dateutil raises ValueError, TypeError, IndexError...
            raise ScheduleError(f"rrule: cannot read {expr!r}: {exc}") from None
        if not isinstance(parsed, rrule):
            raise ScheduleError(f"rrule: one RRULE line only, got {expr!r}")
    else:
        raise ScheduleError(f"unknown schedule kind {kind!r}")
    midnight = datetime.fromtimestamp(now, zone).replace(hour=0, minute=0, second=0, microsecond=0)
    problem = _first_problem(kind, expr, zone, midnight.timestamp())
    if problem is not None:
        raise ScheduleError(problem)
    return Schedule(kind, expr, zone)


@functools.lru_cache(maxsize=256)
def _first_problem(kind: str, expr: str, zone: tzinfo, midnight: float) -> str | None:
    """Why the schedule has no occurrence after `midnight`, or None. Cached: the pulse
    loop reads every chore file at each tick, and a bad rule costs the whole bound."""
    schedule = Schedule(kind, expr, zone)
    try:
        if schedule.next_after(midnight, midnight) is None:
            return f"{kind}: no occurrence after {schedule.iso(midnight)}"
    except ScheduleError as exc:
        return str(exc)
    return None
