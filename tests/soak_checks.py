"""What the crash soak checks after each kill and each settling, and the tally it keeps.

A check never stops the soak: each failure is recorded once, under its kind, by a key (the
request, turn, call, decision, marker or task it is about), with a line that says what
went wrong, so a failure seen again after the next kill is not counted twice. The soak
passes only when every kind in FAILURES is empty.

What is checked (see tests/soak.py for the workload that produces it):

- every write a client was told is durable (a submitted request, a turn it saw `done`, a
  decision answered by the API or by `agentdeck decide`) is in execution.db after every
  kill, and a decided call is never suspended again with no decision left to apply (but
  for a review: a kill left it running, its outcome unknown);
- `PRAGMA integrity_check` says ok;
- no shell call ran twice: each call's command appends its own marker to shell.log, so a
  marker seen twice (or on two calls) is a double execution; a cancelled call whose marker
  is there ran although it was denied;
- every task file dropped into tasks/ becomes exactly one turn request, and that turn ends;
- after a settling (every call decided, the runtime stopped cleanly), nothing is left
  running, waiting or queued, no turn ended in error, every acknowledged decision was
  applied as it said (or lost fairly to another), and every shell call a kill left running
  ended failed with "outcome unknown" (the settling marks each reviewed call failed)
  instead of running again.
"""

from __future__ import annotations

import re
import sqlite3
from collections import Counter
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FAILURES = (
    "lost acknowledged writes",
    "double executions",
    "integrity failures",
    "tasks run twice",
    "tasks lost",
    "cancelled calls that ran",
    "recovery failures",  # did not start or stop, work left open, a turn ended in error...
)
OPEN_CALLS = ("new", "running", "suspended", "resuming")
MARKER = re.compile(r"\bmk_[0-9a-z_]+\b")
# in the workspace, where commands run (`>> shell.log`): the shell's sandbox lets them
# write nothing else
SHELL_LOG = "workspace/shell.log"


@dataclass(frozen=True)
class Call:
    turn_id: str
    thread_id: str
    tool: str
    status: str
    error: str | None
    decision_id: str | None
    marker: str | None  # the shell command's marker, if it has one
    reviewed: bool = False  # suspended for a review: a kill left it running (it was decided)


@dataclass(frozen=True)
class Snapshot:
    """execution.db as it stands, read without owning the room."""

    integrity: str
    requests: dict[str, tuple[str, str]]  # id -> (thread_id, status)
    turns: dict[str, tuple[str, str, str | None]]  # id -> (thread_id, status, reason)
    calls: dict[str, Call]
    decisions: dict[str, tuple[str, str, str, str]]  # id -> (call_id, action, by, status)

    def open_work(self) -> bool:
        """A turn ran or a call was open: the kill interrupted something."""
        running = any(status == "running" for _, status, _ in self.turns.values())
        return running or any(c.status in ("new", "running", "resuming")
                              for c in self.calls.values())  # fmt: skip

    def shell_running(self) -> bool:
        return any(c.tool == "shell" and c.status in ("running", "resuming")
                   for c in self.calls.values())  # fmt: skip


def snapshot(db: Path, *, integrity: bool = True) -> Snapshot:
    """Read execution.db read-only (a runtime may be writing it); `integrity=False` skips
    the integrity check (a poll, not a check)."""
    uri = f"file:{db}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)) as conn:
        conn.execute("BEGIN")  # one read transaction: a consistent view while a runtime writes
        checked = "\n".join(r[0] for r in conn.execute("PRAGMA integrity_check")) if (
            integrity) else "ok"  # fmt: skip
        requests = {r[0]: (r[1], r[2])
                    for r in conn.execute("SELECT id, thread_id, status FROM turn_requests")}  # fmt: skip
        turns = {r[0]: (r[1], r[2], r[3])
                 for r in conn.execute("SELECT id, thread_id, status, reason FROM turns")}  # fmt: skip
        calls = {}
        for r in conn.execute(
            "SELECT id, turn_id, thread_id, tool, status, error, decision_id, args, awaiting"
            " FROM tool_calls"
        ):
            found = MARKER.search(r[7]) if r[3] == "shell" else None
            calls[r[0]] = Call(*r[1:7], marker=found.group(0) if found else None,
                               reviewed=r[4] == "suspended" and r[8] == "review")  # fmt: skip
        decisions = {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute(
            "SELECT id, call_id, action, decided_by, status FROM decisions")}  # fmt: skip
    return Snapshot(checked, requests, turns, calls, decisions)


