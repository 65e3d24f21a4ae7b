"""API benchmark: the room's API (the server loop on agent.sock) against its in-process form.

    .venv/bin/python -m tests.bench.bench_api [--quick] [--parts 1,2,3,4]
    .venv/bin/python tests/bench/bench_api.py --decisions 1000 --seconds 10 --starts 9

Four measures, each next to its in-process form measured in the same run (the remote side
is another process, as an attached console or the CLI is: tests/bench/api_child.py):

1. Decision round trip: a turn's tool call (a scripted model, a tool that needs approval)
   suspends; the clock runs from sending the approval until the turn is seen done, by its
   TurnChanged on the client's event stream (`event`, as a console sees it) or by
   `outcome(wait=...)` (`outcome`, as the CLI waits). RemoteClient in another process vs
   LocalClient in the runtime's; batches of each alternate, p50/p95 over all samples.
2. Event fan-out: the runtime publishes TextDelta events (`Runtime.publish`) at `--rate`
   a second for `--seconds` to 1, 4 and 16 client processes following /v1/events, read
   with RemoteClient.follow (`full`) and with a bare httpx + json.loads reader (`light`).
   Lag is receipt minus the event's `at` (wall clock, one machine), pooled over clients;
   the rate is each client's events over the time from the first publish to its last
   receipt (the slowest client shown); memory is the clients' RSS (at the end, and growth
   since the stream opened). Baseline: as many in-process followers (LocalClient.follow)
   in the runtime's process.
3. Step cost: steps as bench_steps.py (a zero-latency scripted model, the `noop` tool,
   timed from one tool-round commit to the next), with no client and with 16 clients
   following, in alternating phases: every lane (`full`), the lanes an attached console
   watches showing another thread (`console`: the queue, counts, notices, the room's
   activity a few times a second; issue 27's target) and showing the thread that runs
   (`shown`); the ratio is against the mean of all the no-client phases.
5. Output streaming (issue 31): steps as in 3, but the tool a step calls streams what it
   prints (4 KB a call, through `ToolContext.output` and its tap, as the shell does), with
   16 clients attached as consoles, one of them showing the thread that runs (so it
   receives the output) and 15 showing another: `output`, against the same consoles with
   the tool printing nothing (`quiet`: what streaming costs), and against no client.
4. Console start on a room of 10,000 turns (gen_history.py, 200k steps): the first full
   screen (the run attached and drawn, from process start, as bench_console.py measures
   it) of a console attached to `python -m engine.cli run` in another process vs a console
   hosting the room; fresh processes, interleaved, medians.

For where the time goes, 2 and 3 also print the runtime process's CPU (cores busy per
second of wall time, all its threads), the clients' CPU, and how many SSE messages the
server sent (counted on the hub: each message is one `EventHub.read` that returned events,
and one socket write). `--profile DIR` writes a cProfile of the runtime process during the
first API batches of 1 and the 16-client runs of 2 and 3, and prints its top functions
(the numbers of a profiled run are not comparable). `--quick` runs about a third as long.
Targets are printed as information; the exit status never depends on time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(ROOT))

import anyio  # noqa: E402
from anyio.abc import TaskStatus  # noqa: E402
from anyio.streams.buffered import BufferedByteReceiveStream  # noqa: E402

from console.state import WATCHED  # noqa: E402
from engine.api.hub import Stream  # noqa: E402
from engine.api.local import LocalClient  # noqa: E402
from engine.api.watch import thread  # noqa: E402
from engine.config import Config, RuntimeConfig, StoreConfig  # noqa: E402
from engine.domain.events import Event, TextDelta  # noqa: E402
from engine.loops.server import Serving, serve_api  # noqa: E402
from engine.providers.offline import OfflineModel  # noqa: E402
from engine.runtime import Runtime  # noqa: E402
from engine.tools import ToolContext, tool  # noqa: E402
from tests.bench import gen_history  # noqa: E402
from tests.bench.api_child import (  # noqa: E402
    END,
    END_THREAD,
    WARM,
    Tally,
    cpu_seconds,
    decision_batch,
    info_batch,
    rss_mb,
)
from tests.bench.bench_steps import MEASURED_STEPS, NoopModel, measure_turn, noop  # noqa: E402
from tests.scripted import ScriptedModel, first_then, shell  # noqa: E402

CHILD = str(Path(__file__).with_name("api_child.py"))
BURST = 64  # events published per loop callback at most, as many turn tasks would
ROOM_TURNS = 10_000
ROOM_CACHE = Path("/tmp/agentdeck-bench-api-10k")  # gen_history's room, 200k steps
TARGET_RATE = 20_000
TARGET_STEP_RATIO = 1.1
TARGET_CONSOLES_RATIO = 1.2  # 16 attached consoles, each watching as a console does (issue 27)
TARGET_START_RATIO = 1.5


@dataclass
class Row:
    """One line of the final table."""

    what: str
    api: str
    local: str
    ratio: float | None
    target: str
    ok: bool | None = None


def pcts(values: Sequence[float]) -> tuple[float, float, float]:
    """p50, p95 and max, in ms."""
    ms = sorted(x * 1000 for x in values) or [float("nan")]
    return statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.95))], ms[-1]


def say(text: str = "") -> None:
    print(text, flush=True)


def spawn(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, CHILD, *argv], cwd=ROOT, stdin=subprocess.DEVNULL)


async def until(check: Callable[[], bool], what: str, limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {limit:g} s for {what}")
        await anyio.sleep(0.02)


@contextlib.contextmanager
def profiled(directory: Path | None, name: str):  # type: ignore[no-untyped-def]
    """cProfile of this process while the block runs, when `--profile DIR` asks for it."""
    if directory is None:
        yield
        return
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{name}.pstats"
        profile.dump_stats(path)
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(18)
        say(f"  cProfile of the runtime process ({name}, {path}), by own time:")
        lines = text.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        for line in lines[start : start + 19]:
            say("    " + line[:150])


# -- 1. decision round trip ------------------------------------------------------------------


async def part_decisions(root: Path, n: int, rounds: int, synchronous: str,
                         profile: Path | None) -> list[Row]:  # fmt: skip
    say(f"1. decision round trip: {n} per form and mode, in {rounds} alternating batches; the "
        "API from another process")  # fmt: skip
    room = root / "decisions"
    model = ScriptedModel(first_then([("shell", {"command": "echo hi"})]))
    config = Config(store=StoreConfig(synchronous=synchronous))  # type: ignore[arg-type]
    per = max(1, math.ceil(n / rounds))
    got: dict[tuple[str, str], list[float]] = {}
    async with Runtime.open(room, kind="run", provider=model, tools=[shell],
                            config=config) as rt, serve_api(rt):  # fmt: skip
        local = LocalClient(rt)
        argv = [sys.executable, CHILD, "decider", str(room)]
        async with await anyio.open_process(argv, stderr=None, cwd=ROOT) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            lines = BufferedByteReceiveStream(proc.stdout)
            with anyio.fail_after(60):
                assert await lines.receive_until(b"\n", 1000) == b"ready"

            async def remote(mode: str, k: int, tag: str) -> list[float]:
                assert proc.stdin is not None
                await proc.stdin.send(f"{mode} {k} {tag}\n".encode())
                return json.loads(await lines.receive_until(b"\n", 1 << 24))  # type: ignore[no-any-return]

            for mode in ("event", "outcome"):  # warm up both sides, not counted
                await remote(mode, 10, f"warm-api-{mode}")
                await decision_batch(local, mode, 10, f"warm-local-{mode}")
            for r in range(rounds):
                for mode in ("event", "outcome"):
                    with profiled(profile if r == 0 else None, f"decisions-api-{mode}"):
                        api = await remote(mode, per, f"a{r}{mode}")
                    got.setdefault(("api", mode), []).extend(api)
                    got.setdefault(("local", mode), []).extend(
                        await decision_batch(local, mode, per, f"l{r}{mode}")
                    )
            got[("api", "health")] = await remote("health", max(100, per), "-")
            got[("local", "health")] = await info_batch(local, max(100, per))
            await proc.stdin.aclose()
            await proc.wait()
    rows = []
    for mode, how in (("event", "decide -> done event"), ("outcome", "decide -> outcome(wait)"),
                      ("health", "bare request (info)")):  # fmt: skip
        a50, a95, amax = pcts(got[("api", mode)])
        l50, l95, lmax = pcts(got[("local", mode)])
        count = len(got[("api", mode)])
        say(f"   {how:<24} API p50 {a50:6.2f} ms  p95 {a95:6.2f}  max {amax:6.1f}   "
            f"in-process p50 {l50:6.3f} ms  p95 {l95:6.3f}  max {lmax:6.1f}   ({count} each)")  # fmt: skip
        if mode == "health":
            rows.append(Row(f"API floor: {how} p50", f"{a50:.2f} ms", f"{l50:.3f} ms", None,
                            "(baseline of a request)"))  # fmt: skip
            continue
        rows.append(Row(f"decision {how} p50", f"{a50:.2f} ms", f"{l50:.2f} ms", a50 / l50,
                        "none stated"))  # fmt: skip
        rows.append(Row(f"decision {how} p95", f"{a95:.2f} ms", f"{l95:.2f} ms", a95 / l95,
                        "none stated"))  # fmt: skip
    return rows


# -- 2. event fan-out ------------------------------------------------------------------------


async def produce(rt: Runtime, rate: int, seconds: float, turn_id: str = "t_bench") -> int:
    """Publish TextDelta events at `rate` a second for `seconds`; return how many."""
    publish = rt.publish
    sent, began = 0, time.perf_counter()
    while (now := time.perf_counter()) - began < seconds:
        due = int((now - began) * rate) - sent
        for i in range(min(due, BURST)):
            n = sent + i
            publish(TextDelta(at=time.time(), thread_id=f"chat:{n % 50}", turn_id=turn_id,
                              text=f"word{n % 8} "))  # fmt: skip
        sent += max(0, min(due, BURST))
        await anyio.sleep(0.001 if due <= BURST else 0)
    return sent


class Batches:
    """Counts the `events` messages the API's streams send: each is one `hub.read` call
    that returns events (an instrument of this benchmark, on the hub instance only)."""

    def __init__(self, serving: Serving) -> None:
        hub = serving.hub
        assert hub is not None
        self.messages = self.events = 0
        read = hub.read

        def counted(stream: Stream, limit: int) -> list[str] | None:
            items = read(stream, limit)
            if items:
                self.messages += 1
                self.events += len(items)
            return items

        hub.read = counted  # type: ignore[method-assign]

    def take(self) -> tuple[int, int]:
        """Messages and events since the last take."""
        out = self.messages, self.events
        self.messages = self.events = 0
        return out


async def warm_up(rt: Runtime) -> None:
    """A few events before the clock runs (a client builds its event parser on the first)."""
    for _ in range(200):
        rt.publish(TextDelta(at=time.time(), thread_id="chat:0", turn_id=WARM, text="warm "))
    await anyio.sleep(0.5)


def read_summary(path: Path) -> dict:
    summary = json.loads(path.read_text())
    lags = array("d")
    with open(f"{path}.lags", "rb") as f:
        lags.frombytes(f.read())
    summary["lags"] = lags
    return summary


@dataclass
class Clients:
    """Client processes following the room's event stream."""

    procs: list[tuple[subprocess.Popen[bytes], Path]]

    @classmethod
    async def start(cls, room: Path, serving: Serving, n: int, reader: str, cap: int,
                    out: Path, lanes: Sequence[str] = ()) -> Clients:  # fmt: skip
        hub = serving.hub
        assert hub is not None
        before = hub.streams
        out.mkdir(parents=True, exist_ok=True)
        clients = cls([])
        try:
            for i in range(n):
                path = out / f"{reader}-{n}-{i}.json"
                path.unlink(missing_ok=True)
                watch = [arg for lane in lanes for arg in ("--watch", lane)]
                clients.procs.append((spawn("client", str(room), "--reader", reader, "--out",
                                            str(path), "--cap", str(cap), *watch), path))  # fmt: skip

            def on_stream() -> bool:
                if any(p.poll() is not None for p, _ in clients.procs):
                    raise RuntimeError(f"a {reader} client exited before its stream opened")
                return hub.streams >= before + n

            await until(on_stream, f"{n} {reader} clients on the event stream")
        except BaseException:
            clients.kill()
            raise
        return clients

    def kill(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    async def stop(self, rt: Runtime, limit: float = 120.0) -> list[dict]:
        """Publish the end marker, wait for every client to finish; their summaries."""
        rt.publish(TextDelta(at=time.time(), thread_id=END_THREAD, turn_id=END_THREAD, text=END))
        try:
            await until(lambda: all(p.poll() is not None for p, _ in self.procs),
                        "the clients to read to the end marker", limit)  # fmt: skip
        finally:
            self.kill()
        failed = [(p.pid, p.returncode) for p, _ in self.procs if p.returncode != 0]
        if failed:
            raise RuntimeError(f"clients failed (pid, exit status): {failed}")
        return [read_summary(path) for _, path in self.procs]


class LocalFollowers:
    """In-process followers (LocalClient.follow), measuring as the clients do (`Tally`)."""

    def __init__(self, rt: Runtime, n: int, cap: int) -> None:
        self.rt = rt
        self.tallies = [Tally(cap) for _ in range(n)]

    async def run(self, *, task_status: TaskStatus[None]) -> None:
        async with anyio.create_task_group() as tg:
            for tally in self.tallies:
                await tg.start(LocalClient(self.rt).follow, self._receiver(tally), self._resync)
            task_status.started()

    @staticmethod
    def _receiver(tally: Tally):  # type: ignore[no-untyped-def]
        def receive(event: Event) -> None:
            now = time.time()
            if event.turn_id not in (WARM, END_THREAD):
                tally.add(now, event.at)

        return receive

    async def _resync(self) -> None:
        raise AssertionError("an in-process follower never resyncs")

    def summaries(self) -> list[dict]:
        return [{"received": t.received, "first": t.first, "last": t.last, "resyncs": 0,
                 "lags": t.lags[: t.n]} for t in self.tallies]  # fmt: skip


@dataclass
class Delivery:
    """What N followers of one run saw."""

    sent_rate: float
    slowest: float  # events a second delivered to the slowest follower
    lag: tuple[float, float, float]  # ms, pooled over followers
    missed: int
    resyncs: int

    @classmethod
    def of(cls, results: list[dict], sent: int, began: float, elapsed: float) -> Delivery:
        lags = array("d")
        for r in results:
            lags.extend(r["lags"])
        return cls(
            sent / elapsed,
            min(r["received"] / max(1e-9, r["last"] - began) for r in results),
            pcts(lags),
            sum(sent - r["received"] for r in results),
            sum(r["resyncs"] for r in results),
        )

    def line(self) -> str:
        p50, p95, top = self.lag
        return (f"sent {self.sent_rate:7,.0f}/s  slowest {self.slowest:7,.0f}/s  lag p50 "
                f"{p50:6.2f} ms p95 {p95:7.2f} max {top:6.1f}")  # fmt: skip


async def part_fanout(root: Path, counts: list[int], readers: list[str], rate: int,
                      seconds: float, profile: Path | None) -> list[Row]:  # fmt: skip
    say(f"2. event fan-out: TextDelta events at {rate:,}/s for {seconds:g} s, to N clients "
        "(separate processes) vs N in-process followers; CPU in cores busy")  # fmt: skip
    room = root / "fanout"
    rows: list[Row] = []
    cap = int(rate * seconds * 1.2) + 10_000
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0),
                            tools=[]) as rt, serve_api(rt) as serving:  # fmt: skip
        batches = Batches(serving)
        for _ in range(rt.config.server.event_buffer):  # the ring full from the start
            rt.publish(TextDelta(at=time.time(), thread_id="chat:0", turn_id=WARM, text="fill "))
        for n in counts:
            followers = LocalFollowers(rt, n, cap)  # the in-process baseline
            async with anyio.create_task_group() as tg:
                await tg.start(followers.run)
                await warm_up(rt)
                rss0, cpu0, wall0 = rss_mb(), cpu_seconds(), time.time()
                sent = await produce(rt, rate, seconds)
                cpu, elapsed, local_rss = cpu_seconds() - cpu0, time.time() - wall0, rss_mb() - rss0
                await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
            local = Delivery.of(followers.summaries(), sent, wall0, elapsed)
            del followers
            say(f"   N={n:<2} in-process   {local.line()}  runtime CPU {cpu / elapsed:4.2f}  "
                f"runtime RSS {local_rss:+.1f} MB")  # fmt: skip
            for reader in readers:
                clients = await Clients.start(room, serving, n, reader, cap, root / "out")
                await warm_up(rt)
                batches.take()
                with profiled(profile if n == max(counts) else None, f"fanout-{n}-{reader}"):
                    rss0, cpu0, wall0 = rss_mb(), cpu_seconds(), time.time()
                    sent = await produce(rt, rate, seconds)
                    cpu, elapsed = cpu_seconds() - cpu0, time.time() - wall0
                    runtime_rss = rss_mb() - rss0
                messages, events = batches.take()
                results = await clients.stop(rt)
                api = Delivery.of(results, sent, wall0, elapsed)
                rss_end = max(r["rss_end"] for r in results)
                growth = max(r["rss_end"] - r["rss_ready"] for r in results)
                client_cpu = statistics.fmean(r["cpu"] / max(1e-9, r["last"] - r["first"])
                                              for r in results)  # fmt: skip
                say(f"   N={n:<2} API {reader:<5}    {api.line()}  runtime CPU "
                    f"{cpu / elapsed:4.2f}  runtime RSS {runtime_rss:+.1f} MB; clients: RSS "
                    f"{rss_end:.1f} MB ({growth:+.1f} since the stream opened), CPU "
                    f"{client_cpu:4.2f} each ({client_cpu * n:.2f} in all), missed "
                    f"{api.missed:,}, resyncs {api.resyncs}; {messages / n / elapsed:,.0f} SSE "
                    f"messages a second per client, {events / max(1, messages):.0f} events "
                    "each")  # fmt: skip
                # the target is delivery (every event of 20,000/s, no resync); how late is
                # the lag rows' business: a slow tail lowers `slowest` by lag/seconds
                ok = api.sent_rate >= 0.99 * TARGET_RATE and api.missed == 0 and not api.resyncs
                label = f"fan-out {n:>2} {reader:<5}"
                rows += [
                    Row(f"{label} delivered/client (of sent)",
                        f"{api.slowest:,.0f} of {api.sent_rate:,.0f}/s",
                        f"{local.slowest:,.0f} of {local.sent_rate:,.0f}/s",
                        api.slowest / local.slowest,
                        f"all of {TARGET_RATE:,}/s, no resync", ok),
                    Row(f"{label} lag p50 / p95", f"{api.lag[0]:.1f} / {api.lag[1]:.1f} ms",
                        f"{local.lag[0]:.3f} / {local.lag[1]:.3f} ms", None, "none stated"),
                    Row(f"{label} lag max", f"{api.lag[2]:.0f} ms", f"{local.lag[2]:.2f} ms",
                        None, "none stated"),
                    Row(f"{label} memory", f"client {rss_end:.0f} MB ({growth:+.1f})",
                        f"runtime {local_rss:+.1f} MB", None, "none stated"),
                ]  # fmt: skip
    return rows


