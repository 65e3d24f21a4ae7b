"""Channels benchmark: hook deliveries acknowledged per second, and answers' delivery lag.

    .venv/bin/python -m tests.bench.bench_channels [--deliveries 2000] [--concurrency 16]
                                                  [--turns 200]

A room (the offline model, no delay: every "hello N" is a text-only turn) with a signed
webhook channel in hooks.toml, served on loopback; its answers go to a webhook receiver
stand-in (tests/standins/receiver.py) in the same process. Printed, with the same run's
baselines:
- hook deliveries acknowledged per second: `--deliveries` signed POSTs (GitHub's
  X-Hub-Signature-256 form, a delivery id each) over loopback HTTP, `--concurrency` at a
  time, each answered 202 once its turn request and key are durable; next to the same
  messages offered in process (`rt.submit` with the same keys, the same concurrency) in
  a room configured the same way. Both rooms run the turns and send the answers while
  they admit; the HTTP client runs in the benchmark's own process and event loop;
- time from a turn's end (its final checkpoint's COMMIT, when the runtime hands out its
  `turn_changed done`) to its answer's arrival at the receiver, p50/p95 over `--turns`
  turns: one delivery at a time (the room otherwise idle), and all at once at the
  concurrency above; next to a bare signed POST to the same receiver (the floor of one
  delivery's HTTP).
Numbers are information; the exit status never depends on them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio
import httpx

from engine.channels.base import Inbound
from engine.domain.events import Event, TurnChanged
from engine.loops.inbound import message_of
from engine.loops.start import start_loops
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.tools.builtin import builtin_tools
from tests.standins import running
from tests.standins.receiver import Receiver
from tests.standins.sign import webhook_headers

SECRET = "bench-webhook-secret-0123456789"
THREADS = 64


class Timed:
    """The receiver, noting when each answer (by its Idempotency-Key) arrived."""

    def __init__(self) -> None:
        self.receiver = Receiver(SECRET)
        self.arrived: dict[str, float] = {}
        self.changed = anyio.Event()

    def close(self) -> None:
        self.receiver.close()

    def app(self) -> object:
        inner = self.receiver.app()

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            key = dict(scope.get("headers", [])).get(b"idempotency-key")
            await inner(scope, receive, send)
            if key is not None:
                self.arrived.setdefault(key.decode(), time.perf_counter())
                self.changed.set()
                self.changed = anyio.Event()

        return app


def body(i: int) -> bytes:
    return json.dumps({"text": f"hello {i}", "thread": i % THREADS, "sender": "bench"}).encode()


@asynccontextmanager
async def room(receiver_url: str) -> AsyncIterator[tuple[Runtime, str, dict[str, float]]]:
    """A fresh room with the webhook hook; yields it, its hook address and the time each
    turn ended (turn id -> perf_counter)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "room"
        path.mkdir()
        (path / "agentdeck.toml").write_text(  # every message its own turn, none refused
            '[groups.chat]\ncoalesce = "none"\nmax_queued_turns = 1000000\n'
        )
        (path / "hooks.toml").write_text(
            'listen = "127.0.0.1:0"\n[gh]\nkind = "webhook"\nsecret_env = "BENCH_HOOK_SECRET"\n'
            'text = "text"\nthread = "thread"\nsender = "sender"\n'
            f'deliver_url = "{receiver_url}/hook"\n'
        )
        async with Runtime.open(path, kind="run", provider=OfflineModel(delay=0),
                                tools=builtin_tools()) as rt:  # fmt: skip
            ended: dict[str, float] = {}

            def on_event(event: Event) -> None:
                if isinstance(event, TurnChanged) and event.status == "done":
                    ended.setdefault(event.turn_id, time.perf_counter())

            rt.subscribe(on_event)
            start_loops(rt)
            with anyio.fail_after(20):
                while rt.channels.hook_address is None:
                    await anyio.sleep(0.005)
            yield rt, rt.channels.hook_address, ended


