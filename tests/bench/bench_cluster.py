"""Cluster benchmark (issue 18): runtime workers sharing one PostgreSQL database, each a
process of its own, next to the embedded SQLite room in the same run.

    .venv/bin/python -m tests.bench.bench_cluster [--quick] [--workers 1,2,4] [--lease 2]

A throwaway PostgreSQL server (tests/pg.py: a private socket, fsync off) holds the truth.
Each worker is tests/bench/cluster_child.py on a room of its own whose agentdeck.toml names
the database and `[cluster] enabled`; the SQLite room is the same program on a room with no
`[store] url`. The model has no latency. Printed, with the numbers they are judged by:

- throughput: `--threads` threads (64) with `--turns` turns each of `--rounds` tool rounds
  (2: inference, noop, inference, noop, inference = 5 steps a turn), all queued at once;
  steps/s (rows of `steps` written per second of wall time, from queueing to the last turn
  done seen by polling the database), with 1, 2 and 4 workers and with the SQLite room (one
  runtime, which submits the turns itself). The workers' turns are queued by the benchmark
  writing the requests and their notice into the database (as a worker's `submit` does,
  without the worker's claim that follows it), so the workers claim them as they have room.
  Each worker may run threads / workers turns at once (the cluster's total is the room's);
  the group budget is `--threads` across the cluster. Per process: CPU seconds over the
  window (utime + stime from /proc); the PostgreSQL server's too (its backends).
- takeover: a worker holding `--hold` threads, each with its turn in flight (a tool that
  never returns there), is killed with SIGKILL while another worker is up; from the kill to
  every one of those threads leased by the other worker, and to every turn done there (the
  tool is idempotent: run again). The floor is the lease's expiry, read from the database
  right after the kill (between 2/3 and 1 lease after it: heartbeats come 3 a lease).
- decision latency: a turn waits on a call that needs approval (started through worker A;
  a thread whose turn waits is leased by nobody); the decision is made through A, or
  through worker B, and timed from `decide` returning in that process to the call's row
  leaving `suspended` (the benchmark polls it every millisecond). The SQLite room's same
  decision, through its one runtime, is the floor of the engine. p50 / p95.

The machine's cores are shared by every worker and the server: with more workers than
cores, more workers cannot mean more steps/s, only what the coordination costs. Numbers
are information; the exit status never depends on them.
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio
import psycopg

from tests import pg
from tests.bench.cluster_procs import Child, Db, pct, proc_cpu, server_cpu, write_room

SQLITE = "sqlite room"


async def throughput(
    tmp: Path, label: str, n: int, url: str | None, args: argparse.Namespace
) -> dict[str, Any]:
    """One throughput run: `n` workers on `url` (None: the SQLite room, one runtime)."""
    capacity = math.ceil(args.threads / n)
    rooms = [write_room(tmp / label / f"w{i + 1}", url, f"w{i + 1}", lease=args.lease,
                        capacity=capacity, budget=args.threads) for i in range(n)]  # fmt: skip
    children = [await Child.start(room, tmp) for room in rooms]
    db = await (Db.pg(url) if url else Db.sqlite(rooms[0] / "execution.db"))
    try:

        async def wave(prefix: str, turns: int) -> float:
            threads = [f"{prefix}-{i}" for i in range(args.threads)]
            t0 = time.perf_counter()
            if url is None:
                await children[0].ask({"op": "submit", "threads": threads,
                                       "text": f"go {args.rounds}", "turns": turns})  # fmt: skip
            else:
                await db.queue(threads, f"go {args.rounds}", turns)
            await db.until(lambda c: c >= len(threads) * turns,
                           "SELECT count(*) FROM turns WHERE status = 'done' AND thread_id LIKE ?",
                           (f"{prefix}-%",), every=0.02)  # fmt: skip
            return time.perf_counter() - t0

        await wave("warm", 1)
        steps0 = await db.value("SELECT count(*) FROM steps")
        cpu0 = [proc_cpu(c.pid) for c in children]
        server0 = server_cpu(args.server) if url else 0.0
        wall = await wave("bench", args.turns)
        cpu = [proc_cpu(c.pid) - c0 for c, c0 in zip(children, cpu0, strict=True)]
        server = server_cpu(args.server) - server0 if url else 0.0
        steps = await db.value("SELECT count(*) FROM steps") - steps0
        spread = dict(await db.rows("SELECT run_id, count(*) FROM turns WHERE thread_id LIKE ?"
                                    " GROUP BY run_id", ("bench-%",)))  # fmt: skip
    finally:
        await db.close()
        for c in children:
            await c.close()
    per_worker = [spread.get(c.run, 0) for c in children]
    return {"label": label, "n": n, "steps": steps, "wall": wall, "steps_s": steps / wall,
            "cpu": cpu, "server": server, "turns": per_worker}  # fmt: skip


async def takeover(tmp: Path, url: str, rep: int, args: argparse.Namespace) -> dict[str, float]:
    """Kill -9 a worker whose threads have turns in flight; time the other's takeover."""
    kw = {"lease": args.lease, "capacity": args.threads, "budget": args.threads}
    victim = await Child.start(write_room(tmp / f"kill{rep}" / "w1", url, "w1", **kw), tmp,
                               hang=True)  # fmt: skip
    db = await Db.pg(url)
    heir = None
    try:
        threads = [f"hold{rep}-{i}" for i in range(args.hold)]
        await victim.ask({"op": "submit", "threads": threads, "text": "hold", "turns": 1})
        await db.until(lambda c: c >= len(threads), "SELECT count(*) FROM tool_calls WHERE"
                       " tool = 'hold' AND status = 'running' AND thread_id LIKE ?",
                       (f"hold{rep}-%",), every=0.02)  # fmt: skip
        heir = await Child.start(write_room(tmp / f"kill{rep}" / "w2", url, "w2", **kw), tmp)
        await anyio.sleep(0.3)  # its first claims are made (and find nothing: w1 holds all)
        held = await db.value("SELECT count(*) FROM thread_leases WHERE worker_id = 'w1'"
                              " AND thread_id LIKE ?", (f"hold{rep}-%",))  # fmt: skip
        assert held == len(threads), f"w1 holds {held} of {len(threads)} threads"
        victim.kill()
        killed = time.time()
        expiry = await db.value("SELECT max(expires_at) FROM thread_leases WHERE thread_id LIKE ?",
                                (f"hold{rep}-%",))  # fmt: skip
        leased = await db.until(lambda c: c >= len(threads), "SELECT count(*) FROM thread_leases"
                                " WHERE worker_id = 'w2' AND thread_id LIKE ?",
                                (f"hold{rep}-%",), every=0.005)  # fmt: skip
        done = await db.until(lambda c: c >= len(threads), "SELECT count(*) FROM turns WHERE"
                              " status = 'done' AND thread_id LIKE ?", (f"hold{rep}-%",),
                              every=0.005)  # fmt: skip
    finally:
        await db.close()
        victim.kill()
        await victim.close()
        if heir is not None:
            await heir.close()
    return {"expiry": expiry - killed, "leased": leased - killed, "done": done - killed}


