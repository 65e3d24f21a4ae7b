"""The decision audit over a big room (issue 36): its pages against the floor of reading the
same rows at once, and `agentdeck audit`'s memory as the room grows.

    .venv/bin/python -m tests.bench.bench_audit [--decisions 200000] [--rounds 3]

A room is made by the runtime (its schema), then filled with synthetic calls, two thirds
of them decided by an operator or the deadline and a third by a rule at the gate. In this
process, on a read-only connection: the floor reads every decision and every rule's verdict
with their calls in two statements and no paging, and makes each its entry; the audit does
the same in pages of 1,000 (engine/store/audit.py: each table from a position by its index, merged). Then
`agentdeck audit --format jsonl` runs in a fresh interpreter on rooms of a quarter of the size
and of the full size, output to /dev/null, and its peak resident memory is read from the
child's rusage: a page at a time, it should not grow with the room. Medians over
`--rounds`, interleaved; the targets: the pages at most 3x the floor, the command's peak
memory within 20 MB from the small room to the big one. It measures; it never fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAGES_TARGET, MEMORY_TARGET_MB = 3.0, 20.0
FLOOR = (  # the audit's statements without a position or a limit
    "SELECT d.*, d.args IS NOT NULL AS edited, c.turn_id, c.thread_id, c.tool FROM decisions d"
    " LEFT JOIN tool_calls c ON c.id = d.call_id",
    "SELECT r.*, 'rule ' || substr(r.rule, 4) AS decided_by, u.pattern, u.reason, u.made_by,"
    " u.decision_id, c.turn_id, c.thread_id, c.tool FROM rule_calls r"
    " LEFT JOIN tool_calls c ON c.id = r.call_id"
    " LEFT JOIN rules u ON u.id = CAST(substr(r.rule, 4) AS INTEGER)",
)


def make_room(path: Path, calls: int) -> Path:
    """A room whose store holds `calls` decided calls (made by the runtime, filled here)."""
    from engine.providers.offline import OfflineModel
    from engine.runtime import Runtime

    async def opened() -> None:
        async with Runtime.open(path, kind="bench", provider=OfflineModel(delay=0)):
            pass

    asyncio.run(opened())
    db = sqlite3.connect(path / "execution.db")
    rng, at = random.Random(36), 1_800_000_000.0
    rows_calls, rows_decisions, rows_rules = [], [], []
    for i in range(calls):
        at += rng.random()
        call = f"c_{i:08x}"
        rows_calls.append((call, "m", f"t_{i // 3:08x}", f"thread:{i % 97}", 1, 0, "shell",
                           '{"command": "true"}', "succeeded", at, at))  # fmt: skip
        if i % 3:
            by = "deadline" if i % 11 == 0 else f"operator{i % 5}"
            rows_decisions.append((f"d_{rng.getrandbits(48):012x}", call, "resume", by,
                                   "applied", at, at, "x" * 64))  # fmt: skip
        else:
            rows_rules.append((call, f"db:{i % 7 + 1}", "allow", at))
    db.execute("PRAGMA foreign_keys = OFF")
    db.executemany("INSERT INTO tool_calls(id, model_call_id, turn_id, thread_id, step_id, idx,"
                   " tool, args, status, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                   rows_calls)  # fmt: skip
    db.executemany("INSERT INTO decisions(id, call_id, action, decided_by, status, created_at,"
                   " applied_at, args_hash) VALUES (?,?,?,?,?,?,?,?)", rows_decisions)  # fmt: skip
    db.executemany("INSERT INTO rule_calls(call_id, rule, effect, at) VALUES (?,?,?,?)", rows_rules)
    db.commit()
    db.close()
    return path


async def floor(room: Path) -> tuple[float, int]:
    """Every row read at once and made its entry: the audit's work without its pages."""
    from engine.room import Room
    from engine.store.audit import _decision, _rule
    from engine.store.reader import open_reader

    reads = await open_reader(Room.at(room))
    assert reads is not None
    try:
        start = time.perf_counter()
        n = 0
        for sql, make in zip(FLOOR, (_decision, _rule), strict=True):
            n += len([make(r) for r in await reads.fetchall(sql)])
        return time.perf_counter() - start, n
    finally:
        await reads.close()


async def pages(room: Path) -> tuple[float, int]:
    from engine.room import Room
    from engine.store.audit import page
    from engine.store.reader import open_reader

    reads = await open_reader(Room.at(room))
    assert reads is not None
    try:
        start, n, after = time.perf_counter(), 0, None
        while True:
            got = await page(reads, after=after)
            n += len(got.entries)
            if got.next is None:
                return time.perf_counter() - start, n
            after = got.next
    finally:
        await reads.close()


# `agentdeck audit` in a fresh interpreter, which then says its peak resident memory (VmHWM:
# of its own address space since exec; ru_maxrss would count the parent it was forked from)
CHILD = ("import re, sys\nfrom engine.cli import main\ncode = main(sys.argv[1:])\n"
         "peak = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]\n"
         "print(peak, file=sys.stderr)\nsys.exit(code)\n")  # fmt: skip


def command(room: Path) -> tuple[float, float]:
    """`agentdeck audit --format jsonl` to /dev/null: seconds, and its peak MB."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, "--room", str(room), "audit", "--format",
                           "jsonl"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return time.perf_counter() - start, int(done.stderr.split()[-1]) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--decisions", type=int, default=200_000, help="decided calls in the big room")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    big = make_room(work / "big", args.decisions)
    small = make_room(work / "small", args.decisions // 4)
    floors, paged, runs = [], [], {"small": [], "big": []}
    entries = 0
    for _ in range(args.rounds):
        f, n = asyncio.run(floor(big))
        p, m = asyncio.run(pages(big))
        assert n == m, (n, m)
        floors.append(f)
        paged.append(p)
        entries = m
        for name, room in (("small", small), ("big", big)):
            runs[name].append(command(room))
    f, p = statistics.median(floors), statistics.median(paged)
    print(f"{entries:,} entries ({args.decisions:,} decided calls), medians of {args.rounds}:")
    print(f"  floor (every entry at once):         {f:.2f} s")
    print(f"  audit pages of 1,000:                {p:.2f} s  = {p / f:.1f}x the floor"
          f" (target <= {PAGES_TARGET:.0f}x)")  # fmt: skip
    for name in ("small", "big"):
        secs = statistics.median(r[0] for r in runs[name])
        mb = statistics.median(r[1] for r in runs[name])
        print(f"  agentdeck audit, {name} room: {secs:.2f} s, peak {mb:.0f} MB")
    grown = statistics.median(r[1] for r in runs["big"]) - statistics.median(
        r[1] for r in runs["small"]
    )
    print(f"  peak memory grew {grown:.1f} MB from a quarter of the room to all of it"
          f" (target <= {MEMORY_TARGET_MB:.0f} MB)")  # fmt: skip


if __name__ == "__main__":
    main()
