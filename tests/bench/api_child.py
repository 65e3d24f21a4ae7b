"""The other processes of the API benchmark (bench_api.py), and the decision batch it shares.

    python tests/bench/api_child.py client ROOM --reader full|light --out FILE [--cap N]
    python tests/bench/api_child.py decider ROOM          # batches asked for on stdin
    python tests/bench/api_child.py console host|attach ROOM

`client` is an attached console's event stream and nothing else: `full` follows
/v1/events with `RemoteClient.follow` (the SSE parser and the typed events, as an attached
console does; of the lanes given with `--watch`, else of all); `light` reads the same stream with httpx and `json.loads` (the least a
reader in Python can do). Each event's lag is now minus its `at` (wall clock, the same
machine); the client stops at the end marker the benchmark publishes, then writes a JSON
summary to FILE and the raw lags (float64) to FILE.lags. Memory is its RSS when the stream
opened and at the end (the lag array is allocated before the first).

`decider` takes `outcome K TAG` or `event K TAG` lines and answers each with a JSON list
of K decision round trips (seconds) made through the room's API (`decision_batch`);
`health K -` asks for K bare requests instead (`info_batch`).

`console` starts the real console on ROOM, hosting its runtime or attached to its owner,
behind a terminal driver that renders each frame and discards it (as bench_console.py),
and prints the milliseconds from process start to the first full screen (the run attached
and drawn), then the milliseconds to the first painted panes.

Only the standard library is imported up front: each mode imports what it uses, so a
client's memory and a console's start are their own.
"""

from __future__ import annotations

import time

T_IMPORT = time.perf_counter()

import sys  # noqa: E402

if sys.argv[1:2] == ["console"]:
    import gc

    gc.disable()  # as console.cli.main does for the start; the app enables it when drawn

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
from array import array  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

END = "\x00bench-end"  # the text of the TextDelta that ends a client's run
END_THREAD = "bench:end"
WARM = "warm"  # the turn_id of warm-up events: not counted


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def hwm_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- the decision round trip, through either client ----------------------------------------


async def settle(client: Any, turn_id: str) -> Any:
    """The turn's outcome once it has stopped running."""
    while (out := await client.outcome(turn_id, wait=30)).status in ("running", "queued"):
        pass
    return out


async def decision_batch(client: Any, mode: str, k: int, tag: str) -> list[float]:
    """K decision round trips through `client` (a LocalClient or a RemoteClient), seconds.

    Each: a turn on a thread of its own calls a tool that needs approval and waits (not
    timed); then the clock runs from sending the approval until the turn is seen done:
    `event` by its TurnChanged(done) on the client's event stream (as a console sees it),
    `outcome` by `outcome(wait=...)` returning done (as `agentdeck decide` would wait).
    """
    import anyio

    from engine.api.models import SubmitBody
    from engine.domain.decisions import Decision

    waiters: dict[str, anyio.Event] = {}

    def receive(event: Any) -> None:
        if event.kind == "turn_changed" and event.status == "done":
            done = waiters.pop(event.turn_id, None)
            if done is not None:
                done.set()

    async def resync() -> None:
        raise RuntimeError("the decider's event stream had to resync")

    samples: list[float] = []
    async with anyio.create_task_group() as tg:
        if mode == "event":
            await tg.start(client.follow, receive, resync)
        for i in range(k):
            body = SubmitBody(origin="invoke", sender="bench", thread_id=f"decide:{tag}:{i}",
                              text="go")  # fmt: skip
            turn_id = (await client.submit(body)).turn_id
            out = await settle(client, turn_id)
            assert out.status == "waiting" and out.pending, out
            call = out.pending[0]
            decision = Decision.approve(call["call_id"], seen=call["args"])
            done = waiters[turn_id] = anyio.Event()
            began = time.perf_counter()
            await client.decide(decision)
            if mode == "event":
                with anyio.fail_after(30):
                    await done.wait()
            else:
                out = await settle(client, turn_id)
            samples.append(time.perf_counter() - began)
            if mode != "event":
                assert (out.status, out.reason) == ("done", "natural"), out
        tg.cancel_scope.cancel()
    return samples


