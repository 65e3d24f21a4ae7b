"""Starting a runtime's loops: pulse, poll and hook, with the bus and outbound delivery.

Only the process that owns a room and serves it (`agentdeck run`/`start`, the console
hosting it) starts them; a one-off runtime (`agentdeck invoke`, `decide` on a free room)
does not, and of a cluster's workers only the one holding the `loops` lock does. Loops only
create turn requests; the scheduler decides when they run.
"""

from __future__ import annotations

import anyio

from engine.loops.channels import ChannelSet, run_channels
from engine.loops.pulse import PulseLoop
from engine.loops.pulse_files import Limits
from engine.runtime import Runtime


def start_loops(rt: Runtime) -> None:
    """Start the runtime loops in `rt`'s task group; `rt.channels` then holds the room's
    channels and their states (ChannelConfigError for a malformed channels file)."""
    pc = rt.config.pulse
    for failure in rt.room.make_loop_folders():
        rt.notice("warning", f"room {rt.room.path}: cannot make {failure}")
    pulse = PulseLoop(
        rt.room,
        submit=lambda m, **kw: rt.submit(m, strategy=m.meta.get("strategy"), **kw),
        notice=rt.notice,
        clock=rt.clock,
        interval=pc.interval,
        will_interval=pc.will_interval,
        agent=pc.agent,
        limits=Limits.of(pc),
    )
    channels = rt.channels = ChannelSet.read(rt.room.path)

    async def loops() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pulse.run)
            tg.start_soon(run_channels, rt, channels)  # and the bus, and delivery

    rt.coordinator.singleton("loops", loops)  # (of a cluster's workers, one at a time)
