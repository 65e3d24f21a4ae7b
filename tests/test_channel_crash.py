"""The channel crash test: SIGKILL a room whose channels are busy, many times, then check.

A worker process (tests/channel_worker.py) owns the room: a Telegram channel it polls,
a signed webhook hook it serves, the bus projector and the delivery worker. The Telegram
Bot API stand-in and the webhook receiver run here, in the test's process, so they
outlive every kill; the test is the webhook sender (it delivers each message until it
gets a 2xx, as a sender does). Messages are text only ("hello N"), so every turn ends
without an approval.

Each run feeds a few new messages, then SIGKILLs the worker: at a random moment (also
while it starts: resuming, catching the bus up, sending what the last run owed), or at
one of the worker's kill points (AGENTDECK_CHANNEL_KILL: a message admitted before its
offset or 2xx, a turn done before the bus has it, the bus written before the answer
leaves, the answer taken before it is marked sent). After each kill, read from the files
as the kill left them: execution.db is sound; every delivery the sender was answered 2xx
and every update below the stored poll offset has its request; the bus holds nothing the
truth does not. After a last clean run that drains everything:
- every message (Telegram update id, webhook delivery id) made exactly one request and
  one turn, done, and no other turn exists;
- every answer reached its stand-in at least once, and at most once more than the kills
  that found it still owed (so at most twice when one kill did, the issue's bound);
- the bus holds exactly the truth's public events, with the room's counts and last seq;
- the outbox has nothing pending, retrying or dead.

The worker processes are forked from a zygote that has the engine imported, so a run
costs no interpreter start (see `zygote` in tests/channel_worker.py). CHANNEL_CRASH_SEED
fixes the random choices (not the timing); AGENTDECK_SOAK=1 runs ten times as many kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import pytest
from anyio.abc import Process

from engine.store.bus import PUBLIC_KINDS
from tests.channel_worker import KILL_ENV, KILL_POINTS
from tests.standins import running
from tests.standins.receiver import Receiver
from tests.standins.sign import webhook_headers
from tests.standins.telegram import TelegramStandin
from tests.wait import PATIENCE, until

# A hundred kills: a minute on a loaded machine, more than the suite's deadline allows.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10 * PATIENCE)]
ROOT = Path(__file__).resolve().parent.parent
TOKEN = "123456:telegram-crash-token-AAAA"
HOOK_SECRET = "webhook-crash-secret-0123456789"
SOAK = bool(os.environ.get("AGENTDECK_SOAK"))
POINT_KILLS = 10 if SOAK else 3  # per kill point of the worker
RANDOM_KILLS = int(
    os.environ.get("CHANNEL_CRASH_RANDOM", 1000 if SOAK else 100 - POINT_KILLS * len(KILL_POINTS))
)
THREADS = 5  # webhook threads: answers of one thread leave in order
PUBLIC_SQL = (
    f"SELECT id, kind, turn_id FROM events WHERE kind IN ({','.join('?' * len(PUBLIC_KINDS))})"
    " AND (kind != 'call_changed' OR json_extract(body, '$.status') = 'suspended')"
)


class Zygote:
    """The test's side of `channel_worker --zygote`: fork, await, kill workers."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        self.forked: list[int] = []
        self.ready: dict[int, str] = {}
        self.exits: dict[int, int] = {}
        self._changed = anyio.Event()

    async def read(self) -> None:
        assert self.proc.stdout is not None
        buffered = b""
        async for chunk in self.proc.stdout:
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                what, pid, *rest = line.decode().split()
                if what == "pid":
                    self.forked.append(int(pid))
                elif what == "ready":
                    self.ready[int(pid)] = rest[0]
                elif what == "exit":
                    self.exits[int(pid)] = int(rest[0])
            self._changed.set()
            self._changed = anyio.Event()

    async def when(self, check: object, seconds: float) -> bool:
        """Whether `check()` holds within `seconds`, looked at each time the zygote says
        something (not a poll: woken by `read`)."""
        with anyio.move_on_after(seconds):
            while not check():  # type: ignore[operator]
                await self._changed.wait()
            return True
        return False

    async def spawn(self, room: Path, env: dict[str, str], stderr: Path) -> int:
        assert self.proc.stdin is not None
        count = len(self.forked)
        order = {"room": str(room), "env": env, "stderr": str(stderr)}
        await self.proc.stdin.send(json.dumps(order).encode() + b"\n")
        # The first fork waits for the zygote's warm-up (a room opened and closed: imports,
        # the loops, uvicorn), which took over a minute with two suites on the machine.
        within = PATIENCE if self.forked else 3 * PATIENCE
        assert await self.when(lambda: len(self.forked) > count, within), "the zygote forks no more"
        return self.forked[count]

    async def end(self, pid: int, sig: int = signal.SIGKILL) -> int:
        """Signal the worker (unless it is gone already); its exit code (-9: killed)."""
        if pid not in self.exits:
            os.kill(pid, sig)
        assert await self.when(lambda: pid in self.exits, PATIENCE), f"worker {pid} does not end"
        return self.exits[pid]