async def info_batch(client: Any, k: int) -> list[float]:
    """K `info()` calls (GET /v1/health when remote): the floor of one request, seconds."""
    samples = []
    for _ in range(k):
        began = time.perf_counter()
        await client.info()
        samples.append(time.perf_counter() - began)
    return samples


async def decider(room: Path) -> None:
    import anyio

    from engine.api.remote import RemoteClient
    from engine.room import Room

    stdin = anyio.wrap_file(sys.stdin)
    async with RemoteClient(Room.at(room)) as client:
        await client.info()
        print("ready", flush=True)
        while line := await stdin.readline():
            mode, k, tag = line.split()
            if mode == "health":
                print(json.dumps(await info_batch(client, int(k))), flush=True)
            else:
                print(json.dumps(await decision_batch(client, mode, int(k), tag)), flush=True)


# -- an attached event-stream client -------------------------------------------------------


class Tally:
    """What a client measures: lags (preallocated), counts, memory, CPU."""

    def __init__(self, cap: int) -> None:
        self.lags = array("d", bytes(8 * cap))
        self.n = self.received = self.resyncs = 0
        self.first = self.last = 0.0
        self.rss_ready = self.cpu_first = self.cpu_end = 0.0

    def ready(self) -> None:
        self.rss_ready = rss_mb()

    def end(self) -> None:
        self.cpu_end = cpu_seconds()

    def add(self, now: float, at: float) -> None:
        if not self.received:
            self.first, self.cpu_first = now, cpu_seconds()
        self.last = now
        self.received += 1
        if self.n < len(self.lags):
            self.lags[self.n] = now - at
            self.n += 1

    def write(self, out: Path, reader: str) -> None:
        with open(f"{out}.lags", "wb") as f:
            self.lags[: self.n].tofile(f)
        summary = {
            "reader": reader, "pid": os.getpid(), "received": self.received,
            "resyncs": self.resyncs, "first": self.first, "last": self.last,
            "rss_ready": self.rss_ready, "rss_end": rss_mb(), "hwm": hwm_mb(),
            "cpu": self.cpu_end - self.cpu_first,  # from the first counted event to the end
        }  # fmt: skip
        out.write_text(json.dumps(summary))


async def follow_full(room: Path, tally: Tally, limit: float, lanes: list[str]) -> None:
    """The attached console's way: RemoteClient.follow, typed events; of `lanes` (and the
    end marker's thread) when some are given, else of every lane."""
    import functools

    import anyio

    from engine.api.remote import RemoteClient
    from engine.api.watch import Watch, thread
    from engine.room import Room

    watch = Watch([*lanes, thread(END_THREAD)]) if lanes else Watch()

    finished = anyio.Event()

    def receive(event: Any) -> None:
        now = time.time()
        if event.kind == "text_delta" and event.text == END:
            tally.end()
            finished.set()
            return
        if event.turn_id != WARM:
            tally.add(now, event.at)

    async def resync() -> None:
        tally.resyncs += 1

    async with RemoteClient(Room.at(room)) as client, anyio.create_task_group() as tg:
        await tg.start(functools.partial(client.follow, watch=watch), receive, resync)
        tally.ready()
        with anyio.move_on_after(limit):
            await finished.wait()
        tg.cancel_scope.cancel()


