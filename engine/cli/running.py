"""`agentdeck run`: the runtime in the foreground (systemd, containers; `start` runs it
detached). It serves the room's API and runs the runtime loops until SIGTERM, SIGHUP or
Ctrl-C: turns stop where they can resume, the API's socket is removed, the room is
released. It says one line per turn that starts, ends or waits, and never blocks on its
output."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from typing import Any

import anyio

from engine.cli.common import EXIT_OK
from engine.cli.outlet import Outlet, OutletHandler
from engine.cli.pause_text import flat
from engine.domain.events import CallChanged, DeliveryChanged, Event, TurnChanged, TurnStarted
from engine.room import Room


def log_line(event: Event) -> str | None:
    """One line per thing an operator watching `agentdeck run` wants to see, as text (a
    message's or a thread's control characters shown as spaces: it goes to a terminal)."""
    line = _line(event)
    return None if line is None else flat(line, 2000)


def _line(event: Event) -> str | None:
    stamp = time.strftime("%H:%M:%S", time.localtime(event.at))
    match event:
        case TurnStarted():
            text = " ".join(event.text.split())[:70]
            return f"{stamp} {event.thread_id} {event.turn_id} started ({event.origin}): {text}"
        case TurnChanged(status="done" | "waiting"):
            detail = f" ({event.detail})" if event.detail else ""
            return (
                f"{stamp} {event.thread_id} {event.turn_id} {event.status}/{event.reason}{detail}"
            )
        case CallChanged(status="suspended"):
            return (f"{stamp} {event.thread_id} {event.turn_id} {event.call_id} {event.tool} "
                    f"waits for a decision: agentdeck decide {event.call_id} approve|cancel")  # fmt: skip
        case DeliveryChanged(state="sent" | "dead" | "dropped"):
            error = f": {event.error}" if event.error and event.state == "dead" else ""
            return (f"{stamp} {event.thread_id} {event.turn_id} answer {event.state} "
                    f"({event.channel}, try {event.tries}){error}")  # fmt: skip
    return None


async def _say_channels(rt: Any, out: Outlet) -> None:
    """Once the hook listener is bound (or gave up), say where the channels are."""
    cs = rt.channels
    if cs is None or not cs.configs:
        return
    with anyio.move_on_after(5):
        await cs.hooks_settled.wait()
    polled = [n for n, s in cs.states.items() if s.loop == "poll"]
    hooked = [n for n, s in cs.states.items() if s.loop == "hook"]
    if polled:
        out.say(f"agentdeck run: polling {', '.join(polled)}")
    if hooked and cs.hook_address:
        out.say(f"agentdeck run: hooks on http://{cs.hook_address}/hooks/ "
                f"({', '.join(hooked)})")  # fmt: skip


async def run(room: Room, args: argparse.Namespace) -> int:
    import logging

    # notices (a bad task file, a failed submit) reach stderr; turns reach stdout; neither
    # blocks the loop when nobody reads them
    out, err = Outlet(sys.stdout), Outlet(sys.stderr)
    handler = OutletHandler(err)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s: %(message)s", "%H:%M:%S"))
    logging.getLogger().addHandler(handler)
    try:
        return await _run(room, "start" if args.detached else "run", out)
    finally:
        logging.getLogger().removeHandler(handler)
        out.close()
        err.close()


async def _run(room: Room, kind: str, out: Outlet) -> int:
    from engine.loops.server import serve_api
    from engine.loops.start import start_loops
    from engine.runtime import Runtime

    # SIGTERM (systemd, docker, kill, `agentdeck stop`) stops as Ctrl-C does: the run is
    # marked ended, and a turn still running resumes at the next start. The receiver stays
    # until the room is closed, so a second SIGTERM (`timeout` sends two) cannot kill the
    # shutdown midway.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async with Runtime.open(room, kind=kind) as rt, serve_api(rt) as serving:

            def log(event: Event) -> None:
                if (line := log_line(event)) is not None:
                    out.say(line)

            rt.subscribe(log, relayed=False)  # what this process runs (a worker's own)
            start_loops(rt)
            rt.supervisor.spawn(_say_channels, rt, out)
            tcp = f" and {serving.listen}" if serving.listen else ""
            out.say(f"agentdeck run {rt.run_id} on {room.path} "
                    f"({rt.provider.name}:{rt.provider.model}); API on {serving.socket}{tcp}; "
                    f"Ctrl-C stops")  # fmt: skip
            async for received in signals:
                out.say(f"agentdeck run: {signal.Signals(received).name}, stopping")
                break
    return EXIT_OK
