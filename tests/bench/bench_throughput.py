"""Throughput benchmark: 64 threads running at once on a zero-latency model.

    .venv/bin/python -m tests.bench.bench_throughput [--threads 64] [--rounds 40]
    .venv/bin/python -m tests.bench.bench_throughput --short   # 5 turns of one round each

`--short --offline` is issue 35's measure: the offline model (the embedded default) and the
built-in tools, each turn `calc 1+1`, default plugins (`--plugins` alone: those with the
zero-latency model). `--short` is the channel message's and the task's shape (issue 35): each thread submits five
turns one after the other, each one tool round (three steps: inference, the round, the
answer), so a turn's fixed cost (submit, admission, open, settle, wait) counts; its
targets: steps/s at least the bare FULL commit rate of the same disk, in both modes (the
issue's floor: what the disk takes when each commit syncs), CPU per step at most 450 us.
`--short` runs each mode three times (`--repeat`): each run's ratio is against the bare
FULL rate measured just before it, and the verdicts are the medians (the machine is shared
and its numbers are noisy).

Each thread runs one turn of `rounds` tool rounds (a scripted model calls the no-op tool
`noop` until the turn has that many results, then answers with text); every inference and
every tool round is one step, with its own checkpoint. All threads run at once
(max_running_turns = threads), for synchronous=FULL and NORMAL in separate temp rooms.

Printed per mode, with the baseline measured in the same run on the same filesystem:
- steps/s (StepFinished events per second of wall time);
- checkpoints per transaction (the writer's group commit; 1.00 where the store does not
  tell, i.e. one transaction per checkpoint);
- process CPU per step (time.process_time over the run, every thread of the process);
- the floor of the store: the same writes (recorded) replayed into a fresh Store all at
  once with no turn around them: writes/s, writes per transaction, CPU per write;
- the process's peak RSS (with --threads 1000, what 1,000 turns at once hold);
- the bare one-row commit rate: a plain sqlite3 loop of BEGIN; INSERT one row; COMMIT with
  the store's pragmas (WAL, the same synchronous), the most commits/s the disk takes when
  each is its own transaction.
Targets (information only; the exit status never depends on time): steps/s >= 2x the bare
commit rate, CPU per step <= 150 us (--short: see above).
"""

from __future__ import annotations

import argparse
import itertools
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

import anyio

from engine.config import Config
from engine.domain.events import Event, StepFinished
from engine.domain.messages import Message
from engine.providers.base import ModelEvent, ModelRequest, StopEvent, TextDelta, ToolCallDelta
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.store import Op
from engine.store.sqlite import SqliteStore
from engine.tools import tool

TARGET_RATIO = 2.0
TARGET_CPU_US = 150.0
PLUGINS = False  # --plugins: the runtime's default plugins (context window, instructions...)
OFFLINE = False  # --offline: the offline model and the built-in tools, each turn `calc 1+1`


@tool(name="noop")
async def noop() -> str:
    """Does nothing."""
    return "ok"


class RoundsModel:
    """Zero latency: `noop` until the turn has `rounds` tool results, then text."""

    name = "bench"
    model = "rounds-1"

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.ids = itertools.count()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        results = 0
        for m in reversed(request.messages):
            if m.role == "user":
                break
            results += m.role == "tool"
        if results < self.rounds:
            yield ToolCallDelta(index=0, id=f"n{next(self.ids)}", name="noop", arguments="{}")
            yield StopEvent(reason="tool_use")
        else:
            yield TextDelta(text="done")
            yield StopEvent(reason="end_turn")


def config(synchronous: str, threads: int) -> Config:
    return Config.model_validate({
        "store": {"synchronous": synchronous},
        "runtime": {"max_running_turns": threads, "max_rounds": 100_000},
        "groups": {"chat": {"max_running_turns": threads, "max_queued_turns": 100_000}},
    })  # fmt: skip


def transactions(rt: Runtime) -> tuple[int, int, float] | None:
    """(transactions, checkpoints, writer CPU s) so far, if the store counts them."""
    stats = getattr(rt.store, "statistics", None)
    if stats is None:
        return None
    s = stats()
    return s.transactions, s.writes, getattr(s, "cpu", 0.0)