@dataclass
class Traffic:
    """The messages sent so far, and what the room acknowledged."""

    bot: TelegramStandin
    updates: dict[int, int] = field(default_factory=dict)  # update id -> chat id
    deliveries: dict[str, bytes] = field(default_factory=dict)  # delivery id -> body
    acked: set[str] = field(default_factory=set)  # deliveries answered 2xx
    n: int = 0

    def add(self, telegram: int, webhook: int) -> None:
        for _ in range(telegram):  # a chat per message: sendMessage names no message
            self.n += 1
            chat = 10_000 + self.n
            self.updates[self.bot.message(chat, f"hello {self.n}")] = chat
        for _ in range(webhook):
            self.n += 1
            body = {"text": f"hello {self.n}", "thread": self.n % THREADS, "sender": "crash"}
            self.deliveries[f"d-{self.n}"] = json.dumps(body).encode()

    def keys(self) -> set[str]:
        return {f"telegram:tg:{u}" for u in self.updates} | {
            f"webhook:gh:{d}" for d in self.deliveries
        }

    async def deliver(self, http: httpx.AsyncClient, address: str) -> None:
        """Deliver every delivery not answered 2xx yet (once each; called again later)."""

        async def one(delivery: str, body: bytes) -> None:
            try:
                answer = await http.post(f"http://{address}/hooks/gh", content=body,
                                         headers=webhook_headers(HOOK_SECRET, body, delivery))  # fmt: skip
            except httpx.HTTPError:
                return  # the worker died under it: delivered again later
            if 200 <= answer.status_code < 300:
                self.acked.add(delivery)

        async with anyio.create_task_group() as tg:
            for delivery, body in self.deliveries.items():
                if delivery not in self.acked:
                    tg.start_soon(one, delivery, body)


@dataclass
class Watched:
    """The webhook receiver, noting each answer that arrived before its turn's end was on
    the bus (truth, bus, delivery: in that order)."""

    receiver: Receiver
    bus: Path
    early: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.receiver.close()

    def app(self) -> object:
        inner = self.receiver.app()

        async def app(scope: dict, receive: object, send: object) -> None:
            key = dict(scope.get("headers", [])).get(b"idempotency-key")
            if key is not None and not self.on_bus(key.decode()):
                self.early.append(key.decode())
            await inner(scope, receive, send)  # type: ignore[arg-type]

        return app

    def on_bus(self, turn: str) -> bool:
        with closing(read_only(self.bus)) as conn:
            return bool(conn.execute(
                "SELECT 1 FROM bus_events WHERE turn_id = ? AND kind = 'turn_changed'"
                " AND json_extract(data, '$.status') = 'done'", (turn,)).fetchall())  # fmt: skip


@dataclass
class Ledger:
    """What the kills left, across the runs."""

    owed_at_kill: Counter[str] = field(default_factory=Counter)  # turn id -> kills
    kills: Counter[str] = field(default_factory=Counter)  # how each run ended


def read_only(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True)


def stored_offset(room: Path) -> int:
    path = room / "poll" / "tg.json"
    return int(json.loads(path.read_text())["offset"]) if path.exists() else 0


def truth_events(conn: sqlite3.Connection) -> set[tuple[int, str, str]]:
    return set(conn.execute(PUBLIC_SQL, PUBLIC_KINDS).fetchall())


def bus_state(room: Path) -> tuple[set[tuple[int, str, str]], list[tuple]]:
    db = room / "bus" / "events.db"
    if not db.exists():
        return set(), []
    with closing(read_only(db)) as conn:
        events = set(conn.execute("SELECT seq, kind, turn_id FROM bus_events").fetchall())
        rooms = conn.execute("SELECT room, running, waiting, pid, last_seq FROM rooms").fetchall()
    return events, rooms