# -- 3. step cost with clients attached ------------------------------------------------------


PRINTS = [True]  # part 5's phase: the tool prints (output) or not (quiet)


@tool(name="noop")
async def printing(ctx: ToolContext) -> str:
    """Prints 4 KB as it runs, as a command does (part 5), unless the phase is quiet."""
    assert ctx.output is not None
    if PRINTS[0]:
        ctx.output("stdout", PRINTED)
    return "ok"


printing.meta["streams"] = True
PRINTED = b"".join(b"compiling module %04d of the build, with its warnings\n" % i
                   for i in range(74))[:4096]  # fmt: skip


async def part_steps(root: Path, turns: int, clients: int, phases: list[str], synchronous: str,
                     profile: Path | None, part: int = 3) -> list[Row]:  # fmt: skip
    what = "step cost" if part == 3 else "step cost, the tool's output streamed"
    say(f"{part}. {what}: {turns} turns of {MEASURED_STEPS} steps per phase (synchronous="
        f"{synchronous}), phases {' '.join(phases)}; a client phase has {clients} clients")  # fmt: skip
    room = root / f"steps-{part}"
    config = Config(
        store=StoreConfig(synchronous=synchronous),  # type: ignore[arg-type]
        runtime=RuntimeConfig(max_rounds=100_000),  # (the most a room allows)
    )
    model = NoopModel()
    per_phase: dict[str, list[float]] = {}
    profiled_once = False
    tool = noop if part == 3 else printing
    async with Runtime.open(room, kind="run", provider=model, tools=[tool],
                            config=config) as rt, serve_api(rt) as serving:  # fmt: skip
        batches = Batches(serving)
        for i in range(3):
            await measure_turn(rt, model, f"warm-{i}", MEASURED_STEPS)
        for k, phase in enumerate(phases):
            attached = None
            PRINTS[0] = phase != "quiet"
            if phase in ("output", "quiet"):  # one console shows the thread that runs, the
                # rest another; the same consoles whether the tool prints or not
                quiet = [*WATCHED, thread("console:quiet")]
                shown = [*quiet, *(thread(f"p{k}-{i}") for i in range(turns))]
                one = await Clients.start(room, serving, 1, "full", 200_000, root / "out1",
                                          shown)  # fmt: skip
                rest = await Clients.start(room, serving, clients - 1, "full", 200_000,
                                           root / "out", quiet)  # fmt: skip
                attached = Clients([*one.procs, *rest.procs])
                await warm_up(rt)
            elif phase != "none":
                reader, lanes = phase, []
                if phase in ("console", "shown"):  # as an attached console watches
                    reader, lanes = "full", [*WATCHED, thread("console:quiet")]
                    if phase == "shown":  # showing the thread that runs
                        lanes += [thread(f"p{k}-{i}") for i in range(turns)]
                attached = await Clients.start(room, serving, clients, reader, 200_000,
                                               root / "out", lanes)  # fmt: skip
                await warm_up(rt)
            steps: list[float] = []
            asked = profile if phase != "none" and not profiled_once else None
            profiled_once = profiled_once or asked is not None
            with profiled(asked, f"steps-{clients}-{phase}"):
                batches.take()
                cpu0, wall0 = cpu_seconds(), time.perf_counter()
                for i in range(turns):
                    done = await measure_turn(rt, model, f"p{k}-{i}", MEASURED_STEPS)
                    steps += [seconds for _, seconds in done]
                cpu, elapsed = cpu_seconds() - cpu0, time.perf_counter() - wall0
                messages, events = batches.take()
            extra = ""
            if attached is not None:
                results = await attached.stop(rt)
                lags = array("d")
                for r in results:
                    lags.extend(r["lags"])
                l50, l95, lmax = pcts(lags)
                client_cpu = statistics.fmean(r["cpu"] / max(1e-9, r["last"] - r["first"])
                                              for r in results)  # fmt: skip
                extra = (f"; {sum(r['received'] for r in results) // len(results):,} events per "
                         f"client, lag from `at` p50 {l50:.1f} ms p95 {l95:.1f} max {lmax:.0f}, "
                         f"client CPU {client_cpu:.2f} each ({client_cpu * clients:.2f} in all); "
                         f"the server sent {messages / len(steps):.1f} SSE messages a step "
                         f"({events / max(1, messages):.1f} events each)")  # fmt: skip
            per_phase.setdefault(phase, []).extend(steps)
            us = [s * 1e6 for s in steps]
            say(f"   phase {k} {phase:<5} {len(us):5} steps  mean {statistics.fmean(us):6.0f} us  "
                f"p50 {statistics.median(us):6.0f}  p90 {statistics.quantiles(us, n=10)[-1]:6.0f}"
                f"  runtime CPU {cpu / elapsed:4.2f}{extra}")  # fmt: skip
    base = statistics.fmean(per_phase["none"]) * 1e6
    rows = []
    if "quiet" in per_phase and "output" in per_phase:  # part 5: what the output costs
        quiet = statistics.fmean(per_phase["quiet"]) * 1e6
        out = statistics.fmean(per_phase["output"]) * 1e6
        rows.append(Row(f"step streaming output to {clients} consoles vs not", f"{out:.0f} us",
                        f"{quiet:.0f} us", out / quiet, f"<= {TARGET_CONSOLES_RATIO}x",
                        out / quiet <= TARGET_CONSOLES_RATIO))  # fmt: skip
    for phase, steps in per_phase.items():
        if phase in ("none", "quiet"):
            continue
        mean = statistics.fmean(steps) * 1e6
        target = (TARGET_CONSOLES_RATIO if phase in ("console", "output")
                  else TARGET_STEP_RATIO)  # fmt: skip
        rows.append(Row(f"step with {clients} {phase} clients vs none", f"{mean:.0f} us",
                        f"{base:.0f} us", mean / base, f"<= {target}x",
                        mean / base <= target))  # fmt: skip
    return rows


