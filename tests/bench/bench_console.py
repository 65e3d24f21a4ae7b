"""Console benchmark: a firehose of runtime events while an operator presses keys.

    .venv/bin/python tests/bench/bench_console.py [--rate 20000] [--seconds 10]

The console runs headless on a fresh room with the real runtime. A producer feeds the
bridge's runtime subscriber (the callable `Runtime.subscribe` was given) at `--rate`
events a second: steps, text deltas, calls and turns across 50 threads. (It calls the
subscriber directly because `Runtime.publish` keeps non-delta events until the next
commit, which would measure the engine's buffer rather than the console.) Meanwhile a
thread injects key presses through the driver, as the terminal input thread does, and
the time from injection to the next screen refresh after the binding ran is recorded.

Prints events absorbed per second, key latency p50/p95/max, peak memory, and the time
from start to the first full screen. It measures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402

from console.app import make_app  # noqa: E402
from console.widgets.timeline import Timeline  # noqa: E402
from engine.events import (  # noqa: E402
    CallChanged,
    StepFinished,
    StepStarted,
    TextDelta,
    TurnChanged,
    TurnStarted,
)
from engine.providers.offline import OfflineModel  # noqa: E402


def rss_mb() -> float:
    """Current resident memory, from /proc (peak comes from getrusage)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def firehose():
    """An endless, realistic mix: a turn is 1 start, 3 steps, 12 deltas, 2 calls, 1 end."""
    n, step = 0, 0
    while True:
        n += 1
        th, t, at = f"chat:{n % 50}", f"t_{n}", time.time()
        yield TurnStarted(at=at, thread_id=th, turn_id=t, origin="chat", sender="operator",
                          text="bench")  # fmt: skip
        for kind in ("inference", "tool_round", "inference"):
            step += 1
            yield StepStarted(at=at, thread_id=th, turn_id=t, step_id=step, step_kind=kind)
            for i in range(4):
                yield TextDelta(at=at, thread_id=th, turn_id=t, text=f"word{i} ")
            if kind == "tool_round":
                for c in range(2):
                    yield CallChanged(at=at, thread_id=th, turn_id=t, call_id=f"c_{n}_{c}",
                                      tool="calc", args={"expression": "1+1"},
                                      status="succeeded", result="2")  # fmt: skip
            yield StepFinished(at=at, thread_id=th, turn_id=t, step_id=step, step_kind=kind,
                               status="succeeded", summary="bench step", duration=0.01)  # fmt: skip
        yield TurnChanged(at=at, thread_id=th, turn_id=t, status="done", reason="natural")


async def bench(rate: int, seconds: float) -> None:
    t_start = time.perf_counter()
    room = Path(tempfile.mkdtemp()) / "room"
    app = make_app(room, provider=OfflineModel(delay=0))
    latencies: list[float] = []  # injection -> the screen refreshed after the binding ran
    handled: list[float] = []  # injection -> the binding's action ran
    pressed: list[float] = []
    original = Timeline.action_cursor

    def timed_cursor(self: Timeline, delta: int) -> None:
        original(self, delta)
        sent = pressed.pop(0) if pressed else None
        if sent is not None:
            handled.append(time.perf_counter() - sent)
            self.app.call_after_refresh(lambda: latencies.append(time.perf_counter() - sent))

    Timeline.action_cursor = timed_cursor  # type: ignore[method-assign]
    async with app.run_test(size=(160, 48)) as pilot:
        main = app.main
        while not main.query_one("StatusBar").run_id.startswith("r_"):
            await asyncio.sleep(0.001)
        await pilot.pause()
        first_screen = time.perf_counter() - t_start
        main.query_one(Timeline).focus()
        await pilot.pause()

        stop = threading.Event()

        def press_keys() -> None:  # the terminal's input thread, in effect
            driver = app._driver
            assert driver is not None
            key = "j"
            while not stop.wait(0.02):
                key = "k" if key == "j" else "j"
                pressed.append(time.perf_counter())
                driver.process_message(events.Key(key, key))

        source = firehose()
        receive = app.bridge.receive
        rss_samples: list[float] = []
        keys = threading.Thread(target=press_keys, daemon=True)
        began = time.perf_counter()
        keys.start()
        sent = 0
        next_sample = began + 1
        while (now := time.perf_counter()) - began < seconds:
            due = int((now - began) * rate) - sent
            for _ in range(due):
                receive(next(source))
            sent += due
            if now >= next_sample:
                rss_samples.append(rss_mb())
                next_sample += 1
            await asyncio.sleep(0.002)
        elapsed = time.perf_counter() - began
        stop.set()
        keys.join()
        await pilot.pause(0.1)
        folded = app.bridge.state.events_folded
        await app.shutdown()
    Timeline.action_cursor = original  # type: ignore[method-assign]

    def pct(values: list[float]) -> str:
        ms = sorted(x * 1000 for x in values)
        if not ms:
            return "no keys handled"
        p95 = ms[max(0, int(len(ms) * 0.95) - 1)]
        return f"p50 {statistics.median(ms):.1f} ms  p95 {p95:.1f} ms  max {ms[-1]:.1f} ms"

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"events sent           {sent:,} in {elapsed:.1f}s ({sent / elapsed:,.0f}/s asked {rate:,}/s)"
    )
    print(
        f"events absorbed       {folded:,} ({folded / elapsed:,.0f}/s), frames {app.bridge.frames}"
    )
    print(f"key -> action (n={len(handled)})  {pct(handled)}")
    print(f"key -> painted (n={len(latencies)}) {pct(latencies)}")
    print(f"memory                peak RSS {peak:.0f} MB; RSS per second "
          + " ".join(f"{x:.0f}" for x in rss_samples))  # fmt: skip
    print(f"first full screen     {first_screen * 1000:.0f} ms after start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(bench(args.rate, args.seconds))


if __name__ == "__main__":
    main()