async def follow_light(room: Path, tally: Tally, limit: float, lanes: list[str]) -> None:
    """The same stream read with httpx and json.loads: frames split by hand, no models."""
    import anyio
    import httpx

    from engine.api.sockets import connect_path

    transport = httpx.AsyncHTTPTransport(uds=connect_path(room / "agent.sock"))
    timeout = httpx.Timeout(10.0, read=60.0)
    async with httpx.AsyncClient(transport=transport, base_url="http://agentdeck",
                                 timeout=timeout) as http:  # fmt: skip
        with anyio.move_on_after(limit):
            async with http.stream("GET", "/v1/events") as response:
                buffer = b""
                async for chunk in response.aiter_raw():
                    buffer += chunk
                    while (cut := buffer.find(b"\n\n")) >= 0:
                        frame, buffer = buffer[:cut], buffer[cut + 2 :]
                        data = frame.find(b"\ndata: ")
                        if data < 0:
                            continue  # a keep-alive comment
                        head = frame[:data]
                        if head.endswith(b"event: events"):
                            now = time.time()
                            for item in json.loads(frame[data + 7 :]):
                                if item.get("text") == END:
                                    tally.end()
                                    return
                                if item.get("turn_id") != WARM:
                                    tally.add(now, item["at"])
                        elif head.endswith(b"event: hello"):
                            tally.ready()
                        elif head.endswith(b"event: resync"):
                            tally.resyncs += 1
                        elif head.endswith(b"event: bye"):
                            return


def client_main(args: argparse.Namespace) -> None:
    import anyio

    tally = Tally(args.cap)
    follow = follow_full if args.reader == "full" else follow_light
    anyio.run(follow, args.room, tally, args.limit, args.watch)
    tally.write(args.out, args.reader)


# -- a console's first full screen -----------------------------------------------------------


def console_main(mode: str, room: Path) -> None:
    """Start the console on `room` (hosting or attached) and print the first full screen's
    time from process start, as bench_console.py measures it (ms), then the panes'."""
    import asyncio

    import textual.drivers.headless_driver as headless_driver

    from tests.bench.started import process_age

    age_at_import = process_age() - (time.perf_counter() - T_IMPORT)

    class NullTerminalDriver(headless_driver.HeadlessDriver):
        """A terminal that renders each frame to escape sequences and throws them away."""

        @property
        def is_headless(self) -> bool:
            return False

        def write(self, data: str) -> None:
            pass

    async def start() -> tuple[float, float]:
        headless_driver.HeadlessDriver = NullTerminalDriver  # what run_test builds
        from console.app import make_app

        if mode == "host":
            from engine.providers.offline import OfflineModel

            app = make_app(room, provider=OfflineModel(delay=0), tune_process=True)
        else:
            app = make_app(room, attach=True, tune_process=True)
        first_screen: list[float] = []
        first_paint: list[float] = []

        def after_display() -> None:
            now = age_at_import + (time.perf_counter() - T_IMPORT)
            if not first_paint and app.screen is app.main:
                first_paint.append(now)
            if not first_screen and app.main.query_one("StatusBar").run_id.startswith("r_"):
                first_screen.append(now)

        app.post_display_hook = after_display  # type: ignore[method-assign]
        async with app.run_test(size=(160, 48)):
            while not first_screen:
                await asyncio.sleep(0.001)
            await app.shutdown()
        return first_screen[0], first_paint[0]

    screen, paint = asyncio.run(start())
    print(f"{screen * 1000:.1f} {paint * 1000:.1f}", file=sys.__stdout__, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    client = modes.add_parser("client", help="follow the room's event stream")
    client.add_argument("room", type=Path)
    client.add_argument("--reader", choices=("full", "light"), default="full")
    client.add_argument("--out", type=Path, required=True)
    client.add_argument("--cap", type=int, default=1_000_000, help="lags kept at most")
    client.add_argument("--limit", type=float, default=600.0, help="seconds at most")
    client.add_argument("--watch", action="append", default=[], metavar="LANE",
                        help="full: follow this lane (repeat it; default: every lane)")  # fmt: skip
    decide = modes.add_parser("decider", help="decision round trips through the API")
    decide.add_argument("room", type=Path)
    console = modes.add_parser("console", help="a console's first full screen")
    console.add_argument("how", choices=("host", "attach"))
    console.add_argument("room", type=Path)
    args = parser.parse_args()
    if args.mode == "client":
        client_main(args)
    elif args.mode == "decider":
        import anyio

        anyio.run(decider, args.room)
    else:
        console_main(args.how, args.room)


if __name__ == "__main__":
    main()
