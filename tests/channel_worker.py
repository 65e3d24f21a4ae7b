"""The process the channel crash test kills: a room whose channels run until SIGKILL.

    python -m tests.channel_worker ROOM          (one worker; stdout: `ready <address>`)
    python -m tests.channel_worker --zygote      (forks workers on request, see `zygote`)

It opens a Runtime on ROOM (kind "run", the offline model, the built-in tools) as
`agentdeck run` does, starts its loops (the poll loop on ROOM/channels.toml, the hook
listener of ROOM/hooks.toml, the bus projector, the delivery worker), prints
`ready <hook address>` and serves until it is killed, or until SIGTERM (then it stops as a
clean run does). The stand-ins it polls and delivers to run in the test's own
process (tests/test_channel_crash.py), so they outlive each kill.

AGENTDECK_CHANNEL_KILL=POINT:N makes the worker SIGKILL itself at the N-th passing of
POINT, each a step of a message's way through the room, without a hook in the engine:
- `admitted`: a channel message's request (and its key) is durable, before the poll
  offset moves past it or the hook answers its sender (wraps `Runtime.offer`);
- `answered`: the model's answer committed (assistant_turn_committed), before the turn's
  final checkpoint (an event bus subscriber: the commit's events reach it after COMMIT);
- `done`: a turn's final checkpoint (its outbox row) committed, before the bus has it
  (an event bus subscriber, called before the projector's pass runs);
- `sending`: the bus holds the turn's end, before its answer leaves (wraps the channel
  set's `deliver`, which the delivery worker calls after the projector's catch-up);
- `sent`: the channel took the answer, before the outbox row is marked sent.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.domain.events import Event, MessageAppended, TurnChanged
from engine.loops.start import start_loops
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.tools.builtin import builtin_tools
from tests.wait import until

KILL_ENV = "AGENTDECK_CHANNEL_KILL"
KILL_POINTS = ("admitted", "answered", "done", "sending", "sent")


class KillPlan:
    """SIGKILL this process at the N-th passing of one point (none without the env var)."""

    def __init__(self, spec: str) -> None:
        point, _, n = spec.partition(":")
        self.point = point if point in KILL_POINTS else None
        self.left = int(n or "1")

    def at(self, point: str) -> None:
        if point == self.point:
            self.left -= 1
            if self.left <= 0:
                os.kill(os.getpid(), signal.SIGKILL)


def arm(rt: Runtime, plan: KillPlan) -> None:
    """Wrap the runtime's and the channel set's entry points with the plan's kill points
    (instance attributes: the loops look them up when they call)."""
    offer = rt.offer

    async def offer_then(*args: Any, **kw: Any) -> Any:
        found = await offer(*args, **kw)
        plan.at("admitted")
        return found

    rt.offer = offer_then  # type: ignore[method-assign]

    def on_event(event: Event) -> None:
        if isinstance(event, MessageAppended) and event.role == "assistant":
            plan.at("answered")  # the offline model calls no tool on "hello N"
        elif isinstance(event, TurnChanged) and event.status == "done":
            plan.at("done")

    rt.subscribe(on_event)  # before the channels' tasks run: called before the projector
    deliver: Callable[..., Awaitable[None]] = rt.channels.deliver

    async def deliver_between(*args: Any) -> None:
        plan.at("sending")
        await deliver(*args)
        plan.at("sent")

    rt.channels.deliver = deliver_between


async def main(room: str, out: Callable[[str], None], once: bool = False) -> None:
    plan = KillPlan(os.environ.get(KILL_ENV, ""))
    async with Runtime.open(
        room, kind="run", provider=OfflineModel(delay=0), tools=builtin_tools()
    ) as rt:  # fmt: skip
        start_loops(rt)  # its tasks run at the next await: arming now comes first
        arm(rt, plan)
        await until(lambda: rt.channels.hook_address, "the hook listener serves", every=0.005)
        # The SIGTERM handler is in place before `ready` is said: a test that finds nothing
        # left to do may stop the worker as soon as it reads the line.
        with anyio.open_signal_receiver(signal.SIGTERM) as stops:  # a clean stop
            out(f"ready {rt.channels.hook_address}")
            if once:
                return
            async for _ in stops:
                return


def zygote() -> None:
    """Fork a worker per request, so a run costs no interpreter start or imports (about
    0.8 s each, most of a short run): the crash test kills hundreds of them.

    stdin, a line per worker: `{"room": ..., "env": {...}, "stderr": path}`; stdout:
    `pid <pid>` as it forks, `ready <pid> <address>` from the worker, `exit <pid> <status>`
    (the wait status's signal as a negative number, as subprocess says it) once reaped.
    The worker is the same process `main` runs, with a fresh seed for the runtime's ids;
    SIGTERM stops it cleanly, SIGKILL is the crash. stdin's end: the zygote exits.
    """

    def say(line: str) -> None:  # one write: the lines of several processes never mix
        os.write(1, (line + "\n").encode())

    warm_up()

    children: set[int] = set()
    buffered = b""
    while True:
        ready, _, _ = select.select([0], [], [], 0.02)
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
                say(f"exit {pid} {code}")
        if not ready:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            return
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            order = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(order, say)
            children.add(pid)
            say(f"pid {pid}")


def warm_up() -> None:
    """Open and close a scratch room once, so the zygote holds what a first open loads
    lazily (the loops, the API, uvicorn: 0.3 s of a run otherwise). Its threads are all
    gone after (checked): forking with one running would copy its locks mid-use."""
    with tempfile.TemporaryDirectory() as scratch:
        room = Path(scratch) / "room"
        room.mkdir()
        (room / "hooks.toml").write_text(
            'listen = "127.0.0.1:0"\n[warm]\nkind = "webhook"\nsecret_env = "WARM_SECRET"\n'
            'text = "text"\nthread = "thread"\ndeliver_url = "http://127.0.0.1:9/hook"\n'
        )
        os.environ["WARM_SECRET"] = "warm-up-secret-0123456789"
        anyio.run(main, str(room), lambda text: None, True)
        del os.environ["WARM_SECRET"]
    if threading.active_count() != 1:
        sys.exit(f"the warm-up left threads: {threading.enumerate()}")


def _child(order: dict[str, Any], say: Callable[[str], None]) -> None:
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        err = os.open(order["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(err, 2)
        os.environ.update(order["env"])
        import engine.runtime.runtime

        engine.runtime.runtime._RANDOM.seed()  # ids: not the zygote's sequence again in every child
        pid = os.getpid()
        anyio.run(main, order["room"], lambda text: say(text.replace("ready", f"ready {pid}", 1)))
        code = 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:] == ["--zygote"]:
        zygote()
    elif len(sys.argv) == 2:
        anyio.run(main, sys.argv[1], lambda text: print(text, flush=True))
    else:
        sys.exit("usage: python -m tests.channel_worker ROOM | --zygote")