async def run_mode(
    root: Path,
    synchronous: str,
    threads: int,
    rounds: int,
    recorded: list[tuple[str | None, list[Op]]],
    turns: int = 1,
) -> dict[str, float]:
    """Run the benchmark in a new room; `recorded` gets every write the store was given."""
    steps = 0

    def seen(event: Event) -> None:
        nonlocal steps
        if isinstance(event, StepFinished):
            steps += 1

    model: Any = OfflineModel(delay=0) if OFFLINE else RoundsModel(rounds)
    room = root / f"room-{synchronous.lower()}"
    async with Runtime.open(
        room, kind="run", provider=model, config=config(synchronous, threads),
        **({} if OFFLINE else {"tools": [noop]}), **({} if PLUGINS else {"plugins": []}),
    ) as rt:  # fmt: skip
        rt.subscribe(seen)
        write = rt.store.write

        async def recording(ops: Sequence[Op], **kw: Any) -> None:
            recorded.append((kw.get("key"), list(ops)))
            await write(ops, **kw)

        rt.store.write = recording  # type: ignore[method-assign]

        async def one(i: int, label: str) -> None:
            for _ in range(turns):
                msg = Message(origin="invoke", sender="bench", thread_id=f"{label}-{i}",
                              text="calc 1+1" if OFFLINE else "go")  # fmt: skip
                out = await rt.run_turn(msg)
                assert out.status == "done", out

        async def wave(label: str) -> None:
            async with anyio.create_task_group() as tg:
                for i in range(threads):
                    tg.start_soon(one, i, label)

        await wave("warmup")
        steps, tx0 = 0, transactions(rt)
        cpu0, t0 = time.process_time(), time.perf_counter()
        await wave("bench")
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        tx1 = transactions(rt)
    per_tx = 1.0 if tx0 is None or tx1 is None else (tx1[1] - tx0[1]) / max(1, tx1[0] - tx0[0])
    writer_cpu = 0.0 if tx0 is None or tx1 is None else tx1[2] - tx0[2]
    return {"steps": steps, "steps_s": steps / wall, "cpu_us": cpu / steps * 1e6,
            "per_tx": per_tx, "writer_us": writer_cpu / steps * 1e6}  # fmt: skip


async def store_alone(
    root: Path, synchronous: str, recorded: list[tuple[str | None, list[Op]]]
) -> dict[str, float]:
    """The floor of the store: the same writes, replayed in order into a fresh room's Store
    by one task each, all at once (the writer batches them as it batches turns'), with no
    turn around them. The run's first writes (before recording began) are absent, so the
    database's foreign keys are off here."""
    store = await SqliteStore.open(root / f"alone-{synchronous.lower()}.db", synchronous)  # type: ignore[arg-type]
    try:
        await store.write([("PRAGMA foreign_keys=OFF", ())])  # (a no-op inside a transaction)
        store._writer._conn.execute("PRAGMA foreign_keys=OFF")  # noqa: SLF001 - its thread idles
        tx0 = store.statistics()
        cpu0, t0 = time.process_time(), time.perf_counter()
        async with anyio.create_task_group() as tg:
            for key, ops in recorded:
                tg.start_soon(partial(store.write, ops, key=key))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        tx1 = store.statistics()
    finally:
        await store.close()
    n = len(recorded)
    return {"writes_s": n / wall, "cpu_us": cpu / n * 1e6, "writer_us": (tx1.cpu - tx0.cpu) / n * 1e6,
            "per_tx": (tx1.writes - tx0.writes) / max(1, tx1.transactions - tx0.transactions)}  # fmt: skip