async def decisions(
    tmp: Path, url: str | None, args: argparse.Namespace
) -> dict[str, list[tuple[float, str]]]:
    """Decision latency by path: 'A' (the worker that ran the turn), 'B' (another), or the
    SQLite room's one runtime; each sample (seconds, the worker whose lease resumed it)."""
    names = ["A", "B"] if url else [SQLITE]
    kw = {"lease": args.lease, "capacity": args.threads, "budget": args.threads}
    children = [await Child.start(write_room(tmp / f"decide-{bool(url)}" / n, url, n, **kw), tmp)
                for n in names]  # fmt: skip
    db = await (Db.pg(url) if url else Db.sqlite(tmp / f"decide-{bool(url)}" / SQLITE /
                                                 "execution.db"))  # fmt: skip
    out: dict[str, list[tuple[float, str]]] = {n: [] for n in names}
    try:
        for i in range(args.samples * len(names) + 2):  # the first two warm up
            path = names[i % len(names)]
            thread = f"ask-{i}"
            await children[0].ask({"op": "submit", "threads": [thread], "text": "ask", "turns": 1})
            waiting = ("SELECT count(*) FROM turns t WHERE t.thread_id = ? AND t.status ="
                       " 'waiting'")  # fmt: skip
            if url:  # and its lease given back: where a waiting thread rests
                waiting += (" AND NOT EXISTS (SELECT 1 FROM thread_leases l WHERE l.thread_id ="
                            " t.thread_id AND l.worker_id IS NOT NULL)")  # fmt: skip
            await db.until(lambda c: c == 1, waiting, (thread,), every=0.005)
            call = await db.value("SELECT id FROM tool_calls WHERE thread_id = ?", (thread,))
            left: dict[str, Any] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_call, db, call, left, url is not None)
                answer = await children[names.index(path)].ask({"op": "decide", "call": call})
            assert answer["status"] == "queued", answer
            if i >= 2:
                out[path].append((left["at"] - answer["at"], left["by"] or path))
            await db.until(lambda c: c == 1, "SELECT count(*) FROM turns WHERE thread_id = ?"
                           " AND status = 'done'", (thread,), every=0.005)  # fmt: skip
    finally:
        await db.close()
        for c in children:
            await c.close()
    return out