async def at_once(count: int, concurrency: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Run `one(i)` for i in range(count), `concurrency` at a time; seconds it took."""
    limiter = anyio.CapacityLimiter(concurrency)

    async def limited(i: int) -> None:
        async with limiter:
            await one(i)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(limited, i)
    return time.perf_counter() - start


async def hook_rate(http: httpx.AsyncClient, address: str, count: int, concurrency: int) -> float:
    async def post(i: int) -> None:
        data = body(i)
        answer = await http.post(f"http://{address}/hooks/gh", content=data,
                                 headers=webhook_headers(SECRET, data, f"d-{i}"))  # fmt: skip
        assert answer.status_code == 202, answer.text

    return count / await at_once(count, concurrency, post)


async def submit_rate(url: str, count: int, concurrency: int) -> float:
    async with room(url) as (rt, _, _):

        async def submit(i: int) -> None:
            inbound = Inbound(channel="gh", thread_id=f"webhook:gh:{i % THREADS}", sender="bench",
                              text=f"hello {i}", dedup_key=f"webhook:gh:d-{i}",
                              reply={"thread": str(i % THREADS)})  # fmt: skip
            await rt.submit(message_of(inbound, "chat"), key=inbound.dedup_key)

        return count / await at_once(count, concurrency, submit)


async def settle(rt: Runtime, timed: Timed, ended: dict[str, float]) -> None:
    """Until every turn of the room has ended and its answer arrived."""
    with anyio.fail_after(300):
        while rt.live or set(ended) - set(timed.arrived):
            await anyio.sleep(0.05)


async def delivery_lag(
    http: httpx.AsyncClient, address: str, timed: Timed, ended: dict[str, float],
    first: int, turns: int, concurrency: int,
) -> list[float]:  # fmt: skip
    """Milliseconds from each of `turns` new turns' end to its answer's arrival."""
    before = set(ended)

    async def post(i: int) -> None:
        data = body(first + i)
        await http.post(f"http://{address}/hooks/gh", content=data,
                        headers=webhook_headers(SECRET, data, f"d-{first + i}"))  # fmt: skip

    await at_once(turns, concurrency, post)
    with anyio.fail_after(120):
        while len((set(ended) - before) & set(timed.arrived)) < turns:
            await timed.changed.wait()
    return [(timed.arrived[t] - ended[t]) * 1000 for t in set(ended) - before]


async def bare_post(url: str, http: httpx.AsyncClient, count: int) -> list[float]:
    ms = []
    for i in range(count):
        data = body(i)
        start = time.perf_counter()
        answer = await http.post(f"{url}/hook", content=data, headers={
            **webhook_headers(SECRET, data, f"b-{i}"), "Idempotency-Key": f"bare-{i}"})  # fmt: skip
        ms.append((time.perf_counter() - start) * 1000)
        assert answer.status_code == 200
    return ms


def quantiles(ms: list[float]) -> str:
    cuts = statistics.quantiles(ms, n=20)
    return f"p50 {statistics.median(ms):6.2f} ms, p95 {cuts[18]:6.2f} ms"


async def main(deliveries: int, concurrency: int, turns: int) -> None:
    os.environ["BENCH_HOOK_SECRET"] = SECRET
    timed = Timed()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    print(f"agentdeck channels benchmark: {deliveries} webhook deliveries at concurrency "
          f"{concurrency}; delivery lag over {turns} turns")  # fmt: skip
    async with running(timed) as url, httpx.AsyncClient(limits=limits, timeout=60) as http:
        async with room(url) as (rt, address, ended):  # one room: hooks, then delivery lag
            hooked = await hook_rate(http, address, deliveries, concurrency)
            await settle(rt, timed, ended)
            one = await delivery_lag(http, address, timed, ended, deliveries, turns, 1)
            burst = await delivery_lag(http, address, timed, ended, deliveries + turns, turns,
                                       concurrency)  # fmt: skip
        submitted = await submit_rate(url, deliveries, concurrency)
        floor = await bare_post(url, http, turns)
    print(f"  hook deliveries acked/s (HTTP)    : {hooked:8.0f}")
    print(f"  rt.submit/s, the same messages    : {submitted:8.0f}   (baseline, same run; "
          f"the hook at {hooked / submitted:.0%} of it)")  # fmt: skip
    print(f"  turn end -> delivered, one by one : {quantiles(one)}")
    print(f"  turn end -> delivered, {concurrency:2d} at once: {quantiles(burst)}")
    print(f"  bare signed POST to the receiver  : {quantiles(floor)}   (baseline, same run)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    anyio.run(main, args.deliveries, args.concurrency, args.turns)