def check_after_kill(room: Path, traffic: Traffic, ledger: Ledger, where: str) -> None:
    db = room / "execution.db"
    with closing(read_only(db)) if db.exists() else closing(sqlite3.connect(":memory:")) as conn:
        tables = {t for (t,) in conn.execute("SELECT name FROM sqlite_master")}
        if "outbox" not in tables:  # killed before the room's schema was written
            assert not traffic.acked and not stored_offset(room), where
            return
        [(integrity,)] = conn.execute("PRAGMA integrity_check").fetchall()
        assert integrity == "ok", f"execution.db {where}: {integrity}"
        keys = {k for (k,) in conn.execute("SELECT key FROM request_keys")}
        owed = [k for (k,) in conn.execute(
            "SELECT key FROM outbox WHERE state IN ('pending', 'retrying')")]  # fmt: skip
        truth = truth_events(conn)
    lost = {f"webhook:gh:{d}" for d in traffic.acked} - keys
    assert not lost, f"deliveries answered 2xx have no request {where}: {sorted(lost)}"
    offset = stored_offset(room)
    lost = {f"telegram:tg:{u}" for u in traffic.updates if u < offset} - keys
    assert not lost, f"updates below the offset ({offset}) have no request {where}: {lost}"
    ledger.owed_at_kill.update(owed)
    on_bus, _ = bus_state(room)
    assert on_bus <= truth, f"the bus holds what the truth does not {where}: {on_bus - truth}"


async def one_run(
    z: Zygote, room: Path, traffic: Traffic, http: httpx.AsyncClient, rng: random.Random,
    kill: str | None, stderr: Path,
) -> str:  # fmt: skip
    """Start a worker, feed it, kill it (at random, or let its kill point do it)."""
    traffic.add(telegram=rng.randint(0, 2), webhook=rng.randint(1, 3))
    env = {"TG_TOKEN": TOKEN, "HOOK_SECRET": HOOK_SECRET}
    if kill is not None:
        env[KILL_ENV] = kill
    pid = await z.spawn(room, env, stderr)
    if kill is None and rng.random() < 0.25:  # while it starts: resume, catch up, owed sends
        await z.when(lambda: pid in z.exits, rng.uniform(0.0, 0.15))  # the kill's moment
        code = await z.end(pid)
        return "random (start)"
    t0 = time.monotonic()
    await z.when(lambda: pid in z.ready or pid in z.exits, PATIENCE)
    if os.environ.get("CHANNEL_CRASH_TRACE"):
        print(f"ready in {time.monotonic() - t0:.3f}", file=sys.stderr)
    async with anyio.create_task_group() as tg:
        if pid in z.ready:
            tg.start_soon(traffic.deliver, http, z.ready[pid])
        if kill is None:
            await z.when(lambda: pid in z.exits, rng.uniform(0.0, 0.3))  # the kill's moment
        elif not await z.when(lambda: pid in z.exits, 3):  # the run's length: not a failure
            kill = f"{kill} (not reached)"
        code = await z.end(pid)
        tg.cancel_scope.cancel()
    assert code == -signal.SIGKILL, f"worker exited {code}: {stderr.read_text()[-2000:]}"
    return kill or "random"


async def drain(z: Zygote, room: Path, traffic: Traffic, http: httpx.AsyncClient,
                receiver: Receiver, stderr: Path) -> None:  # fmt: skip
    """A clean run: until every message has its turn and every answer is sent; then stop."""
    env = {"TG_TOKEN": TOKEN, "HOOK_SECRET": HOOK_SECRET}
    pid = await z.spawn(room, env, stderr)
    assert await z.when(lambda: pid in z.ready, PATIENCE), stderr.read_text()[-2000:]
    expected = len(traffic.keys())

    async def left() -> dict[str, int]:
        """Deliver what was not answered 2xx; what is left to do."""
        await traffic.deliver(http, z.ready[pid])
        with closing(read_only(room / "execution.db")) as conn:
            [(done,)] = conn.execute("SELECT count(*) FROM turns WHERE status='done'").fetchall()
            [(owed,)] = conn.execute(
                "SELECT count(*) FROM outbox WHERE state IN ('pending', 'retrying')"
            ).fetchall()
        return {"turns not done": max(0, expected - done), "answers owed": owed,
                "deliveries not answered 2xx": len(set(traffic.deliveries) - traffic.acked)}  # fmt: skip

    def outbox() -> list[tuple]:
        with closing(read_only(room / "execution.db")) as conn:
            return conn.execute("SELECT state, count(*) FROM outbox GROUP BY state").fetchall()

    await until(left, "every message has its turn and every answer is sent",
                ok=lambda left: not any(left.values()), within=2 * PATIENCE, every=0.05,
                seen=lambda: f"outbox by state: {outbox()}")  # fmt: skip
    assert await z.end(pid, signal.SIGTERM) == 0, stderr.read_text()[-2000:]