async def watch_call(db: Db, call: str, left: dict[str, Any], leases: bool) -> None:
    """Poll the call's row every millisecond; note when it left `suspended`, and who held
    the thread's lease then."""
    sql = ("SELECT c.status, l.worker_id FROM tool_calls c LEFT JOIN thread_leases l ON"
           " l.thread_id = c.thread_id WHERE c.id = ?") if leases else (
           "SELECT status, NULL FROM tool_calls WHERE id = ?")  # fmt: skip
    while True:
        rows = await db.rows(sql, (call,))
        if rows[0][0] != "suspended":
            left.update(at=time.time(), by=rows[0][1])
            return
        await anyio.sleep(0.001)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


async def main(args: argparse.Namespace) -> None:
    workers = [int(w) for w in args.workers.split(",")]
    cores = os.cpu_count() or 1
    print(f"agentdeck cluster benchmark: {args.threads} threads x {args.turns} turns of "
          f"{args.rounds} tool rounds, zero-latency model; {cores} CPU cores shared by every "
          "worker and the database server")  # fmt: skip
    with pg.cluster() as server, tempfile.TemporaryDirectory(prefix="agentdeck-bench-") as t:
        tmp = Path(t)
        args.server = server
        with psycopg.connect(server.url()) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        print(f"PostgreSQL {version} (throwaway, fsync off, Unix socket); SQLite "
              f"{sqlite3.sqlite_version} (synchronous=FULL); lease {args.lease:g} s")  # fmt: skip
        print()
        runs = [await throughput(tmp, "sqlite", 1, None, args)]
        for n in workers:
            runs.append(await throughput(tmp, f"pg{n}", n, server.database(), args))
        print_throughput(runs, cores)

        kills = [await takeover(tmp, server.database(), r, args) for r in range(args.kills)]
        print_takeover(kills, args)

        lat = await decisions(tmp, None, args)
        lat.update(await decisions(tmp, server.database(), args))
        print_decisions(lat, args)


def print_throughput(runs: list[dict[str, Any]], cores: int) -> None:
    print("throughput")
    head = (f"  {'store':<12}{'workers':>8}{'steps':>8}{'wall s':>8}{'steps/s':>9}{'vs 1':>6}"
            f"  {'turns per worker':<20}{'CPU s per worker':<24}{'db CPU s':>9}")  # fmt: skip
    print(head)
    print("  " + "-" * (len(head) - 2))
    base = runs[0]["steps_s"]
    one = next((r["steps_s"] for r in runs if r["n"] == 1 and r["label"] != "sqlite"), None)
    for r in runs:
        store = SQLITE if r["label"] == "sqlite" else "postgres"
        rel = "" if r["label"] == "sqlite" or one is None else f"{r['steps_s'] / one:.2f}"
        turns = "/".join(str(t) for t in r["turns"])
        cpu = "/".join(f"{c:.2f}" for c in r["cpu"])
        print(f"  {store:<12}{r['n']:>8}{r['steps']:>8}{r['wall']:>8.2f}{r['steps_s']:>9.0f}"
              f"{rel:>6}  {turns:<20}{cpu:<24}{r['server']:>9.2f}")  # fmt: skip
    for r in runs[1:]:
        total = sum(r["cpu"]) + r["server"]
        busy = total / (r["wall"] * cores)
        print(f"  verdict {r['n']} worker(s): {r['steps_s'] / base:.2f}x the SQLite room's "
              f"steps/s; the machine's {cores} cores {busy:.0%} busy (workers "
              f"{sum(r['cpu']) / r['steps'] * 1e6:.0f} us CPU a step, the server "
              f"{r['server'] / r['steps'] * 1e6:.0f})")  # fmt: skip
    print()


