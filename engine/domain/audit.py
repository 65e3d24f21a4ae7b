"""The room's decision audit: every answer a suspended or gated call got, whoever gave it.

An entry is one decision of the room, of one of two kinds:

- `decision`: a row of the decisions table, an operator's (named by `decided_by`), the
  approval deadline's (`deadline`) or a reviewer's, with what became of it (`status`:
  queued, applied, duplicate, superseded, refused; `note` says why);
- `rule`: a rule's verdict at the gate (a row of rule_calls): a call allowed, asked for or
  denied by a rule with no operator asked. Its `decided_by` names the rule (`rule 12`, or
  `agentdeck.toml rule <fingerprint>` for one of the file's), `action` is its effect.

Entries are ordered by when they were recorded, then by key (a decision's id, a rule
verdict's call id), then by kind, and paged by that position (`cursor`), oldest first.
The store reads them (engine/store/audit.py); `agentdeck audit`, `GET /v1/audit` and the
console's export show them. Here: the model, positions, times an operator writes, and the
CSV and JSON lines of an export.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Kind = Literal["decision", "rule"]
KINDS: tuple[Kind, ...] = ("decision", "rule")  # in this order at one time and key
MAX_PAGE = 1000  # entries of one page


class AuditError(ValueError):
    """Bad input to the audit (a time, a position, a kind): says what."""


class AuditEntry(BaseModel):
    """One decision of the room (see the module)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    kind: Kind
    decided_by: str  # an operator's name, `deadline`, `rule 12`, `agentdeck.toml rule <fp>`
    recorded_at: float
    applied_at: float | None = None  # a decision: when applied, superseded or refused
    call_id: str
    turn_id: str | None = None  # None: a decision naming a call the room has no row of
    thread_id: str | None = None
    tool: str | None = None
    action: str  # a decision: resume | cancel | fail | rerun; a rule: allow | ask | deny
    status: str  # a decision: queued | applied | duplicate | superseded | refused; a rule: applied
    note: str | None = None  # why (a duplicate's winner, a refusal); a rule: who made it
    reason: str = ""  # a cancel's reason the model read; a rule: why it was made
    args_hash: str | None = None  # the SHA-256 of the arguments an approval was bound to
    edited: bool = False  # resumed with edited arguments
    use_result: bool = False  # resumed with a result instead of running
    remember: str | None = None  # a decision made into a rule: once | thread | room
    pattern: str | None = None  # that rule's pattern; a rule entry: the rule's own
    sandbox: str | None = None  # a decision: default | network | outside; a rule: None
    decision_id: str | None = None
    rule: str | None = None  # a rule entry's rule: db:<id> or toml:<fingerprint>
    cursor: str  # the position after this entry (`after` of the next page)


class AuditPage(BaseModel):
    """Entries oldest first, and the position of the next page (None: the last page)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    entries: list[AuditEntry]
    next: str | None = None


# -- positions ---------------------------------------------------------------------------------


def cursor(at: float, key: str, kind: Kind) -> str:
    """The position of an entry: the next page starts after it (repr keeps the float exact)."""
    return f"{at!r}:{kind}:{key}"


def parse_cursor(text: str) -> tuple[float, str, Kind]:
    """(recorded_at, key, kind) of a position `cursor` made."""
    at, _, rest = text.partition(":")
    kind, sep, key = rest.partition(":")
    try:
        value = float(at)
    except ValueError:
        value = math.nan
    if not sep or kind not in KINDS or not math.isfinite(value):
        raise AuditError(f"bad cursor {text[:80]!r}: use an entry's `cursor` or a page's `next`")
    return value, key, kind  # type: ignore[return-value]


def order(at: float, key: str, kind: str) -> tuple[float, str, int]:
    """What entries are sorted by: time, key, kind."""
    return at, key, _RANK[kind]


_RANK: dict[str, int] = {kind: i for i, kind in enumerate(KINDS)}


# -- times an operator writes ------------------------------------------------------------------

_AGE = re.compile(r"^\s*(\d{1,12}(?:\.\d{1,6})?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(text: str, now: float | None = None) -> float:
    """Unix seconds from an ISO date or time (local time when it names no zone) or an age
    (`90s`, `30m`, `2h`, `3d`, `1w` before `now`)."""
    from dateutil.parser import isoparse

    if m := _AGE.match(text):
        return (time.time() if now is None else now) - float(m[1]) * _UNIT[m[2].lower()]
    try:
        at = isoparse(text.strip()).timestamp()
    except (ValueError, OverflowError, OSError):
        at = math.nan
    if not math.isfinite(at):
        raise AuditError(
            f"bad time {text[:80]!r}: give an ISO date or time (2026-01-31, 2026-01-31T14:00, "
            "2026-01-31T14:00Z) or an age (90s, 30m, 2h, 3d, 1w)"
        )
    return at


# -- an export's lines -------------------------------------------------------------------------

CSV_FIELDS = ("recorded_at", "applied_at", "kind", "decided_by", "action", "status", "tool",
              "call_id", "turn_id", "thread_id", "args_hash", "edited", "use_result",
              "remember", "pattern", "sandbox", "reason", "note", "decision_id", "rule",
              "cursor")  # fmt: skip
FORMULA = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet reads a cell starting so as a formula


def json_line(entry: AuditEntry) -> str:
    """An entry as one line of JSON (ASCII: any other character escaped)."""
    return json.dumps(entry.model_dump(mode="json"), separators=(",", ":"))


def csv_text(entries: Iterable[AuditEntry], header: bool = False) -> str:
    """Entries as CSV rows (RFC 4180: every field quoted, CRLF between rows): times in UTC
    ISO 8601, every field text, a text that a spreadsheet would run as a formula (starting
    with = + - @, a tab or a carriage return) behind an apostrophe."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\r\n")
    if header:
        writer.writerow(CSV_FIELDS)
    for entry in entries:
        writer.writerow([_cell(name, getattr(entry, name)) for name in CSV_FIELDS])
    return out.getvalue()


def _cell(name: str, value: Any) -> str:
    if value is None:
        return ""
    if name in ("recorded_at", "applied_at"):
        return iso(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return "'" + text if text.startswith(FORMULA) else text


def iso(at: float) -> str:
    """Unix seconds as UTC ISO 8601 to the microsecond (`2026-01-31T14:00:00.000000Z`)."""
    try:
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (ValueError, OverflowError, OSError):
        return repr(at)
