"""Outbound delivery (issue 17): at least once, in order per thread, retried with backoff,
dead after the channel's tries, retried or dropped by the operator, resumed after a stop.

The channel is a webhook receiver on loopback (a stand-in for the outside world) that
answers each POST as its script says: 200, 503 with Retry-After, 400, or nothing for a
while. `webhook` is a minimal sender for it (the real channels are engine/channels/).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.config import ChannelDelivery, DeliveryConfig
from engine.domain.events import DeliveryChanged
from engine.domain.messages import Message
from engine.services.delivery import DeliveryWorker, backoff, counts, deliveries, failure_of
from engine.services.event_bus import EventBus
from engine.services.projector import Projector
from engine.store.bus import Bus
from engine.store.outbox import outbox_row
from engine.store.sqlite import SqliteStore
from tests.helpers import runtime
from tests.scripted import Reply
from tests.wait import PATIENCE, until

pytestmark = pytest.mark.anyio


class Receiver:
    """What the stand-in receiver got, and how it answers: `script[key]` is a list of
    statuses it pops one per POST of that key (then 200); 0 means it does not answer until
    the receiver closes."""

    def __init__(self) -> None:
        self.got: list[tuple[str, int]] = []  # (key, the status it answered)
        self.script: dict[str, list[int]] = {}
        self.retry_after = "7"
        self.on_post: Any = None  # called with the body of each POST, in the server thread
        self.lock = threading.Lock()
        self.closing = threading.Event()  # ends the POSTs it holds without an answer


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Receiver]]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            key = self.headers["Idempotency-Key"]
            with state.lock:
                left = state.script.get(key) or []
                status = left.pop(0) if left else 200
                state.got.append((key, status))
            if state.on_post is not None:
                state.on_post(body)
            if status == 0:  # held past any sender's timeout: until the receiver closes
                state.closing.wait(PATIENCE)
                status = 200
            self.send_response(status)
            if status == 503:
                self.send_header("Retry-After", state.retry_after)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", state
    finally:
        state.closing.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


class SendFailed(Exception):
    def __init__(self, text: str, permanent: bool, retry_after: float | None) -> None:
        super().__init__(text)
        self.permanent, self.retry_after = permanent, retry_after


def webhook(url: str, clock: Any, tries: list[tuple[str, float]]) -> Any:
    """A deliver function that POSTs the answer to `url` (recording each try's key and
    the fake clock's time)."""

    async def deliver(channel: str, reply: dict[str, Any], text: str, key: str) -> None:
        tries.append((key, clock()))
        async with httpx.AsyncClient() as client:
            r = await client.post(url, json={"reply": reply, "text": text},
                                  headers={"Idempotency-Key": key})  # fmt: skip
        if r.status_code >= 400:
            after = r.headers.get("Retry-After")
            raise SendFailed(f"HTTP {r.status_code}", 400 <= r.status_code < 500 and
                             r.status_code != 429, float(after) if after else None)  # fmt: skip

    return deliver


class FakeTime:
    """A clock the worker's sleeps move forward (each also yields for a moment)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        await anyio.sleep(0.005)  # a fake clock's sleep yields for real
        self.now += seconds


@asynccontextmanager
async def worker(db: Path, url: str, t: FakeTime, config: DeliveryConfig | None = None,
                 projector: Any = None) -> AsyncIterator[tuple[DeliveryWorker, Any]]:  # fmt: skip
    """A worker on the store at `db`, running; yields it and the events it committed."""
    store = await SqliteStore.open(db)
    bus = EventBus(store, "r1", t.clock)
    events: list[DeliveryChanged] = []
    bus.subscribe(lambda e: events.append(e) if isinstance(e, DeliveryChanged) else None)
    tries: list[tuple[str, float]] = []
    w = DeliveryWorker(store, bus.commit, webhook(url, t.clock, tries), clock=t.clock,
                       sleep=t.sleep, config=config or DeliveryConfig(timeout=PATIENCE),
                       projector=projector)  # fmt: skip
    w.tries = tries  # type: ignore[attr-defined]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run)
            yield w, events
            tg.cancel_scope.cancel()
    finally:
        await store.close()


async def owe(db: Path, *answers: tuple[str, str], at: float = 1000.0) -> None:
    """Outbox rows (turn id, thread) as turns' ends would leave them."""
    store = await SqliteStore.open(db)
    try:
        await store.write([outbox_row(turn, thread, "hook", {"to": thread}, f"answer {turn}", at)
                           for turn, thread in answers])  # fmt: skip
    finally:
        await store.close()


def states(db: Path) -> dict[str, tuple[str, int]]:
    conn = sqlite3.connect(db)
    try:
        return {k: (s, n) for k, s, n in conn.execute("SELECT key, state, tries FROM outbox")}
    finally:
        conn.close()


def settled(db: Path, n: int) -> bool:
    return sum(s in ("sent", "dead") for s, _ in states(db).values()) >= n


async def test_answers_leave_in_order_per_thread(tmp_path: Path, receiver: Any) -> None:
    url, got = receiver
    db = tmp_path / "execution.db"
    await owe(db, ("a1", "A"), ("b1", "B"), ("a2", "A"), ("a3", "A"), ("b2", "B"))
    got.script = {"a1": [503, 503], "b1": [500]}  # a1 is retried twice, a2 waits for it
    t = FakeTime()
    async with worker(db, url, t) as (w, events):
        await until(lambda: settled(db, 5), "all 5 answers sent or dead", seen=lambda: states(db))
    assert {k: s for k, (s, _) in states(db).items()} == dict.fromkeys(
        ["a1", "a2", "a3", "b1", "b2"], "sent"
    )
    for thread in ("a", "b"):
        mine = [(k, s) for k, s in got.got if k.startswith(thread)]
        keys = sorted({k for k, _ in mine})
        assert [k for k, s in mine if s == 200] == keys  # each sent once, in order
        for earlier, later in zip(keys, keys[1:], strict=False):  # tried once the one
            sent = max(i for i, (k, s) in enumerate(mine) if k == earlier and s == 200)
            assert min(i for i, (k, _) in enumerate(mine) if k == later) > sent  # before left
    retrying = [e for e in events if e.state == "retrying" and e.key == "a1"]
    assert [e.next_at - e.at for e in retrying] == [7.0, 7.0]  # Retry-After honoured
    a1_tries = [at for k, at in w.tries if k == "a1"]  # type: ignore[attr-defined]
    assert [b - a >= 7.0 for a, b in zip(a1_tries, a1_tries[1:], strict=False)] == [True, True]
    [b1_retry] = [e for e in events if e.state == "retrying" and e.key == "b1"]
    assert 0 <= b1_retry.next_at - b1_retry.at <= 1.0  # full jitter within the first backoff


def test_backoff_is_full_jitter_under_the_cap() -> None:
    import random

    rng = random.Random(7)
    waits = [[backoff(n, 1.0, 300.0, rng) for _ in range(200)] for n in range(1, 12)]
    for n, ws in enumerate(waits, 1):
        assert all(0 <= w <= min(300.0, 2.0 ** (n - 1)) for w in ws)
    assert max(waits[-1]) > 150  # it does reach toward the cap
    assert failure_of(SendFailed("x", True, None)).permanent
    assert not failure_of(RuntimeError("x")).permanent
    assert failure_of(SendFailed("x", False, 1e9)).retry_after == 3600.0


async def test_dead_after_max_tries_then_retried_or_dropped(tmp_path: Path,
                                                            receiver: Any) -> None:  # fmt: skip
    url, got = receiver
    db = tmp_path / "execution.db"
    await owe(db, ("x1", "X"), ("x2", "X"), ("y1", "Y"))
    got.script = {"x1": [503] * 10, "y1": [503] * 10}
    got.retry_after = "1"
    config = DeliveryConfig(
        timeout=PATIENCE, max_tries=8, channels={"hook": ChannelDelivery(max_tries=3)}
    )
    t = FakeTime()
    async with worker(db, url, t, config) as (w, events):
        await until(lambda: settled(db, 3), "all 3 answers sent or dead", seen=lambda: states(db))
        assert states(db) == {"x1": ("dead", 3), "x2": ("sent", 1), "y1": ("dead", 3)}
        assert [k for k, _ in got.got].count("x1") == 3  # and x2 went once x1 was dead
        c = await counts(w.store)
        assert (c["dead"], c["sent"], c["pending"]) == (2, 1, 0)
        dead = {d.turn_id: d for d in await deliveries(w.store, ["dead"])}
        assert set(dead) == {"x1", "y1"} and dead["x1"].last_error == "HTTP 503"
        got.script = {}
        assert await w.retry(dead["x1"].id)
        await until(lambda: states(db), "x1 sent on its retry", ok=lambda st: st["x1"][0] == "sent")
        assert await w.drop(dead["y1"].id)
        assert not await w.drop(dead["x1"].id)  # sent: nothing to drop
        assert not await w.retry(dead["y1"].id)  # dropped: not dead any more
        assert states(db)["y1"] == ("dropped", 3)
    assert [e.state for e in events if e.key == "x1"][-2:] == ["pending", "sent"]
    assert [e.state for e in events if e.key == "y1"][-1] == "dropped"


async def test_a_permanent_failure_is_dead_at_once(tmp_path: Path, receiver: Any) -> None:
    url, got = receiver
    db = tmp_path / "execution.db"
    await owe(db, ("p1", "P"))
    got.script = {"p1": [400]}
    async with worker(db, url, FakeTime()):
        await until(lambda: settled(db, 1), "the answer sent or dead", seen=lambda: states(db))
    assert states(db) == {"p1": ("dead", 1)}
    assert got.got == [("p1", 400)]


async def test_a_hanging_channel_is_cut_by_the_timeout(tmp_path: Path, receiver: Any) -> None:
    url, got = receiver
    db = tmp_path / "execution.db"
    await owe(db, ("h1", "H"))
    got.script = {"h1": [0]}  # the first POST gets no answer (until the receiver closes)
    async with worker(db, url, FakeTime(), DeliveryConfig(timeout=1.0)) as (w, events):
        inner = w.deliver

        async def deliver(*args: Any) -> None:
            w.config = DeliveryConfig(timeout=PATIENCE)  # from the next try on; this one is cut
            await inner(*args)

        w.deliver = deliver  # type: ignore[method-assign]
        await until(lambda: settled(db, 1), "the answer sent or dead", seen=lambda: states(db))
    assert states(db) == {"h1": ("sent", 2)}
    [failed] = [e for e in events if e.state == "retrying"]
    assert failed.error is not None and "no answer from hook" in failed.error


async def test_a_restart_delivers_what_was_owed(tmp_path: Path, receiver: Any) -> None:
    url, got = receiver
    db = tmp_path / "execution.db"
    await owe(db, ("r1", "R"), ("r2", "R"), ("s1", "S"))
    got.script = {"r1": [503] * 3}
    got.retry_after = "600"  # the first run stops while r1 waits to be retried
    t = FakeTime()
    async with worker(db, url, t):
        await until(lambda: states(db), "s1 sent while r1 waits to be retried",
                    ok=lambda st: (st["s1"][0], st["r1"][0]) == ("sent", "retrying"))  # fmt: skip
    assert states(db)["r2"] == ("pending", 0)
    got.script = {}
    t.now += 600
    async with worker(db, url, t):  # a new run: everything still owed goes
        await until(lambda: settled(db, 3), "all 3 answers sent or dead", seen=lambda: states(db))
    assert {k: s for k, (s, _) in states(db).items()} == dict.fromkeys(["r1", "r2", "s1"], "sent")


async def test_a_try_is_counted_before_it_leaves_so_an_answer_that_kills_goes_dead(
    tmp_path: Path, receiver: Any
) -> None:
    """A process that dies during every try of one answer (the answer kills it) must not
    go round and round: each try is counted before it leaves, and an answer whose tries
    all ended with their runtime is dead at the next start, without another try."""
    url, got = receiver
    db = tmp_path / "execution.db"
    await owe(db, ("k1", "K"))
    t = FakeTime()
    seen: list[tuple[str, int]] = []
    async with worker(db, url, t) as (w, _):
        inner = w.deliver

        async def deliver(*args: Any) -> None:
            seen.append(states(db)["k1"])  # what a kill now would leave
            await inner(*args)

        w.deliver = deliver  # type: ignore[method-assign]
        await until(lambda: settled(db, 1), "the answer sent or dead", seen=lambda: states(db))
    assert seen == [("pending", 1)]
    await owe(db, ("k2", "K2"))
    conn = sqlite3.connect(db)
    with conn:  # as if 8 runs had died during its tries
        conn.execute("UPDATE outbox SET tries = 8 WHERE key = 'k2'")
    conn.close()
    before = len(got.got)
    async with worker(db, url, t):
        await until(lambda: states(db), "k2 dead", ok=lambda st: st["k2"][0] == "dead")
    assert states(db)["k2"] == ("dead", 8)
    assert len(got.got) == before  # no ninth try


async def test_the_bus_holds_the_turn_before_its_answer_leaves(tmp_path: Path,
                                                               receiver: Any) -> None:  # fmt: skip
    url, got = receiver
    bus_file = tmp_path / "events.db"
    seen_on_bus: list[list[str]] = []

    def check_bus(body: dict[str, Any]) -> None:  # in the receiver's thread, as a user reads
        conn = sqlite3.connect(bus_file)
        try:
            seen_on_bus.append([r[0] for r in conn.execute(
                "SELECT json_extract(data, '$.status') FROM bus_events WHERE kind='turn_changed'"
            )])  # fmt: skip
        finally:
            conn.close()

    got.on_post = check_bus
    message = Message(origin="chat", channel="hook", sender="ann", thread_id="hook:1",
                      text="hi", meta={"reply": {"to": "ann"}})  # fmt: skip
    async with runtime(tmp_path, lambda _: Reply(text="hello ann")) as rt:
        rt.ctx.delivering = frozenset({"hook"})
        bus = await Bus.open(bus_file)
        projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock)
        tries: list[tuple[str, float]] = []
        w = DeliveryWorker(rt.store, rt.commit, webhook(url, rt.clock, tries), clock=rt.clock,
                           projector=projector, config=DeliveryConfig(timeout=PATIENCE))  # fmt: skip
        rt.subscribe(w.watch)
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run)
            out = await rt.run_turn(message)
            await until(lambda: counts(rt.store), "the answer sent", ok=lambda c: c["sent"] == 1)
            tg.cancel_scope.cancel()
        await projector.catch_up()
        events = await bus.events(str(rt.room.path))
        await bus.close()
    assert got.got == [(out.turn_id, 200)]
    assert seen_on_bus == [["done"]]
    states_on_bus = [json.loads(d)["state"] for _, _, k, *_, d in events if k == "delivery_changed"]
    assert states_on_bus == ["pending", "sent"]
