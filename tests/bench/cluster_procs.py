"""The cluster benchmark's processes and database (bench_cluster.py): a worker room on disk,
a runtime process it talks to by JSON lines (cluster_child.py), the polling of the database
the workers share, and the CPU time of processes read from /proc."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import anyio
import psycopg
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from engine.domain.messages import Message
from engine.services.scheduler import Request
from engine.store.pg.claims import notify_work
from engine.store.schedule import request_row
from engine.store.sql import dialect

CHILD = Path(__file__).with_name("cluster_child.py")
TICK = os.sysconf("SC_CLK_TCK")
STUCK = float(
    os.environ.get("BENCH_STUCK", 60)
)  # seconds a poll waits before it calls the run stuck


def write_room(
    room: Path, url: str | None, worker: str, *, lease: float, capacity: int, budget: int
) -> Path:
    """A room whose agentdeck.toml makes its runtime a worker of the cluster on `url` (None:
    the SQLite room) running at most `capacity` turns at once, `budget` across the cluster."""
    room.mkdir(parents=True)
    cluster = (f'[store]\nurl = "{url}"\n\n[cluster]\nenabled = true\nworker = "{worker}"\n'
               f"lease_seconds = {lease}\n\n") if url else ""  # fmt: skip
    (room / "agentdeck.toml").write_text(
        f"{cluster}[runtime]\nmax_running_turns = {capacity}\nmax_rounds = 100000\n\n"
        f'[groups.chat]\nmax_running_turns = {budget}\nmax_queued_turns = 1000000\ncoalesce = "none"\n'
    )  # fmt: skip
    return room


class Child:
    """A runtime process on a room (cluster_child.py), answering JSON commands."""

    def __init__(self, proc: Process, room: Path, log: Path) -> None:
        self.proc, self.room, self.log = proc, room, log
        assert proc.stdout is not None
        self.out = BufferedByteReceiveStream(proc.stdout)
        self.pid = proc.pid
        self.run = ""

    @classmethod
    async def start(cls, room: Path, tmp: Path, *, hang: bool = False) -> Child:
        log = tmp / f"{room.parent.name}-{room.name}.log"
        with open(log, "wb") as err:
            proc = await anyio.open_process(
                [sys.executable, str(CHILD), str(room), *(["--hang"] if hang else [])],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        child = cls(proc, room, log)
        with anyio.fail_after(60):
            child.run = (await child.line())["run"]
        return child

    async def line(self) -> dict[str, Any]:
        try:
            raw = await self.out.receive_until(b"\n", 1 << 20)
        except (anyio.EndOfStream, anyio.IncompleteRead):
            raise RuntimeError(
                f"{self.room.name} exited:\n{self.log.read_text()[-3000:]}"
            ) from None
        return json.loads(raw)  # type: ignore[no-any-return]

    async def ask(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        await self.proc.stdin.send(json.dumps(cmd).encode() + b"\n")
        with anyio.fail_after(120):
            return await self.line()

    def kill(self) -> None:
        if self.proc.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    async def close(self) -> None:
        """End of stdin: the runtime closes (a worker leaves); killed if it takes 30 s."""
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            await self.proc.stdin.aclose()
            with anyio.move_on_after(30):
                await self.proc.wait()
            self.kill()
        await self.proc.wait()
        await self.proc.aclose()


class Db:
    """The benchmark's own connection to the workers' database (or the SQLite room's,
    read-only), for queueing turns and polling; queries are written with `?` marks."""

    def __init__(self, pg: psycopg.AsyncConnection[Any] | None, lite: sqlite3.Connection | None):
        self._pg, self._lite = pg, lite

    @classmethod
    async def pg(cls, url: str) -> Db:
        return cls(await psycopg.AsyncConnection.connect(url, autocommit=True), None)

    @classmethod
    async def sqlite(cls, path: Path) -> Db:
        return cls(None, sqlite3.connect(f"file:{path}?mode=ro", uri=True))

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._pg is not None:
            cur = await self._pg.execute(sql.replace("?", "%s"), params)
            return await cur.fetchall()
        assert self._lite is not None
        return self._lite.execute(sql, params).fetchall()

    async def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return (await self.rows(sql, params))[0][0]

    async def until(
        self, done: Callable[[Any], bool], sql: str, params: Sequence[Any], *, every: float
    ) -> float:
        """Poll until `done(value)`; the wall clock (time.time) when it first was."""
        with anyio.move_on_after(STUCK):
            while not done(await self.value(sql, params)):
                await anyio.sleep(every)
            return time.time()
        raise RuntimeError(f"not there after {STUCK} s: {sql} {params}\n{await self.state()}")

    async def state(self) -> str:
        """What the database holds now, by status (for a run that is stuck)."""
        out = []
        for sql in ("SELECT 'request', status, count(*) FROM turn_requests GROUP BY status",
                    "SELECT 'turn', status, count(*) FROM turns GROUP BY status",
                    "SELECT 'call', status, count(*) FROM tool_calls GROUP BY status") + ((
                    "SELECT 'lease', worker_id, count(*) FROM thread_leases GROUP BY worker_id",
                    "SELECT 'slot', group_name, count(*) FROM group_slots GROUP BY group_name",
                    ) if self._pg is not None else ()):  # fmt: skip
            out += [" ".join(map(str, r)) for r in await self.rows(sql)]
        return "\n".join(out)

    async def queue(self, threads: Sequence[str], text: str, turns: int) -> None:
        """Queue `turns` requests on each thread as a worker's submit writes them, in one
        transaction with the notice that wakes every worker's claim."""
        assert self._pg is not None
        now, rows = time.time(), []
        for _ in range(turns):
            for thread in threads:
                msg = Message(origin="invoke", sender="bench", thread_id=thread, text=text)
                req = Request(f"t_{random.getrandbits(64):016x}", msg, "chat", now)
                sql, params = request_row(req, now)
                rows.append([p.value if isinstance(p, Enum) else p for p in params])
                now += 1e-6  # in order, as submitted one after another
        async with self._pg.transaction():
            async with self._pg.cursor() as cur:
                await cur.executemany(dialect("postgres").text(sql), rows)
            await notify_work(self._pg)

    async def close(self) -> None:
        if self._pg is not None:
            await self._pg.close()
        if self._lite is not None:
            self._lite.close()


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def server_cpu(server: Any) -> float:
    """CPU seconds of a PostgreSQL server: the postmaster's and its children's (backends)."""
    master = int((Path(server.data) / "postmaster.pid").read_text().split()[0])
    total = proc_cpu(master)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == master:
                        total += proc_cpu(int(entry.name))
            except (OSError, ValueError):
                continue
    return total


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]
