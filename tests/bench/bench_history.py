"""History benchmark: open, page, filter, search and one turn on a room of 1,000,000 steps.

    .venv/bin/python -m tests.bench.bench_history [--fresh] [--steps N] [--pages N]

The room comes from `tests.bench.gen_history` (cached). Everything goes through
`engine.api.history.History`, as the console does (its own read-only connection, aiosqlite).

- open: a new History, its first page of turns (50) and the counts, as the screen opens;
  the first open (file maybe cold) and the median of the next ones.
- page: keyset pages of 50, newest first, walking --pages pages down (p50/p95).
- filter: first and following pages (50) of status, tool, group, origin filters and
  combinations (p50/p95 over all; per filter in the table).
- search: FTS over messages and tool calls, first page of 50 (p50/p95).
- turn: one turn with its steps, messages, calls and decisions (p50/p95).

Targets (information only; the exit status never depends on time): open < 300 ms, a page
or a filter < 5 ms at p95 with the file cached, search < 100 ms.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.api.history import Filters, History
from engine.room import Room
from tests.bench.gen_history import DEFAULT_PATH, ensure

FILTERS = {
    "status=failed": Filters(status="failed"),
    "status=denied": Filters(status="denied"),
    "status=cancelled": Filters(status="cancelled"),
    "status=waiting": Filters(status="waiting"),
    "status=done": Filters(status="done"),
    "tool=shell": Filters(tool="shell"),
    "tool=deploy": Filters(tool="deploy"),
    "group=will": Filters(group="will"),
    "group=chat": Filters(group="chat"),
    "origin=task": Filters(origin="task"),
    "thread=chat:0001": Filters(thread="chat:0001"),
    "failed+group=chat": Filters(status="failed", group="chat"),
    "tool=deploy+denied": Filters(tool="deploy", status="denied"),
    "tool=shell+30 days": Filters(
        tool="shell", since=1_735_689_600.0 + 30 * 86400, until=1_735_689_600.0 + 60 * 86400
    ),  # fmt: skip
}
SEARCHES = ["invoice", "needle123", "deploy timeout", "kube*", 'denied "not now"',
            "rollback migration database", "srv backup", "zzznothing", "error timeout 30s",
            "customer refund payment"]  # fmt: skip
TARGETS = {"open": 300.0, "page p95": 5.0, "filter p95": 5.0, "search p95": 100.0}


def ms(seconds: float) -> float:
    return seconds * 1000


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[-1] if len(xs) > 1 else xs[0]


async def timed(fn, *args, **kw):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = await fn(*args, **kw)
    return out, ms(time.perf_counter() - start)


async def bench(room: Room, pages: int) -> dict[str, float]:
    out: dict[str, float] = {}
    opens = []
    for _ in range(11):
        start = time.perf_counter()
        async with History(room) as h:
            await h.turns(limit=50)
            await h.counts()
            opens.append(ms(time.perf_counter() - start))
    out["open first"], out["open"] = opens[0], statistics.median(opens[1:])
    print(f"open (History + first page + counts): first {opens[0]:.1f} ms, "
          f"median of 10 more {out['open']:.1f} ms")  # fmt: skip
    async with History(room) as h:
        counts = await h.counts()
        print(f"room: {counts['turns']} turns, {counts['steps']} steps, {counts['calls']} "
              f"calls, {counts['messages']} messages, {counts['decisions']} decisions")  # fmt: skip
        times, after = [], None
        for _ in range(pages):
            page, t = await timed(h.turns, after=after, limit=50)
            times.append(t)
            after = page.next
        out["page p50"], out["page p95"] = statistics.median(times), p95(times)
        print(f"page of 50, {pages} pages deep: p50 {out['page p50']:.2f} ms, "
              f"p95 {out['page p95']:.2f} ms, max {max(times):.2f} ms")  # fmt: skip
        print(f"\n{'filter':<22}{'size':>8}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
        every: list[float] = []
        for name, f in FILTERS.items():
            size = await h.count(f)
            times, after = [], None
            for _ in range(20):
                page, t = await timed(h.turns, f, after=after, limit=50)
                times.append(t)
                after = page.next
                if after is None:
                    break
            every += times
            print(f"{name:<22}{'?' if size is None else size:>8}{statistics.median(times):>9.2f}"
                  f"{p95(times):>9.2f}{max(times):>9.2f}")  # fmt: skip
        out["filter p50"], out["filter p95"] = statistics.median(every), p95(every)
        print(f"{'all filter pages':<22}{'':>8}{out['filter p50']:>9.2f}{out['filter p95']:>9.2f}"
              f"{max(every):>9.2f}")  # fmt: skip
        print(f"\n{'search':<30}{'hits':>6}{'ms':>9}")
        times = []
        for _ in range(3):
            for q in SEARCHES:
                page, t = await timed(h.search, q, limit=50)
                times.append(t)
                if _ == 0:
                    print(f"{q:<30}{len(page.items):>6}{t:>9.2f}")
        out["search p50"], out["search p95"] = statistics.median(times), p95(times)
        print(f"search (3 rounds): p50 {out['search p50']:.2f} ms, "
              f"p95 {out['search p95']:.2f} ms, max {max(times):.2f} ms")  # fmt: skip
        ids = [t["turn_id"] for t in (await h.turns(limit=1000)).items]
        times = []
        for turn_id in random.Random(6).sample(ids, 100):
            _, t = await timed(h.turn, turn_id)
            times.append(t)
        out["turn p50"], out["turn p95"] = statistics.median(times), p95(times)
        print(f"\none turn (steps, messages, calls, decisions): p50 {out['turn p50']:.2f} ms, "
              f"p95 {out['turn p95']:.2f} ms")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true", help="rebuild the room")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH)
    args = parser.parse_args()
    path = ensure(args.path, steps=args.steps, fresh=args.fresh)
    size = (path / "execution.db").stat().st_size / 1e6
    print(f"agentdeck history benchmark: {path} ({size:.0f} MB), sqlite "
          f"{sqlite3.sqlite_version}, python {sys.version.split()[0]}\n")  # fmt: skip
    out = anyio.run(bench, Room.at(path), args.pages)
    print("\ntargets (information only):")
    for key, limit in TARGETS.items():
        value = out[key]
        print(f"  {'PASS' if value <= limit else 'MISS'}  {key}: {value:.2f} ms <= {limit:.0f} ms")


if __name__ == "__main__":
    main()
