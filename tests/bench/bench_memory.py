"""Memory of one long-lived runtime: many threads, one short turn each, on a fresh room.

    .venv/bin/python -m tests.bench.bench_memory [--threads 100000] [--every 10000]
        [--concurrency 64] [--cache-mb 64] [--model offline|noop] [--tracemalloc]

Each thread gets one turn of the offline model (`calc 1+1`: a call of the built-in calc,
then the answer that quotes it: two steps) or, with `--model noop`, of a model that only
answers (one step); `--concurrency` turns run at once (the chat group and the runtime
allow that many), synchronous=NORMAL. Every `--every` threads the process's resident
memory (RSS, /proc/self/statm) and the Python allocator's blocks in use
(sys.getallocatedblocks, after a gc) are printed, beside what the runtime keeps: the
conversations in memory and their estimated bytes, its requests, the budgets' threads.
`--cache-mb` sets [runtime] conversation_cache_bytes (64 MiB by default, about 16,000
such threads; `--cache-mb -1`: no bound, what a runtime kept before issue 35).
`--tracemalloc` also prints the traced Python memory (slower: about 2x).

At the end: the slope of RSS (and of blocks) per 10,000 threads after the warm-up (the
first third of the run: the conversation cache fills, SQLite's page cache, the allocator's
arenas), by least squares over the later samples, against the level at the end of the
warm-up. Target (information only; the exit status never depends on it): flat, a slope of
at most 1% of that level per 10,000 threads.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.config import Config, GroupSettings, RuntimeConfig, StoreConfig
from engine.domain.messages import Message
from engine.providers.base import Provider
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.bench.bench_steps import NoopModel

FLAT = 0.01  # of the warm-up level, per 10,000 threads
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of y over x, per 10,000 x."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    return sxy / sxx * 10_000 if sxx else 0.0


async def run(root: Path, args: argparse.Namespace) -> list[dict[str, float]]:
    cache = 1024**4 if args.cache_mb < 0 else int(args.cache_mb * 1024 * 1024)
    n = args.concurrency
    config = Config(
        store=StoreConfig(synchronous="NORMAL"),  # type: ignore[arg-type]
        runtime=RuntimeConfig(max_running_turns=n, conversation_cache_bytes=cache),
        groups={"chat": GroupSettings(max_running_turns=n, max_queued_turns=4 * n)},
    )
    model: Provider = OfflineModel() if args.model == "offline" else NoopModel()
    text = "calc 1+1" if args.model == "offline" else "hi"
    samples: list[dict[str, float]] = []
    async with Runtime.open(root, kind="run", provider=model, config=config) as rt:
        start = time.perf_counter()

        async def worker(counter: Iterator[int]) -> None:
            for i in counter:
                msg = Message(origin="invoke", sender="bench", thread_id=f"m:{i:06d}", text=text)
                out = await rt.run_turn(msg)
                assert out.status == "done", out

        for first in range(0, args.threads, args.every):  # a batch, then its sample
            counter = iter(range(first, min(args.threads, first + args.every)))
            async with anyio.create_task_group() as tg:
                for _ in range(n):
                    tg.start_soon(worker, counter)
            gc.collect()
            conv = rt.supervisor.conversations.statistics()
            row = {
                "threads": min(args.threads, first + args.every), "rss": rss_mb(),
                "blocks": sys.getallocatedblocks() / 1e3, "kept": conv.kept,
                "conv_mb": conv.memory / 1e6, "requests": len(rt._requests),
                "budget_threads": len(rt.budgets.threads),
                "seconds": time.perf_counter() - start,
            }  # fmt: skip
            if args.tracemalloc:
                row["traced"] = tracemalloc.get_traced_memory()[0] / 1e6
            samples.append(row)
            show(row)
    return samples


HEADER = (f"{'threads':>8}{'RSS MB':>9}{'blocks k':>10}{'convs kept':>11}{'convs MB':>9}"
          f"{'requests':>9}{'budget thr':>11}{'s':>7}{'turns/s':>9}")  # fmt: skip


def show(row: dict[str, float]) -> None:
    rate = row["threads"] / row["seconds"]
    traced = f"{row['traced']:>10.1f}" if "traced" in row else ""
    print(f"{row['threads']:>8.0f}{row['rss']:>9.1f}{row['blocks']:>10.0f}{row['kept']:>11.0f}"
          f"{row['conv_mb']:>9.1f}{row['requests']:>9.0f}{row['budget_threads']:>11.0f}"
          f"{row['seconds']:>7.0f}{rate:>9.0f}{traced}", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--cache-mb", type=float, default=64.0,
                        help="[runtime] conversation_cache_bytes in MiB (-1: no bound)")  # fmt: skip
    parser.add_argument("--model", choices=("offline", "noop"), default="offline")
    parser.add_argument("--tracemalloc", action="store_true")
    args = parser.parse_args()
    if args.tracemalloc:
        tracemalloc.start()
    bound = "no bound" if args.cache_mb < 0 else f"{args.cache_mb:g} MiB"
    print(f"memory of one runtime: {args.threads:,} threads, one {args.model} turn each, "
          f"{args.concurrency} at once; conversation cache {bound}; python "
          f"{sys.version.split()[0]}")  # fmt: skip
    print(HEADER + ("  traced MB" if args.tracemalloc else ""))
    print("-" * len(HEADER))
    with tempfile.TemporaryDirectory(prefix="agentdeck-bench-") as tmp:
        samples = anyio.run(run, Path(tmp) / "room", args)
    warm = max(1, len(samples) // 3)
    later = samples[warm - 1 :]
    if len(later) < 3:
        print("\ntoo few samples after the warm-up for a slope (use more --threads)")
        return
    print()
    print(f"warm-up: the first {samples[warm - 1]['threads']:,.0f} threads; slope by least "
          f"squares over the {len(later)} samples from there")  # fmt: skip
    verdicts = []
    for key, unit in (("rss", "MB"), ("blocks", "k blocks")):
        level = samples[warm - 1][key]
        per = slope([(int(r["threads"]), r[key]) for r in later])
        share = per / level if level else 0.0
        print(f"  {key:<7} level {level:>8.1f} {unit:<9} slope {per:>+8.2f} {unit} per 10k "
              f"threads ({share:+.2%} of the level)")  # fmt: skip
        verdicts.append((key, share))
    print()
    print("target (information only): flat after the warm-up, a slope of at most "
          f"{FLAT:.0%} of the level per 10k threads")  # fmt: skip
    for key, share in verdicts:
        print(f"  {'PASS' if share <= FLAT else 'MISS'}  {key}: {share:+.2%} per 10k threads")


if __name__ == "__main__":
    main()