# -- 4. a console attached to a room of 10,000 turns -----------------------------------------


def compile_sources() -> None:
    """As bench_console.py: an installed console starts from compiled bytecode, and where
    PYTHONDONTWRITEBYTECODE is set every child would compile agentdeck again."""
    import compileall

    for package in ("engine", "console", "themes", "tests"):
        compileall.compile_dir(ROOT / package, quiet=1)


def console_start(how: str, room: Path) -> tuple[float, float]:
    done = subprocess.run([sys.executable, CHILD, "console", how, str(room)], check=True,
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    screen, paint = done.stdout.split()[-2:]
    return float(screen), float(paint)


@contextlib.contextmanager
def owner(room: Path):  # type: ignore[no-untyped-def]
    """`python -m engine.cli --room ROOM run` in its own process, serving the room."""
    log = room.parent / f"{room.name}.owner.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while b"agentdeck run " not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the owner did not start: {log.read_text()}")
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def part_console(root: Path, starts: int) -> list[Row]:
    say(f"4. console start on a room of {ROOM_TURNS:,} turns: {starts} fresh processes each, "
        "attached and hosting, interleaved")  # fmt: skip
    began = time.perf_counter()
    cache = gen_history.ensure(ROOM_CACHE, steps=ROOM_TURNS * 20, seed=6, quiet=True)
    compile_sources()
    host_room, attach_room = root / "host-room", root / "attach-room"
    for room in (host_room, attach_room):
        room.mkdir()
        shutil.copyfile(cache / "execution.db", room / "execution.db")
    say(f"   room ready in {time.perf_counter() - began:.1f} s "
        f"({(cache / 'execution.db').stat().st_size / 1e6:.0f} MB, cached in {cache})")  # fmt: skip
    hosted: list[tuple[float, float]] = []
    attached: list[tuple[float, float]] = []
    with owner(attach_room):
        console_start("attach", attach_room)  # warm the page cache of both rooms, not counted
        console_start("host", host_room)
        for _ in range(starts):
            attached.append(console_start("attach", attach_room))
            hosted.append(console_start("host", host_room))
    h = statistics.median(s for s, _ in hosted)
    a = statistics.median(s for s, _ in attached)
    hp = statistics.median(p for _, p in hosted)
    ap = statistics.median(p for _, p in attached)
    say(f"   attached: first full screen median {a:.0f} ms (min {min(s for s, _ in attached):.0f},"
        f" max {max(s for s, _ in attached):.0f}); panes painted at {ap:.0f} ms")  # fmt: skip
    say(f"   hosting:  first full screen median {h:.0f} ms (min {min(s for s, _ in hosted):.0f}, "
        f"max {max(s for s, _ in hosted):.0f}); panes painted at {hp:.0f} ms")  # fmt: skip
    return [Row(f"console first full screen, {ROOM_TURNS:,} turns", f"{a:.0f} ms", f"{h:.0f} ms",
                a / h, f"<= {TARGET_START_RATIO}x", a / h <= TARGET_START_RATIO)]  # fmt: skip


