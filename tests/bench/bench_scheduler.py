"""Scheduler benchmark: 1,000 threads across the four groups, 10 turns each.

    .venv/bin/python -m tests.bench.bench_scheduler [--threads 1000] [--turns 10]

A zero-latency scripted model answers every turn with text (no tools), so what is
measured is admission, the turn's checkpoints and the scheduler. Coalescing is turned off
and the queues made deep enough, so every one of the 10,000 requests runs as a turn.
Printed, with the same run's baselines:
- turns per second with everything submitted at once, next to the rate of the same turns
  run one after another on one thread (the cost of a turn without scheduling);
- scheduling delay p50/p99 (submit -> TurnStarted) with requests arriving at half the
  measured rate, so the delay is the scheduler's and not a queue's;
- memory per queued request (tracemalloc, 100,000 requests in a paused group).
Numbers are information; the exit status never depends on them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.config import Config
from engine.events import Event, TurnStarted
from engine.messages import Message
from engine.runtime import Runtime
from engine.scheduler import GroupConfig, Request, Scheduler
from tests.scripted import Reply, ScriptedModel

GROUPS = ("chat", "task", "chore", "will")


def config() -> Config:
    groups = {g: {"coalesce": "none", "max_queued_turns": 1_000_000} for g in GROUPS}
    return Config.model_validate(
        {"store": {"synchronous": "NORMAL"}, "groups": groups, "runtime": {"max_running_turns": 8}}
    )


def message(i: int, turn: int) -> Message:
    group = GROUPS[i % 4]
    origin = group if group != "chat" else "chat"
    channel = "bench" if origin == "chat" else None
    sender = "self" if origin != "chat" else "bench"
    return Message(origin=origin, channel=channel, sender=sender, thread_id=f"{group}:{i}",
                   text=f"turn {turn}")  # fmt: skip


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def throughput(threads: int, turns: int) -> tuple[float, float]:
    model = ScriptedModel(lambda request: Reply(text="ok"))
    with tempfile.TemporaryDirectory() as room:
        async with Runtime.open(room, provider=model, tools=[], config=config(), plugins=[]) as rt:
            # baseline: turns one after another on one thread, no queue
            n = 200
            t0 = time.perf_counter()
            for k in range(n):
                await rt.run_turn(message(0, k))
            sequential = n / (time.perf_counter() - t0)
            handles = []
            t0 = time.perf_counter()
            for turn in range(turns):
                for i in range(threads):
                    handles.append(await rt.submit(message(i, turn)))
            for h in handles:
                await h.done.wait()
            return threads * turns / (time.perf_counter() - t0), sequential


async def delays(rate: float, seconds: float) -> list[float]:
    model = ScriptedModel(lambda request: Reply(text="ok"))
    submitted: dict[str, float] = {}
    started: dict[str, float] = {}

    def seen(event: Event) -> None:
        if isinstance(event, TurnStarted):
            started[event.turn_id] = time.perf_counter()

    with tempfile.TemporaryDirectory() as room:
        async with Runtime.open(room, provider=model, tools=[], config=config(), plugins=[]) as rt:
            rt.subscribe(seen)
            handles, t0, k = [], time.perf_counter(), 0
            while time.perf_counter() - t0 < seconds:
                due = t0 + k / rate
                if (wait := due - time.perf_counter()) > 0:
                    await anyio.sleep(wait)
                before = time.perf_counter()
                h = await rt.submit(message(k % 1000, k))
                submitted[h.turn_id] = before
                handles.append(h)
                k += 1
            for h in handles:
                await h.done.wait()
    return [(started[t] - s) * 1000 for t, s in submitted.items() if t in started]


def memory_per_request(n: int = 100_000) -> float:
    s = Scheduler(groups={"task": GroupConfig("task", paused=True, max_queued_turns=n)})
    msgs = [message(i, 0) for i in range(n)]  # the messages exist before they are offered
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i, m in enumerate(msgs):
        s.offer(Request(f"t_{i:010d}", m, "task", 0.0))
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / n


async def main(threads: int, turns: int) -> None:
    print(f"agentdeck scheduler benchmark: {threads} threads x {turns} turns, groups {GROUPS}, "
          "zero-latency model, synchronous=NORMAL, max_running_turns=8")  # fmt: skip
    rate, sequential = await throughput(threads, turns)
    print(f"  turns/s, all submitted at once : {rate:8.0f}")
    print(f"  turns/s, one thread, no queue  : {sequential:8.0f}   (baseline, same run)")
    ms = await delays(rate / 2, seconds=5.0)
    print(f"  scheduling delay at {rate / 2:.0f}/s     : p50 {statistics.median(ms):.2f} ms, "
          f"p99 {pct(ms, 0.99):.2f} ms over {len(ms)} turns")  # fmt: skip
    print(f"  memory per queued request      : {memory_per_request():8.0f} bytes (request + indexes, "
          "not the message)")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    anyio.run(main, args.threads, args.turns)