def check_final(room: Path, traffic: Traffic, receiver: Receiver, ledger: Ledger) -> Counter[str]:
    """Check the room after the last clean run; how often each turn's answer arrived."""
    with closing(read_only(room / "execution.db")) as conn:
        keys = dict(conn.execute("SELECT key, request_id FROM request_keys").fetchall())
        requests = dict(conn.execute("SELECT id, status FROM turn_requests").fetchall())
        turns = {r[0]: r[1:] for r in conn.execute("SELECT id, status, reason FROM turns")}
        silent = conn.execute("SELECT id FROM turns WHERE final_text IS NULL").fetchall()
        outbox = {r[0]: r[1:] for r in conn.execute("SELECT key, state, channel FROM outbox")}
        truth = truth_events(conn)
        top = conn.execute("SELECT max(id) FROM events").fetchone()[0]
    # every message: exactly one request, one turn
    assert set(keys) == traffic.keys(), "messages without a request, or requests of none"
    assert len(set(keys.values())) == len(keys), "two messages share a request"
    assert set(requests) == set(keys.values()), "requests no message made"
    assert set(requests.values()) == {"admitted"}
    assert set(turns) == set(requests), "turns no message made"
    assert {t: s for t, s in turns.items() if s != ("done", "natural")} == {}
    assert silent == [], "turns done without their answer's text"
    # every answer owed, sent, and received at least once and at most once per kill more
    unanswered = sorted(set(turns) - set(outbox))
    assert not unanswered, f"turns that owe their channel no answer: {unanswered}"
    assert {k: s for k, s in outbox.items() if s[0] != "sent"} == {}, "answers still owed"
    got: Counter[str] = Counter()
    for item in receiver.received:
        assert item.signed
        got[item.headers["idempotency-key"]] += 1
    by_chat = Counter(int(p["chat_id"]) for p in traffic.bot.sent)
    for update, chat in traffic.updates.items():
        got[keys[f"telegram:tg:{update}"]] = by_chat[chat]
    for turn in turns:
        limit = 1 + ledger.owed_at_kill[turn]
        assert 1 <= got[turn] <= limit, f"{turn} delivered {got[turn]} times (limit {limit})"
    twice = [t for t in turns if got[t] > 2]
    assert all(ledger.owed_at_kill[t] >= 2 for t in twice)
    # the bus is the truth's projection, counts and all
    on_bus, rooms = bus_state(room)
    assert on_bus == truth, (
        f"bus vs truth: {len(on_bus - truth)} extra, {len(truth - on_bus)} missing"
    )
    [(_, running_, waiting, pid, last_seq)] = rooms
    assert (running_, waiting, pid, last_seq) == (0, 0, None, top)
    kinds = Counter(k for _, k, _ in on_bus)
    assert kinds["turn_started"] == len(turns)
    return got