def executions(room: Path) -> Counter[str]:
    """How often each marker's command ran (shell.log holds one line per run)."""
    try:
        return Counter(MARKER.findall((room / SHELL_LOG).read_text()))
    except FileNotFoundError:
        return Counter()


@dataclass
class Tally:
    """Kills, what was acknowledged, and every failure found, each counted once."""

    kills: int = 0
    busy_kills: int = 0  # a turn ran or a call was open when the kill landed
    shell_kills: int = 0  # a shell call was running (or being resumed)
    startup_kills: int = 0  # before the runtime said it was ready (recovery, first scans)
    seen: Counter[str] = field(default_factory=Counter)  # acks and work, by kind
    failures: dict[str, dict[str, str]] = field(
        default_factory=lambda: {kind: {} for kind in FAILURES}
    )

    def fail(self, kind: str, key: str, what: str) -> None:
        self.failures[kind].setdefault(key, what)

    def failed(self) -> int:
        return sum(len(found) for found in self.failures.values())

    def summary(self) -> str:
        s = self.seen
        counts = ", ".join(f"{kind} {len(self.failures[kind])}" for kind in FAILURES)
        return (
            f"kills {self.kills} ({self.busy_kills} with work open, {self.shell_kills} during "
            f"a shell call, {self.startup_kills} during startup); acknowledged: "
            f"{s['submit']} requests, {s['done']} done turns, {s['decision']} decisions "
            f"+ {s['cli-decision']} by agentdeck decide; {s['shell runs']} shell runs, "
            f"{s['task']} tasks dropped; {counts}"
        )

    def details(self, limit: int = 5) -> list[str]:
        """The first few failures of each kind, for the report."""
        lines = []
        for kind in FAILURES:
            for key, what in list(self.failures[kind].items())[:limit]:
                lines.append(f"{kind}: {key}: {what}")
        return lines

    # -- the checks -------------------------------------------------------------------------

    def check(self, snap: Snapshot, acks: list[dict[str, Any]], ran: Counter[str],
              where: str) -> None:  # fmt: skip
        """What must hold at any moment, even right after a kill."""
        if snap.integrity != "ok":
            self.fail("integrity failures", where, snap.integrity[:300])
        queued = {call for call, _, _, status in snap.decisions.values() if status == "queued"}
        for ack in acks:
            self._check_ack(snap, ack, queued, where)
        shell = [(cid, c) for cid, c in snap.calls.items() if c.marker]
        for marker, n in ran.items():
            if n > 1:
                self.fail("double executions", marker, f"shell command ran {n} times ({where})")
        calls_of = Counter(c.marker for _, c in shell)
        for marker, n in calls_of.items():
            if n > 1:
                self.fail("double executions", f"calls {marker}",
                          f"{n} calls carry one command ({where})")  # fmt: skip
        for cid, c in shell:
            if c.status == "cancelled" and ran[c.marker or ""]:
                self.fail("cancelled calls that ran", cid, f"{c.marker} ran ({where})")
        for what, threads in (("requests", [t for t, _ in snap.requests.values()]),
                              ("turns", [t for t, _, _ in snap.turns.values()])):  # fmt: skip
            for thread, n in Counter(t for t in threads if t.startswith("task:")).items():
                if n > 1:
                    self.fail("tasks run twice", thread, f"{n} {what} ({where})")

    def _check_ack(self, snap: Snapshot, ack: dict[str, Any], queued: set[str],
                   where: str) -> None:  # fmt: skip
        kind = ack["kind"]
        lost = "lost acknowledged writes"
        if kind == "submit" and ack["request"] not in snap.requests:
            self.fail(lost, f"request {ack['request']}", f"submitted, then missing ({where})")
        elif kind == "done":
            turn = snap.turns.get(ack["turn"])
            if turn is None or turn[1] != "done":
                self.fail(lost, f"turn {ack['turn']}",
                          f"seen done, then {turn[1] if turn else 'missing'} ({where})")  # fmt: skip
        elif kind in ("decision", "cli-decision"):
            call_id = ack["call"]
            if kind == "decision":
                recorded = ack["id"] in snap.decisions
            else:  # its id stays inside the command: find it by call, action and author
                recorded = any(d[:3] == (call_id, ack["action"], "operator")
                               for d in snap.decisions.values())  # fmt: skip
            if not recorded:
                self.fail(lost, f"decision on {call_id}", f"{kind} answered, then missing "
                          f"({where})")  # fmt: skip
                return
            call = snap.calls.get(call_id)
            if (call is not None and call.status == "suspended" and not call.reviewed
                    and call_id not in queued):  # fmt: skip
                self.fail(
                    lost,
                    f"decision on {call_id}",
                    f"decided, then suspended again with no decision to apply ({where})",
                )

    def check_settled(
        self, snap: Snapshot, acks: list[dict[str, Any]], ran: Counter[str],
        left_running: Iterable[str], tasks: list[str], where: str,
    ) -> None:  # fmt: skip
        """What must hold once every call was decided and the runtime stopped cleanly."""
        self.check(snap, acks, ran, where)
        bad = "recovery failures"
        for tid, (_, status, reason) in snap.turns.items():
            if status != "done":
                self.fail(bad, f"turn {tid}", f"still {status} after settling ({where})")
            elif reason == "error":
                self.fail(bad, f"turn {tid}", f"ended with a runtime error ({where})")
        for rid, (thread, status) in snap.requests.items():
            if status == "queued":
                self.fail(bad, f"request {rid}", f"{thread}: still queued after settling "
                          f"({where})")  # fmt: skip
        for cid, c in snap.calls.items():
            if c.status in OPEN_CALLS:
                self.fail(bad, f"call {cid}", f"{c.tool} still {c.status} after settling "
                          f"({where})")  # fmt: skip
            elif c.marker and c.status == "succeeded" and not ran[c.marker]:
                self.fail(bad, f"call {cid}", f"succeeded but never ran ({where})")
        for cid in left_running:
            c = snap.calls.get(cid)
            if c is not None and not (
                c.status == "failed" and "outcome unknown" in (c.error or "")
            ):
                self.fail("double executions", f"call {cid}",
                          f"left running by a kill, then {c.status} ({where})")  # fmt: skip
        for ack in acks:
            if ack["kind"] == "decision":
                self._check_applied(snap, ack, where)
        self._check_tasks(snap, tasks, where)

    def _check_applied(self, snap: Snapshot, ack: dict[str, Any], where: str) -> None:
        decision = snap.decisions.get(ack["id"])
        call = snap.calls.get(ack["call"])
        if decision is None or call is None:
            return  # said by `check`
        status, lost = decision[3], "lost acknowledged writes"
        if status == "queued":
            self.fail(lost, f"decision {ack['id']}", f"never applied ({where})")
        elif status == "applied":
            wanted = ("cancelled",) if ack["action"] == "cancel" else ("succeeded", "failed")
            reviewed = call.status == "failed" and "outcome unknown" in (call.error or "")
            if reviewed:  # it ran as decided, a kill lost its outcome, its review failed it
                return
            if call.decision_id != ack["id"] or call.status not in wanted:
                self.fail(lost, f"decision {ack['id']}", f"applied, but the call is "
                          f"{call.status} by {call.decision_id} ({where})")  # fmt: skip

    def _check_tasks(self, snap: Snapshot, tasks: list[str], where: str) -> None:
        requests: dict[str, list[str]] = {}
        for rid, (thread, _) in snap.requests.items():
            requests.setdefault(thread, []).append(rid)
        for name in tasks:
            got = requests.get(f"task:{name}", [])
            if not got:
                self.fail("tasks lost", name, f"dropped, never became a request ({where})")
            elif not any(snap.turns.get(rid, ("", "", None))[1] == "done" for rid in got):
                self.fail("tasks lost", name, f"its request never ran to the end ({where})")
