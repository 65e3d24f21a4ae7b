"""Chore schedules: when the next occurrence falls, and which occurrences are due now.

Three syntaxes share one interface so the pulse loop never cares which one a chore uses:
`every` (a fixed interval counted from the last fire), `cron` (five fields, via cronsim)
and `rrule` (RFC 5545, via dateutil). Times are POSIX seconds. Cron and RRULE are read as
wall-clock time in the chore's zone (`tz`, default UTC), so the same file means the same
thing on every machine, and an operator who wants "9 o'clock local" says which local.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from dateutil.rrule import rrulestr

# Counting missed occurrences stops here; the latest due one is still found exactly.
COUNT_CAP = 10_000

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_EVERY = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


class ScheduleError(ValueError):
    """A schedule that cannot be read; the text says why."""


@dataclass(frozen=True)
class Due:
    """The latest occurrence due now, and how many fell due since the last fire (>= 1)."""

    occurrence: float
    count: int


@dataclass(frozen=True)
class Schedule:
    """One chore schedule. `since` (first sight of the chore) anchors RRULE's DTSTART."""

    kind: str  # "every" | "cron" | "rrule"
    expr: str
    zone: tzinfo = UTC
    seconds: float = 0.0  # for "every"
    _rules: dict[float, Any] = field(default_factory=dict, compare=False, repr=False)

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
        return next(self._after(ts, since), None)

    def due(self, last: float, since: float, now: float) -> Due | None:
        """Occurrences in (last, now]: the latest one and their number, or None."""
        if self.kind == "every":
            n = math.floor((now - last) / self.seconds)
            return Due(last + n * self.seconds, n) if n >= 1 else None
        latest, count = None, 0
        for occ in self._after(last, since):
            if occ > now:
                break
            latest, count = occ, count + 1
            if count >= COUNT_CAP:
                latest = self._latest(now, since) or latest
                break
        return Due(latest, count) if latest is not None else None

    # -- cron and rrule ---------------------------------------------------------------------

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
            for occ in self._rule(since).xafter(self._dt(ts), inc=False):
                yield occ.timestamp()

    def _latest(self, now: float, since: float) -> float | None:
        """The latest occurrence at or before `now` (used when counting hit the cap)."""
        if self.kind == "cron":
            it = CronSim(self.expr, self._dt(math.floor(now) + 1), reverse=True)
            try:
                return next(it).timestamp()
            except (StopIteration, CronSimError):
                return None
        occ = self._rule(since).before(self._dt(now), inc=True)
        return occ.timestamp() if occ is not None else None

    def _rule(self, since: float) -> Any:
        """The RRULE with DTSTART at midnight (in `zone`) of the day the chore was first seen.

        Midnight, not the moment of first sight: otherwise "FREQ=DAILY;BYHOUR=9" would
        inherit the minutes and seconds of whenever the runtime happened to see the file.
        """
        rule = self._rules.get(since)
        if rule is None:
            start = self._dt(since).replace(hour=0, minute=0, second=0, microsecond=0)
            rule = self._rules[since] = rrulestr(self.expr, dtstart=start)
        return rule


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


def make_schedule(kind: str, value: object, zone: tzinfo = UTC) -> Schedule:
    """Validate one schedule now, so a bad one is reported when the file is read."""
    if kind == "every":
        seconds = parse_every(value)
        return Schedule("every", str(value).strip(), zone, seconds)
    if not isinstance(value, str) or not value.strip():
        raise ScheduleError(f"{kind}: expected a non-empty string, got {value!r}")
    expr = value.strip()
    probe = datetime(2000, 1, 1, tzinfo=zone)
    if kind == "cron":
        try:
            next(CronSim(expr, probe))
        except (CronSimError, StopIteration) as exc:
            raise ScheduleError(f"cron: cannot read {expr!r}: {exc or 'no occurrence'}") from None
        return Schedule("cron", expr, zone)
    if kind == "rrule":
        if "DTSTART" in expr.upper():
            raise ScheduleError(
                "rrule: DTSTART is not supported (occurrences count from midnight of the "
                "day the chore was first seen, in tz)"
            )
        try:
            rrulestr(expr, dtstart=probe)
        except Exception as exc:  # dateutil raises ValueError, TypeError, IndexError...
            raise ScheduleError(f"rrule: cannot read {expr!r}: {exc}") from None
        return Schedule("rrule", expr, zone)
    raise ScheduleError(f"unknown schedule kind {kind!r}")