async def test_sigkill_anywhere_on_a_messages_way_loses_none_and_doubles_none(
    tmp_path: Path,
) -> None:
    seed = int(os.environ.get("CHANNEL_CRASH_SEED", random.randrange(2**31)))
    rng = random.Random(seed)
    plan: list[str | None] = [None] * RANDOM_KILLS
    plan += [f"{p}:{rng.randint(1, 3)}" for p in KILL_POINTS for _ in range(POINT_KILLS)]
    rng.shuffle(plan)
    room = tmp_path / "room"
    room.mkdir()
    bot, receiver = TelegramStandin(TOKEN), Receiver(HOOK_SECRET)
    watched = Watched(receiver, room / "bus" / "events.db")
    ledger = Ledger()
    started = time.monotonic()
    async with (
        running(bot) as bot_url, running(watched) as receiver_url,
        httpx.AsyncClient(timeout=5) as http,
        await anyio.open_process([sys.executable, "-m", "tests.channel_worker", "--zygote"],
                                 cwd=ROOT, stderr=None) as proc,
        anyio.create_task_group() as tg,
    ):  # fmt: skip
        (room / "channels.toml").write_text(
            f'[tg]\nkind = "telegram"\ntoken_env = "TG_TOKEN"\napi_url = "{bot_url}"\n'
            "poll_timeout = 1\n"
        )
        (room / "hooks.toml").write_text(
            'listen = "127.0.0.1:0"\n[gh]\nkind = "webhook"\nsecret_env = "HOOK_SECRET"\n'
            f'text = "text"\nthread = "thread"\nsender = "sender"\n'
            f'deliver_url = "{receiver_url}/hook"\n'
        )
        # A try counts from its start, so each kill during a send spends one: on a slow
        # machine many kills find an answer in flight. Not what this test is about: the
        # tries never run out, and a failed one is tried again soon.
        (room / "agentdeck.toml").write_text(
            "[delivery]\nmax_tries = 1000\nbackoff = 0.1\nbackoff_cap = 1.0\n"
        )
        z = Zygote(proc)
        tg.start_soon(z.read)
        traffic = Traffic(bot)
        for i, kill in enumerate(plan):
            where = f"(CHANNEL_CRASH_SEED={seed}, run {i}, kill {kill or 'random'})"
            stderr = tmp_path / f"worker-{i}.stderr"
            ended = await one_run(z, room, traffic, http, rng, kill, stderr)
            ledger.kills[ended] += 1
            if os.environ.get("CHANNEL_CRASH_TRACE"):
                print(f"{time.monotonic() - started:.2f} {i} {ended}", file=sys.stderr)
            # (a worker killed as it starts may not have opened its stderr yet)
            said = stderr.read_text() if stderr.exists() else ""
            assert "Traceback" not in said, f"worker failed {where}"
            check_after_kill(room, traffic, ledger, where)
        await drain(z, room, traffic, http, receiver, tmp_path / "worker-final.stderr")
        assert proc.stdin is not None
        await proc.stdin.aclose()
        tg.cancel_scope.cancel()
    got = check_final(room, traffic, receiver, ledger)
    assert watched.early == [], f"answers sent before the bus had their turn's end: {watched.early}"
    print(f"\n{len(plan)} kills in {time.monotonic() - started:.1f}s, {len(traffic.keys())}"
          f" messages; {sum(ledger.owed_at_kill.values())} answers owed at a kill;"
          f" answers received twice: {sum(1 for n in got.values() if n == 2)}, more:"
          f" {sum(1 for n in got.values() if n > 2)}; ended: {dict(ledger.kills)}")  # fmt: skip


async def test_a_worker_stopped_the_moment_it_says_ready_stops_cleanly(tmp_path: Path) -> None:
    """The crash test's last run stops its worker as soon as nothing is left to do, which
    can be the moment it says `ready`: its SIGTERM handler must already be in place (CI
    saw the worker die of the signal, -15, instead of stopping)."""
    room = tmp_path / "room"
    room.mkdir()
    (room / "hooks.toml").write_text(  # the worker is ready once its hook listener serves
        'listen = "127.0.0.1:0"\n[gh]\nkind = "webhook"\nsecret_env = "HOOK_SECRET"\n'
        'text = "text"\nthread = "thread"\ndeliver_url = "http://127.0.0.1:9/hook"\n'
    )
    async with (
        await anyio.open_process([sys.executable, "-m", "tests.channel_worker", "--zygote"],
                                 cwd=ROOT, stderr=None) as proc,
        anyio.create_task_group() as tg,
    ):  # fmt: skip
        z = Zygote(proc)
        tg.start_soon(z.read)
        for i in range(8):
            stderr = tmp_path / f"worker-{i}.stderr"
            pid = await z.spawn(room, {"HOOK_SECRET": HOOK_SECRET}, stderr)
            assert await z.when(lambda pid=pid: pid in z.ready or pid in z.exits, PATIENCE), (
                stderr.read_text()[-2000:]
            )
            assert await z.end(pid, signal.SIGTERM) == 0, stderr.read_text()[-2000:]
        assert proc.stdin is not None
        await proc.stdin.aclose()
        tg.cancel_scope.cancel()