def bare_commits_per_s(root: Path, synchronous: str, n: int = 2000) -> float:
    """One-row INSERT transactions per second on a WAL database in `root`."""
    conn = sqlite3.connect(root / f"bare-{synchronous.lower()}.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # as the store's writer
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        for _ in range(50):
            conn.execute("INSERT INTO t(v) VALUES ('warm')")
        start = time.perf_counter()
        for i in range(n):
            conn.execute("BEGIN")
            conn.execute("INSERT INTO t(v) VALUES (?)", (f"row {i}",))
            conn.execute("COMMIT")
        return n / (time.perf_counter() - start)
    finally:
        conn.close()


async def main(threads: int, rounds: int, turns: int = 1, repeat: int = 1) -> None:
    short = turns > 1
    target_ratio, target_cpu = (1.0, 450.0) if short else (TARGET_RATIO, TARGET_CPU_US)
    print(f"agentdeck throughput benchmark: {threads} threads at once, {turns} turn(s) of "
          f"{rounds} tool rounds each, "
          f"{'offline model, built-in tools' if OFFLINE else 'zero-latency model'}, "
          f"{'default plugins' if PLUGINS else 'no plugins'}, {repeat} run(s) a mode")  # fmt: skip
    print(f"sqlite {sqlite3.sqlite_version}, python {sys.version.split()[0]}")
    # --short's target is the disk's: each mode against the bare FULL commit rate (issue 35)
    against = "bare FULL/s" if short else "bare commits/s"
    header = (f"{'sync':<7}{'steps':>7}{'steps/s':>9}{against:>16}{'ratio':>7}"
              f"{'ckpt/tx':>9}{'CPU us/step':>13}")  # fmt: skip
    print(header)
    print("-" * len(header))
    found: dict[str, list[tuple[float, float, float]]] = {"FULL": [], "NORMAL": []}
    with tempfile.TemporaryDirectory(prefix="agentdeck-bench-") as tmp:
        for n in range(repeat):
            bare_full = 0.0
            for synchronous in ("FULL", "NORMAL"):
                root = Path(tmp) / f"{n}"
                root.mkdir(exist_ok=True)
                bare = bare_commits_per_s(root, synchronous)
                bare_full = bare if synchronous == "FULL" else bare_full
                floor = bare_full if short else bare
                recorded: list[tuple[str | None, list[Op]]] = []
                r = await run_mode(root, synchronous, threads, rounds, recorded, turns)
                ratio = r["steps_s"] / floor
                found[synchronous].append((r["steps_s"], floor, r["cpu_us"]))
                print(f"{synchronous:<7}{r['steps']:>7.0f}{r['steps_s']:>9.0f}{floor:>16.0f}"
                      f"{ratio:>7.2f}{r['per_tx']:>9.2f}{r['cpu_us']:>13.0f}")  # fmt: skip
                if n == 0:
                    alone = await store_alone(root, synchronous, recorded)
                    print(f"{'':<7}store alone, the same {len(recorded)} writes replayed at "
                          f"once: {alone['writes_s']:.0f} writes/s, {alone['per_tx']:.1f} per "
                          f"transaction, CPU {alone['cpu_us']:.0f} us per write, "
                          f"{alone['writer_us']:.0f} of them in the writer's thread (the floor)")  # fmt: skip
                    if short:
                        print(f"{'':<7}bare {synchronous} commits/s: {bare:.0f}")
                print(f"{'':<7}of the run's CPU per step, the writer's thread: "
                      f"{r['writer_us']:.0f} us")  # fmt: skip
    verdicts = []
    if repeat > 1:
        print(f"medians of {repeat} runs:")
    for synchronous, runs in found.items():
        steps_s, floor, cpu = (statistics.median(v) for v in zip(*runs, strict=True))
        ratio = statistics.median(s / f for s, f, _ in runs)  # each run's own floor
        if repeat > 1:
            print(f"{synchronous:<7}{'':>7}{steps_s:>9.0f}{floor:>16.0f}{ratio:>7.2f}{'':>9}"
                  f"{cpu:>13.0f}")  # fmt: skip
        base = "bare FULL commits/s" if short else "bare commits/s"
        verdicts.append(f"{'PASS' if ratio >= target_ratio else 'MISS'}  {synchronous}: "
                        f"steps/s / {base} = {ratio:.2f} >= {target_ratio}")  # fmt: skip
        verdicts.append(f"{'PASS' if cpu <= target_cpu else 'MISS'}  "
                        f"{synchronous}: CPU {cpu:.0f} us/step <= {target_cpu:.0f}")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process: {peak:.0f} MB (--threads 1000: the writer's queue is "
          "bounded, producers wait)")  # fmt: skip
    print()
    print("targets (information only):")
    for line in verdicts:
        print("  " + line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=40, help="tool rounds per turn")
    parser.add_argument("--turns", type=int, default=1, help="turns per thread, one by one")
    parser.add_argument("--short", action="store_true", help="--rounds 1 --turns 5 --repeat 3")
    parser.add_argument("--repeat", type=int, help="runs of each mode (medians)")
    parser.add_argument("--plugins", action="store_true", help="with the default plugins")
    parser.add_argument("--offline", action="store_true",
                        help="the offline model and built-in tools: each turn `calc 1+1`")  # fmt: skip
    args = parser.parse_args()
    PLUGINS, OFFLINE = args.plugins or args.offline, args.offline
    rounds, turns = (1, 5) if args.short else (args.rounds, args.turns)
    repeat = args.repeat or (3 if args.short else 1)
    anyio.run(main, args.threads, rounds, turns, repeat)
