"""The crash soak's clients: what keeps `agentdeck run` busy until the kill, and the log of
what it acknowledged.

Everything goes through the room's API as an operator's programs would: chat submitters
(messages the offline model turns into real `shell` calls, `calc` calls or plain answers,
some planned by `plan_execute`), a decider that approves and cancels pending calls, and
`agentdeck decide` run as a separate process now and then, so the CLI client and the
server loop are in the path. A dropper writes bulk task files into tasks/ for the pulse
loop. Every shell command appends its own marker to ROOM/workspace/shell.log (the only
folder the shell's sandbox lets it write), so the checks can
count how often each call really ran.

Whatever the runtime answered as durable is written to `Acks` (one JSON line, fsynced)
before anything else happens, so a kill that follows cannot erase the client's memory of
it: the checks compare that log with execution.db after every kill.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from engine.api.client import ApiError, Conflict, OwnerGone, Refused
from engine.api.models import SubmitBody
from engine.api.remote import RemoteClient
from engine.domain.decisions import Decision, PendingCall
from engine.lifecycle.call import REVIEW_REASON
from tests.wait import NeverHappened, until

ROOT = Path(__file__).resolve().parent.parent
CHAT_THREADS = 4
MODEL_KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def child_env() -> dict[str, str]:
    """The soak's processes use the offline model, whatever keys this shell has."""
    return {k: v for k, v in os.environ.items() if k not in MODEL_KEYS}


class Acks:
    """What clients were told is durable, one JSON line each, fsynced before it counts."""

    def __init__(self, path: Path, seen: Counter[str]) -> None:
        self.path, self.seen = path, seen
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(self, kind: str, **fields: Any) -> None:
        os.write(self._fd, (json.dumps({"kind": kind, **fields}) + "\n").encode())
        os.fsync(self._fd)
        self.seen[kind] += 1

    def read(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def close(self) -> None:
        os.close(self._fd)


@dataclass
class _Decide:
    proc: subprocess.Popen[bytes]
    call_id: str
    action: str
    out: Path


class CliDecides:
    """`agentdeck decide` processes: started by the workload, outliving a kill.

    A command that finds the room free (its owner was just killed) opens the room itself
    and carries the decision through as a one-off, so the soak waits for every one to end
    before it starts the next runtime. One that printed its outcome was answered: its
    decision is acknowledged.
    """

    def __init__(self, room: Path, folder: Path, acks: Acks, errors: Counter[str]) -> None:
        self.room, self.folder, self.acks, self.errors = room, folder, acks, errors
        self.running: list[_Decide] = []
        self._n = itertools.count()

    def idle(self) -> bool:
        return not self.running

    def start(self, call_id: str, action: str) -> None:
        out = self.folder / f"decide-{next(self._n)}.out"
        argv = [sys.executable, "-m", "engine.cli", "--room", str(self.room), "decide", call_id,
                action, "--json"] + (["--reason", "the soak says no"] if action == "cancel" else [])  # fmt: skip
        with out.open("wb") as stdout:
            proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=ROOT, env=child_env())  # fmt: skip
        self.acks.seen["agentdeck decide"] += 1
        stored = "resume" if action == "approve" else action  # as execution.db says it
        self.running.append(_Decide(proc, call_id, stored, out))

    async def collect(self, wait: float) -> None:
        """Take in the commands that ended; wait up to `wait` s for all to (then kill)."""

        def still_running() -> list[str]:
            self.reap()
            return [d.out.name for d in self.running]

        with contextlib.suppress(NeverHappened):  # what is left is killed below
            await until(still_running, "every agentdeck decide ended", ok=lambda left: not left,
                        within=wait)  # fmt: skip
        for d in self.running:  # hung: not an answer; killed so the room is free
            d.proc.kill()
            d.proc.wait()
            self.errors[f"agentdeck decide hung: {d.out.name}"] += 1
        self.running = []

    def reap(self) -> None:
        for d in list(self.running):
            if (rc := d.proc.poll()) is None:
                continue
            self.running.remove(d)
            text = d.out.read_text(errors="replace")
            try:
                answer = json.loads(text.splitlines()[0]) if text.strip() else None
            except ValueError:
                answer = None
            if isinstance(answer, dict) and "turn_id" in answer:  # the outcome: it was answered
                self.acks.record("cli-decision", call=d.call_id, action=d.action, exit=rc)
                d.out.unlink()
            elif rc == 4:  # its owner went away mid-command: nothing was acknowledged
                self.errors["agentdeck decide: owner gone (exit 4)"] += 1
                d.out.unlink()
            else:
                self.errors[f"agentdeck decide exit {rc}: {text.strip()[-200:]}"] += 1