# -- the table -------------------------------------------------------------------------------


def table(rows: list[Row]) -> None:
    say()
    header = (f"{'measure':<44}{'API (attached)':>22}{'in-process':>22}{'ratio':>8}  "
              f"{'target (information)':<30}")  # fmt: skip
    say(header)
    say("-" * len(header))
    for r in rows:
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else ""
        verdict = "" if r.ok is None else ("  PASS" if r.ok else "  MISS")
        say(f"{r.what:<44}{r.api:>22}{r.local:>22}{ratio:>8}  {r.target}{verdict}")
    say("(information only: the exit status does not depend on these)")


@contextlib.asynccontextmanager
async def temp_root() -> AsyncIterator[Path]:
    with tempfile.TemporaryDirectory(prefix="agentdeck-bench-api-",
                                     ignore_cleanup_errors=True) as tmp:  # fmt: skip
        yield Path(tmp)


async def main(args: argparse.Namespace) -> None:
    parts = {int(p) for p in args.parts.split(",")}
    say(f"agentdeck API benchmark: parts {','.join(map(str, sorted(parts)))}; python "
        f"{sys.version.split()[0]}, {os.cpu_count()} cores")  # fmt: skip
    rows: list[Row] = []
    began = time.perf_counter()
    async with temp_root() as root:
        say(f"temp dir {root}")
        say()
        if 1 in parts:
            rows += await part_decisions(root, args.decisions, args.rounds, args.synchronous,
                                         args.profile)  # fmt: skip
        if 2 in parts:
            counts = [int(c) for c in args.clients.split(",")]
            readers = args.readers.split(",")
            rows += await part_fanout(root, counts, readers, args.rate, args.seconds,
                                      args.profile)  # fmt: skip
        if 3 in parts:
            phases = args.phases.split(",")
            rows += await part_steps(root, args.step_turns, args.step_clients, phases,
                                     args.synchronous, args.profile)  # fmt: skip
        if 5 in parts:
            phases = ["none", "quiet", "output"] * args.output_rounds + ["none"]
            rows += await part_steps(root, args.step_turns, args.step_clients, phases,
                                     args.synchronous, None, part=5)  # fmt: skip
        if 4 in parts:
            rows += await anyio.to_thread.run_sync(part_console, root, args.starts)
    table(rows)
    say(f"total {time.perf_counter() - began:.0f} s")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="1,2,3,5,4", help="which measures (default all)")
    parser.add_argument("--quick", action="store_true",
                        help="about a third of the default run: fewer samples, shorter phases")  # fmt: skip
    parser.add_argument("--decisions", type=int, default=300,
                        help="1: round trips per form and mode (default 300)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=4, help="1: alternating batches")
    parser.add_argument("--rate", type=int, default=TARGET_RATE, help="2: events per second")
    parser.add_argument("--seconds", type=float, default=4.0,
                        help="2: seconds of publishing per run (default 4)")  # fmt: skip
    parser.add_argument("--clients", default="1,4,16", help="2: client counts")
    parser.add_argument("--readers", default="full,light", help="2: client readers")
    parser.add_argument("--step-turns", type=int, default=12,
                        help=f"3: turns of {MEASURED_STEPS} steps per phase (default 12)")  # fmt: skip
    parser.add_argument("--step-clients", type=int, default=16, help="3: clients attached")
    parser.add_argument("--phases", default="none,full,none,console,none,shown,none,console,none",
                        help="3: the phases in order: none (no client); full or light (the "
                             "clients' reader, every lane); console (the lanes a console "
                             "watches, showing a quiet thread); shown (a console showing the "
                             "thread that runs)")  # fmt: skip
    parser.add_argument("--output-rounds", type=int, default=3,
                        help="5: alternating no-client and output phases (default 3)")  # fmt: skip
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="NORMAL",
                        help="1, 3: the store's synchronous setting (default NORMAL)")  # fmt: skip
    parser.add_argument("--starts", type=int, default=5,
                        help="4: fresh console processes of each kind (default 5)")  # fmt: skip
    parser.add_argument("--profile", type=Path, metavar="DIR",
                        help="cProfile the runtime process (1's API batches, 16 clients in 2, 3)")  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.decisions, args.rounds, args.seconds = 100, 2, 2.0
        args.step_turns, args.phases, args.starts = 5, "none,full,none,console,none", 3
        args.readers, args.output_rounds = "full", 2
    return args


if __name__ == "__main__":
    anyio.run(main, parse_args())