def print_takeover(kills: list[dict[str, float]], args: argparse.Namespace) -> None:
    lease = args.lease
    print(
        f"takeover: {args.hold} threads in flight on the killed worker, lease {lease:g} s "
        f"(heartbeat every {lease / 3:.2f} s, claims every {min(1.0, lease / 3):.2f} s)"
    )
    head = (f"  {'kill':<6}{'kill->expiry s':>16}{'kill->all leased s':>20}"
            f"{'expiry->leased s':>18}{'kill->all done s':>18}")  # fmt: skip
    print(head)
    print("  " + "-" * (len(head) - 2))
    for i, k in enumerate(kills):
        print(f"  {i + 1:<6}{k['expiry']:>16.2f}{k['leased']:>20.2f}"
              f"{k['leased'] - k['expiry']:>18.2f}{k['done']:>18.2f}")  # fmt: skip
    worst = max(kills, key=lambda k: k["leased"])
    print(f"  verdict: threads leased again at most {worst['leased'] / lease:.2f} leases after "
          f"the kill, {max(k['leased'] - k['expiry'] for k in kills):.2f} s after their "
          f"expiry (the floor); all turns done {max(k['done'] for k in kills) / lease:.2f} "
          "leases after the kill")  # fmt: skip
    print()


def print_decisions(lat: dict[str, list[tuple[float, str]]], args: argparse.Namespace) -> None:
    print(
        f"decision latency: decide returned -> the call's row leaves 'suspended' "
        f"({args.samples} samples a path)"
    )
    head = f"  {'decided through':<40}{'p50 ms':>8}{'p95 ms':>8}{'max ms':>8}  resumed by"
    print(head)
    print("  " + "-" * (len(head) - 2))
    what = {SQLITE: "the SQLite room (one runtime)",
            "A": "worker A (ran the turn; no lease held)", "B": "worker B (another worker)"}  # fmt: skip
    for path, samples in lat.items():
        secs = [s for s, _ in samples]
        by: dict[str, int] = {}
        for _, w in samples:
            by[w] = by.get(w, 0) + 1
        who = ", ".join(f"{w} {n}" for w, n in sorted(by.items())) if path != SQLITE else "-"
        print(f"  {what[path]:<40}{ms(pct(secs, 0.5)):>8}{ms(pct(secs, 0.95)):>8}"
              f"{ms(max(secs)):>8}  {who}")  # fmt: skip
    p50: Callable[[str], float] = lambda p: pct([s for s, _ in lat[p]], 0.5)  # noqa: E731
    print(
        f"  verdict: through another worker p50 {p50('B') / p50('A'):.2f}x through the one "
        f"that ran the turn, {p50('B') / p50(SQLITE):.1f}x the SQLite room's"
    )
    print()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--threads", type=int, default=64)
    parser.add_argument("--turns", type=int, default=8, help="turns per thread")
    parser.add_argument("--rounds", type=int, default=2, help="tool rounds per turn")
    parser.add_argument("--lease", type=float, default=2.0, help="lease_seconds")
    parser.add_argument("--kills", type=int, default=3, help="takeovers timed")
    parser.add_argument("--hold", type=int, default=8, help="threads in flight at a kill")
    parser.add_argument("--samples", type=int, default=40, help="decisions per path")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.threads, args.turns, args.lease = "1,2", 16, 1, 1.0
        args.kills, args.hold, args.samples = 1, 4, 5
    anyio.run(main, args)