class Workload:
    """One runtime's worth of clients, until cancelled (the kill)."""

    def __init__(self, room: Path, rng: random.Random, acks: Acks, cli: CliDecides, tag: str,
                 tasks: list[str], errors: Counter[str]) -> None:  # fmt: skip
        self.room, self.rng, self.acks, self.cli, self.tag = room, rng, acks, cli, tag
        self.tasks, self.errors = tasks, errors
        self._n = itertools.count()

    async def run(self, client: RemoteClient) -> None:
        async with anyio.create_task_group() as tg:
            for k in range(CHAT_THREADS):
                tg.start_soon(self._chat, client, f"soak:{k}")
            tg.start_soon(self._decide, client)
            tg.start_soon(self._drop_tasks, self.rng.randint(0, 60))

    # -- what the messages ask for ----------------------------------------------------------

    def marker(self) -> str:
        return f"mk_{self.tag}_{next(self._n)}"

    def command(self) -> str:
        """A shell command that leaves its marker in shell.log once per run."""
        m = self.marker()
        return self.rng.choice([
            f"echo {m} >> shell.log",
            f"echo {m} >> shell.log; sleep 0.05",  # a kill may land after it ran
            f"sleep 0.03; echo {m} >> shell.log",  # ... or before, in a survivor
        ])  # fmt: skip

    def chat_text(self) -> str:
        roll, a, b = self.rng.random(), self.rng.randint(1, 99), self.rng.randint(1, 99)
        if roll < 0.6:
            commands = [self.command() for _ in range(1 + (self.rng.random() < 0.25))]
            text = "run " + " and ".join(f"`{c}`" for c in commands)
            return text + (f" and calc {a}*{b}" if self.rng.random() < 0.3 else "")
        return f"calc {a}+{b}" if roll < 0.8 else f"hello {a}"

    def task_text(self, name: str) -> str:
        roll = self.rng.random()
        if roll < 0.15:
            return f"Task {name}: run `{self.command()}`\n"
        return f"Task {name}: calc {self.rng.randint(1, 999)}-1\n" if roll < 0.55 else (
            f"Task {name}: nothing to do.\n")  # fmt: skip

    # -- the clients ------------------------------------------------------------------------

    async def _chat(self, client: RemoteClient, thread: str) -> None:
        while True:
            own = f"soak:x{next(self._n)}" if self.rng.random() < 0.15 else thread
            strategy = "plan_execute" if self.rng.random() < 0.1 else None
            body = SubmitBody(origin="invoke", sender="soak", thread_id=own, text=self.chat_text(),
                              strategy=strategy, refuse_if_waiting=True)  # fmt: skip
            try:
                sub = await client.submit(body)
                self.acks.record("submit", request=sub.request_id, turn=sub.turn_id,
                                 status=sub.status)  # fmt: skip
                if self.rng.random() < 0.7:
                    out = await client.outcome(sub.turn_id, wait=5.0)
                    if out.status == "done":
                        self.acks.record("done", turn=out.turn_id, reason=out.reason)
            except ApiError as exc:
                self._refused(exc)
                await anyio.sleep(0.05)  # load: a refused client's pace
            await anyio.sleep(self.rng.uniform(0.0, 0.03))  # load: the chat's pace, random

    async def _decide(self, client: RemoteClient) -> None:
        while True:
            await anyio.sleep(self.rng.uniform(0.005, 0.06))  # load: the decider's pace, random
            try:
                for p in await client.pending():
                    roll = self.rng.random()
                    if p.reason == REVIEW_REASON:  # a kill left it running: it failed
                        await decide(client, self.acks, reviewed(p))
                    elif roll < 0.1 and self.cli.idle():
                        self.cli.start(
                            p.call_id, "approve" if self.rng.random() < 0.7 else "cancel"
                        )
                    elif roll < 0.6:
                        yes = Decision.approve(p.call_id, seen=p.args, decided_by="soak")
                        await decide(client, self.acks, yes)
                    elif roll < 0.8:
                        no = Decision.cancel(p.call_id, "the soak says no", decided_by="soak")
                        await decide(client, self.acks, no)
            except ApiError as exc:
                self._refused(exc)
            self.cli.reap()

    async def _drop_tasks(self, budget: int) -> None:
        """Bulk task files, written whole (a temporary name, then a rename)."""
        folder = self.room / "tasks"
        folder.mkdir(exist_ok=True)
        while budget > 0:
            await anyio.sleep(self.rng.uniform(0.02, 0.2))  # load: the dropper's pace, random
            for _ in range(min(budget, self.rng.randint(1, 20))):
                budget -= 1
                name = f"{self.tag}_{next(self._n)}"
                tmp = folder / f".{name}.tmp"
                tmp.write_text(self.task_text(name))
                os.replace(tmp, folder / f"{name}.md")
                self.tasks.append(name)
                self.acks.record("task", name=name)

    def _refused(self, exc: ApiError) -> None:
        """Refusals the workload provokes are expected; anything else is noted."""
        if not isinstance(exc, Conflict | Refused | OwnerGone):
            self.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1


def reviewed(p: PendingCall) -> Decision:
    """What the soak decides of a call a kill left with its outcome unknown: it failed."""
    return Decision.fail(p.call_id, "the soak lost it in a kill", decided_by="soak")


async def decide(client: RemoteClient, acks: Acks, decision: Decision) -> None:
    """Send a decision; once answered it is durable, so it is acknowledged."""
    decided = await client.decide(decision)
    acks.record("decision", id=decision.id, call=decision.call_id, action=decision.action,
                status=decided.status)  # fmt: skip
