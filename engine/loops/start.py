"""Starting a runtime's loops: pulse, poll and hook, with the bus and outbound delivery.

Only the process that owns a room and serves it (`agentdeck run`/`start`, the console
hosting it) starts them; a one-off runtime (`agentdeck invoke`, `decide` on a free room)
does not. Loops only create turn requests; the scheduler decides when they run.
"""

from __future__ import annotations

from engine.loops.channels import ChannelSet, run_channels
from engine.loops.pulse import PulseLoop
from engine.loops.pulse_files import Limits
from engine.runtime import Runtime


def start_loops(rt: Runtime) -> None:
    """Start the runtime loops in `rt`'s task group; `rt.channels` then holds the room's
    channels and their states (ChannelConfigError for a malformed channels file)."""
    pc = rt.config.pulse
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
    rt.supervisor.spawn(pulse.run)
    rt.channels = ChannelSet.read(rt.room.path)
    rt.supervisor.spawn(run_channels, rt, rt.channels)  # and the bus, and delivery
