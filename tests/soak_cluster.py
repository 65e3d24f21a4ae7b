"""The crash soak against a cluster: N worker processes (tests/cluster_worker.py) on one
PostgreSQL database, kept busy through their APIs, one killed with SIGKILL at random and
restarted under its name, many times.

    .venv/bin/python -m tests.soak_cluster --workers 3 --kills 100 [--url URL] [--seed N]

Without --url a throwaway PostgreSQL server is started (tests/pg.py; the server binaries
must be installed). Clients submit turns on several threads through random workers and
decide pending calls through a worker other than the one that listed them (approve, or
cancel one in five; a call a kill left with its outcome unknown is marked failed). After
every kill what must hold at any moment is checked (tests/test_cluster_processes.py's
`Cluster.check`: no acknowledged request, done turn or decision lost, no call run twice but
an idempotent one a kill left running); every `--settle-every` kills the load stops, every
pending call is decided, every turn must end, and the settled checks run (every call ended,
a succeeded call ran, no turn ended in error). Failures are counted, never stopped at; the
exit status is 0 only when there were none.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.api.client import ApiError
from engine.domain.decisions import Decision, PendingCall
from engine.lifecycle.call import REVIEW_REASON
from tests.test_cluster_processes import (
    LEASE,
    Cluster,
    chatter,
    check_settled,
    quiet_cancelled_connects,
    settle,
)

THREADS = 8


@dataclass
class Tally:
    kills: int = 0
    busy_kills: int = 0  # a turn of the killed worker was running, or a call open
    settlings: int = 0
    failures: dict[str, str] = field(default_factory=dict)  # each counted once, by what

    def fail(self, what: str, say) -> None:  # noqa: ANN001
        key = what.split(" (")[0]  # without where: one failure seen again is not counted
        if key not in self.failures:
            self.failures[key] = what
            say(f"soak: FAILURE {what}")

    def summary(self, cl: Cluster) -> str:
        runs = Counter(c for c, _ in cl.executions())
        return (f"kills {self.kills} ({self.busy_kills} with work open), settlings "
                f"{self.settlings}; acknowledged: {len(cl.submitted)} requests, "
                f"{len(cl.done)} done turns, {len(cl.decided)} decisions; {sum(runs.values())} "
                f"tool runs of {len(runs)} calls; failures {len(self.failures)}")  # fmt: skip


def decision(p: PendingCall, rng: random.Random) -> Decision:
    if p.reason == REVIEW_REASON:
        return Decision.fail(p.call_id, "lost with its worker", decided_by="soak")
    if rng.random() < 0.2:
        return Decision.cancel(p.call_id, "the soak says no", decided_by="soak")
    return Decision.approve(p.call_id, seen=p.args, decided_by="soak")


async def decider(cl: Cluster, rng: random.Random) -> None:
    while True:
        await anyio.sleep(rng.uniform(0.01, 0.1))  # load: the decider's pace, random
        try:
            lister = cl.any(rng)
            for p in await lister.client.pending():
                await cl.decide(cl.any(rng, but=lister.name), decision(p, rng))
        except ApiError:
            pass


def open_work(cl: Cluster, worker: str) -> bool:
    """Whether the worker ran a turn or had a call open (the runs it made, as leased)."""
    rows = cl.rows(
        "SELECT count(*) FROM thread_leases l JOIN turns t ON t.thread_id = l.thread_id"
        " WHERE l.worker_id = %s AND l.expires_at > extract(epoch FROM now())"
        " AND t.status = 'running'", worker,
    )  # fmt: skip
    return bool(rows[0][0])


async def soak(url: str, folder: Path, workers: int, kills: int, seed: int,
               settle_every: int, say) -> Tally:  # noqa: ANN001  # fmt: skip
    quiet_cancelled_connects()
    rng, tally = random.Random(seed), Tally()
    cl = Cluster(folder, url)
    names = [f"w{i}" for i in range(workers)]
    cl.start(*names)
    say(f"soak: {workers} workers, {kills} kills, seed {seed}, in {folder}")
    try:
        while tally.kills < kills:
            async with anyio.create_task_group() as tg:
                tg.start_soon(decider, cl, random.Random(rng.random()))
                for k in range(THREADS):
                    tg.start_soon(chatter, cl, random.Random(rng.random()), f"s{k}", 10**6)
                for _ in range(min(settle_every, kills - tally.kills)):
                    await anyio.sleep(rng.uniform(0.2, 2 * LEASE))  # load: the next kill's moment
                    for name, w in sorted(cl.workers.items()):  # one that died by itself
                        if w.proc.poll() is not None:
                            tail = cl.stderr(name).strip().splitlines()[-2:]
                            tally.fail(f"{name} exited by itself: {tail}", say)
                            cl.workers.pop(name)
                            await cl._closed(w)
                            cl.start(name)
                    victim = rng.choice(sorted(cl.workers))
                    busy = open_work(cl, victim)
                    await cl.kill(victim)
                    tally.kills += 1
                    tally.busy_kills += busy
                    where = f"(kill {tally.kills} of {victim}, seed {seed})"
                    try:
                        cl.check(where)
                    except AssertionError as exc:
                        tally.fail(str(exc)[:500], say)
                    await anyio.sleep(rng.uniform(0.0, LEASE))  # load: how long it stays dead
                    cl.start(victim)
                tg.cancel_scope.cancel()
            tally.settlings += 1
            where = f"(settling after kill {tally.kills}, seed {seed})"
            try:
                await settle(cl, rng)
                check_settled(cl, where)
            except (AssertionError, BaseException) as exc:  # the settling's NeverHappened, too
                if isinstance(exc, KeyboardInterrupt | anyio.get_cancelled_exc_class()):
                    raise
                tally.fail(f"{str(exc)[:500]} {where}", say)
            say(f"soak: {tally.summary(cl)}")
    finally:
        try:
            await cl.close()
        except AssertionError as exc:  # a traceback in a worker's stderr
            tally.fail(f"a worker printed a traceback: {str(exc)[-300:]}", say)
    return tally


@contextlib.contextmanager
def database(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from tests.pg import cluster

    with cluster() as server:
        yield server.database()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.soak_cluster",
                                description=__doc__.split("\n")[0])  # fmt: skip
    p.add_argument("--workers", type=int, default=3, help="worker processes (default 3)")
    p.add_argument("--kills", type=int, default=25, help="how many SIGKILLs (default 25)")
    p.add_argument("--url", help="an empty PostgreSQL database (default: a throwaway server)")
    p.add_argument("--seed", type=int, help="fix the random choices (not the timing)")
    p.add_argument("--settle-every", type=int, default=10, help="kills between settlings")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="agentdeck-soak-cluster-"))
    with database(args.url) as url:
        tally = anyio.run(soak, url, folder, max(2, args.workers), args.kills, seed,
                          max(1, args.settle_every), lambda t: print(t, flush=True))  # fmt: skip
    if tally.failures:  # the workers' stderr and the executions log, for inspection
        print(f"soak: kept {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    for failure in list(tally.failures.values())[:10]:
        print(f"  {failure}")
    print(f"soak: {time.monotonic() - started:.0f} s")
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
