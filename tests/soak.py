"""The crash soak: SIGKILL a busy `agentdeck run` at random points, many times, and count
what a crash must never do.

    .venv/bin/python -m tests.soak --kills 1000 [--seed N] [--dir DIR]

Each round starts `agentdeck run` on the room (the real command: offline model, built-in
tools, pulse loop, API server), keeps it busy through its API (tests/soak_workload.py:
chat turns with real `shell` calls, decisions over the API and by `agentdeck decide` in
another process, bulk task files) and SIGKILLs it after a random time; one round in seven
kills it while it is still starting (recovering what the last kill left). After each kill
the room is checked as the kill left it, then again once the `agentdeck decide` commands
that outlived it have ended; the next round's start is the restart. Every few kills the
room is settled: a runtime starts, every pending call is decided, every task and turn runs
to its end, the runtime is stopped with SIGTERM, and everything is checked again
(tests/soak_checks.py). Failures are counted, never stopped at; a summary is printed every
`--report-every` kills and at the end:

    kills, kills with work open, lost acknowledged writes, double executions, integrity
    failures, tasks run twice, tasks lost, cancelled calls that ran, recovery failures

The exit status is 0 only when every failure count is 0. `--seed` fixes the random
choices (kill times, texts, decisions), not the timing. A new room is started every
`--room-every` kills, so a long soak does not grow one room without end; a room with a
failure (and `--dir`, when given) is kept for inspection.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.api.client import ApiError
from engine.api.remote import RemoteClient
from engine.domain.decisions import Decision
from engine.lifecycle.call import REVIEW_REASON
from engine.room import Room
from tests.soak_checks import Snapshot, Tally, executions, snapshot
from tests.soak_workload import (
    ROOT,
    Acks,
    CliDecides,
    Workload,
    child_env,
    decide,
    reviewed,
)
from tests.wait import PATIENCE, NeverHappened, until

CONFIG = """\
[store]
synchronous = "{sync}"

[model]
offline_delay = 0.002

[pulse]
interval = 0.05
"""
START_WAIT = PATIENCE  # seconds a runtime may take to say it serves
SETTLE_WAIT = 1.5 * PATIENCE  # seconds a settling may take before what is left open fails
STOP_WAIT = PATIENCE  # seconds a runtime may take to stop on SIGTERM
STARTUP_KILLS = 1 / 7  # the share of kills aimed at a runtime still starting


@dataclass
class Options:
    kills: int = 25
    seed: int | None = None
    dir: Path | None = None
    settle_every: int = 10
    room_every: int = 100
    report_every: int = 25


class Soak:
    """One soak: its rooms, its tally, and the rounds of start, work, kill and check."""

    def __init__(self, opts: Options, say: Callable[[str], None]) -> None:
        self.opts, self.say = opts, say
        self.seed = opts.seed if opts.seed is not None else random.randrange(2**31)
        self.rng = random.Random(self.seed)
        self.folder = opts.dir or Path(tempfile.mkdtemp(prefix="agentdeck-soak-"))
        self.tally = Tally()
        self.errors: Counter[str] = Counter()  # client-side surprises, reported, not failures
        self.rooms = 0

    # -- the rounds -------------------------------------------------------------------------

    async def run(self) -> Tally:
        self.say(f"soak: {self.opts.kills} kills, seed {self.seed}, in {self.folder}")
        _quiet_cancelled_connects()
        try:
            for n in range(self.opts.kills):
                if n % self.opts.room_every == 0:
                    self._new_room()
                await self._round(n)
                last = n + 1 == self.opts.kills
                every = (self.opts.settle_every, self.opts.room_every)
                if last or any((n + 1) % k == 0 for k in every):  # a room ends settled
                    await self._drain(f"settling after kill {n + 1}")
                if not last and (n + 1) % self.opts.report_every == 0:
                    self.say(f"soak: {self.tally.summary()}")
        finally:
            self._close_room()
        self.say(f"soak: {self.tally.summary()}")
        for line in self.tally.details():
            self.say(f"  {line}")
        for text, n in self.errors.most_common(10):
            self.say(f"  (client side, not a failure) {n} x {text}")
        if self.tally.failed() or self.opts.dir:
            self.say(f"soak: kept {self.folder}")
        else:
            shutil.rmtree(self.folder, ignore_errors=True)
        return self.tally

    def _new_room(self) -> None:
        self._close_room()
        self.rooms += 1
        self.room = self.folder / f"room-{self.rooms}"
        (self.room / "tasks").mkdir(parents=True)
        self.db = self.room / "execution.db"
        self.acks = Acks(self.folder / f"acks-{self.rooms}.jsonl", self.tally.seen)
        self.log_path = self.folder / f"runtime-{self.rooms}.log"
        self.log = self.log_path.open("ab")
        self.cli = CliDecides(self.room, self.folder, self.acks, self.errors)
        self.tasks: list[str] = []
        self.left_running: set[str] = set()  # shell calls a kill left running
        self.failed_before = self.tally.failed()
        self.runs_before = self.tally.seen["shell runs"]  # by the rooms before this one

    def _close_room(self) -> None:
        if not self.rooms or self.log.closed:
            return
        self.log.close()
        self.acks.close()
        self._ran()
        if self.tally.failed() == self.failed_before and not self.opts.dir:
            shutil.rmtree(self.room, ignore_errors=True)

    async def _round(self, n: int) -> None:
        where = f"kill {n + 1} (seed {self.seed})"
        proc, offset = self._start(where)
        client = None
        try:
            if self.rng.random() < STARTUP_KILLS:
                at = time.monotonic() + self.rng.uniform(0.0, 1.2)
                ready = await self._ready(proc, offset, max(0.0, at - time.monotonic()))
                self.tally.startup_kills += not ready
                await anyio.sleep(max(0.0, at - time.monotonic()))  # load: the kill's moment
                if proc.poll() is not None:
                    self._log_failure(where, offset, f"exited by itself ({proc.poll()})")
                os.kill(proc.pid, signal.SIGKILL)
            elif not await self._ready(proc, offset, START_WAIT):
                self._log_failure(where, offset, "did not start")
            else:
                client = RemoteClient(Room.at(self.room))
                tag = f"r{self.rooms}k{n + 1}"
                work = Workload(self.room, random.Random(self.rng.random()), self.acks, self.cli,
                                tag, self.tasks, self.errors)  # fmt: skip
                async with anyio.create_task_group() as tg:
                    tg.start_soon(work.run, client)
                    await anyio.sleep(self.rng.uniform(0.1, 1.0))  # load: the kill's moment
                    os.kill(proc.pid, signal.SIGKILL)  # before anything else runs
                    tg.cancel_scope.cancel()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if client is not None:
                await client.aclose()
        self.tally.kills += 1
        crashed = snapshot(self.db) if self.db.exists() else None
        if crashed is not None:
            self.tally.busy_kills += crashed.open_work()
            self.tally.shell_kills += crashed.shell_running()
            self.left_running |= {cid for cid, c in crashed.calls.items()
                                  if c.tool == "shell" and c.status == "running"}  # fmt: skip
            self._check(crashed, where)
        if self.cli.running:  # they may carry their decision through as one-offs
            await self.cli.collect(wait=PATIENCE)
            if self.db.exists():
                self._check(snapshot(self.db), f"{where}, once agentdeck decide ended")
        self._tracebacks(where, offset)

    async def _drain(self, where: str) -> None:
        """Decide everything, let every turn and task end, stop cleanly, check it all."""
        await self.cli.collect(wait=PATIENCE)
        proc, offset = self._start(where)
        try:
            if not await self._ready(proc, offset, START_WAIT):
                self._log_failure(where, offset, "did not start")
                return
            rng = random.Random(self.rng.random())
            async with RemoteClient(Room.at(self.room)) as client:

                def open_now() -> dict[str, list[str]]:
                    return self._left_open(snapshot(self.db, integrity=False))

                async def left_open() -> dict[str, int]:
                    """What is still open, counted; deciding what waits, if anything is."""
                    left = open_now()
                    try:
                        for p in await client.pending() if left else []:
                            decision = (reviewed(p) if p.reason == REVIEW_REASON else
                                        Decision.approve(p.call_id, seen=p.args, decided_by="soak")
                                        if rng.random() < 0.8 else
                                        Decision.cancel(p.call_id, "settling", decided_by="soak"))  # fmt: skip
                            await decide(client, self.acks, decision)
                    except ApiError as exc:
                        self.errors[f"settling: {type(exc).__name__}: {exc}"[:200]] += 1
                    return {what: len(found) for what, found in left.items()}

                try:
                    await until(left_open, "every call decided, every turn and task done",
                                ok=lambda left: not left, within=SETTLE_WAIT, every=0.05,
                                seen=open_now)  # fmt: skip
                except NeverHappened as exc:  # counted; what is left open is checked below
                    self.tally.fail("recovery failures", f"{where}: settling", str(exc)[:1000])
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(NeverHappened):  # said below
                await until(proc.poll, "the runtime stops on SIGTERM",
                            ok=lambda code: code is not None, within=STOP_WAIT)  # fmt: skip
            if proc.poll() != 0:
                self._log_failure(where, offset, f"did not stop on SIGTERM (exit {proc.poll()})")
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.tally.check_settled(snapshot(self.db), self.acks.read(), self._ran(),
                                 self.left_running, self.tasks, where)  # fmt: skip
        self._tracebacks(where, offset)
        for name in self.tasks:  # run and checked: the pulse loop need not scan them again
            (self.room / "tasks" / f"{name}.md").unlink(missing_ok=True)

    def _left_open(self, snap: Snapshot) -> dict[str, list[str]]:
        """What keeps the room from being settled, by kind (nothing: settled)."""
        done = {thread for thread, status, _ in snap.turns.values() if status == "done"}
        left = {
            "turns not done": [f"{t} {status}" for t, (_, status, _) in snap.turns.items()
                               if status != "done"],
            "requests queued": [r for r, (_, status) in snap.requests.items()
                                if status == "queued"],
            "calls open": [f"{c} {call.tool} {call.status}" for c, call in snap.calls.items()
                           if call.status in ("new", "running", "suspended", "resuming")],
            "tasks not done": [name for name in self.tasks if f"task:{name}" not in done],
        }  # fmt: skip
        return {what: found for what, found in left.items() if found}

    def _check(self, snap: Snapshot, where: str) -> None:
        self.tally.check(snap, self.acks.read(), self._ran(), where)

    def _ran(self) -> Counter[str]:
        """The room's shell.log, counted; the tally's shell runs kept current with it."""
        ran = executions(self.room)
        self.tally.seen["shell runs"] = self.runs_before + sum(ran.values())
        return ran

    # -- the runtime process ----------------------------------------------------------------

    def _start(self, where: str) -> tuple[subprocess.Popen[bytes], int]:
        self._write_config()
        self.log.write(f"\n== {where}\n".encode())
        self.log.flush()
        offset = self.log.tell()
        argv = [sys.executable, "-m", "engine.cli", "--room", str(self.room), "run"]
        proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
                                cwd=ROOT, env=child_env())  # fmt: skip
        return proc, offset

    def _write_config(self) -> None:
        """FULL or NORMAL at random: a SIGKILL must lose nothing committed with either."""
        sync = self.rng.choice(["FULL", "NORMAL"])
        (self.room / "agentdeck.toml").write_text(CONFIG.format(sync=sync))

    async def _ready(self, proc: subprocess.Popen[bytes], offset: int, wait: float) -> bool:
        """Whether the runtime said it serves within `wait` seconds."""

        def state() -> str:
            if proc.poll() is not None:
                return "exited"
            return "serving" if b"\nagentdeck run r_" in b"\n" + self._output(offset) else (
                "starting")  # fmt: skip

        try:
            said = await until(state, "the runtime says it serves", within=wait,
                               ok=lambda said: said != "starting")  # fmt: skip
        except NeverHappened:  # (a kill aimed at a runtime still starting waits so)
            return False
        return said == "serving"

    def _output(self, offset: int) -> bytes:
        with self.log_path.open("rb") as f:
            f.seek(offset)
            return f.read()

    def _log_failure(self, where: str, offset: int, what: str) -> None:
        tail = self._output(offset).decode(errors="replace").strip().splitlines()[-3:]
        self.tally.fail("recovery failures", where, f"the runtime {what}: {' | '.join(tail)}")

    def _tracebacks(self, where: str, offset: int) -> None:
        text = self._output(offset).decode(errors="replace")
        if "Traceback" in text:
            last = text[text.index("Traceback") :].strip().splitlines()
            self.tally.fail("recovery failures", f"{where}: traceback",
                            f"the runtime printed a traceback: {' | '.join(last[-3:])}")  # fmt: skip


def _quiet_cancelled_connects() -> None:
    """anyio's connect_unix leaves a socket-writable callback that sets the result of its
    future even when the connect was cancelled (the kill cancels clients mid-connect while
    the runtime's listen queue is full): asyncio then logs InvalidStateError, which is
    noise, not a finding of the soak."""
    import asyncio

    loop = asyncio.get_running_loop()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
        exc, handle_ = context.get("exception"), str(context.get("handle", ""))
        if isinstance(exc, asyncio.InvalidStateError) and "Future.set_result" in handle_:
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handle)


def run_soak(opts: Options, say: Callable[[str], None] = print) -> Tally:
    """Run a soak to the end and return its tally (also what tests call)."""
    return anyio.run(Soak(opts, say).run)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=25, help="how many SIGKILLs (default 25)")
    p.add_argument("--seed", type=int, help="fix the random choices (not the timing)")
    p.add_argument("--dir", type=Path, help="keep rooms and logs here (default: a temp dir)")
    p.add_argument("--settle-every", type=int, default=10, help="kills between settlings")
    p.add_argument("--room-every", type=int, default=100, help="kills before a new room")
    p.add_argument("--report-every", type=int, default=25, help="kills between summaries")
    args = p.parse_args(argv)
    if args.dir is not None:
        if args.dir.exists() and any(args.dir.iterdir()):
            p.error(f"--dir {args.dir} is not empty")
        args.dir.mkdir(parents=True, exist_ok=True)
    opts = Options(args.kills, args.seed, args.dir, max(1, args.settle_every),
                   max(1, args.room_every), max(1, args.report_every))  # fmt: skip
    tally = run_soak(opts, lambda text: print(text, flush=True))
    return 1 if tally.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
