"""The room's channels at run time: the hook and poll loops, the bus, outbound delivery.

`ChannelSet.load` reads channels.toml and hooks.toml when the runtime opens (a channel
that cannot start stops the start, before anything is written); `run_channels` then runs,
in the runtime's task group:
- the projector, which copies the room's public events to the shared bus (truth first,
  the bus second), poked by every commit;
- the delivery worker, which sends the answers the turns' final checkpoints owe their
  channels, after the bus holds them (delivery last);
- one poll task per channel of channels.toml, and the hook listener for hooks.toml.
Each channel's state (up, failing, last poll or delivery, errors) is kept here for
`agentdeck channels`, the API and the console.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from engine.api.client import ServerError
from engine.channels import SlackChannel, TelegramChannel, WebhookChannel, load_channels
from engine.channels.base import DeliveryError, HookChannel, PollChannel
from engine.channels.config import hook_listener
from engine.delivery import DeliveryWorker, run_delivery
from engine.loops.hook import serve_hooks
from engine.loops.inbound import ChannelState
from engine.loops.poll import poll_channel
from engine.projector import Projector, bus_path
from engine.runtime import Runtime
from engine.store.bus import Bus

log = logging.getLogger("agentdeck")
AnyChannel = TelegramChannel | SlackChannel | WebhookChannel


@dataclass
class ChannelSet:
    """The channels of a room, their states, and what runs them."""

    channels: dict[str, AnyChannel] = field(default_factory=dict)
    states: dict[str, ChannelState] = field(default_factory=dict)
    listen: str = ""
    allow_remote: str | None = None
    hook_address: str | None = None  # where the hook listener is bound, once it is
    worker: DeliveryWorker | None = None
    projector: Projector | None = None
    clock: Callable[[], float] = time.time

    @classmethod
    def load(cls, room_dir: Path, env: Mapping[str, str] | None = None) -> ChannelSet:
        """The room's channels (ChannelConfigError, one line, when one cannot start)."""
        found = load_channels(room_dir, os.environ if env is None else env)
        listen, allow = hook_listener(room_dir)
        states = {ch.name: ChannelState(ch.name, ch.kind, _loop_of(ch), ch.group) for ch in found}
        return cls({ch.name: ch for ch in found}, states, listen, allow)

    @property
    def delivering(self) -> frozenset[str]:
        """The channels whose turns' answers go back out."""
        return frozenset(self.channels)

    def hooks(self) -> dict[str, tuple[HookChannel, ChannelState]]:
        return {n: (c, self.states[n]) for n, c in self.channels.items()
                if isinstance(c, HookChannel)}  # fmt: skip

    def pollers(self) -> list[tuple[PollChannel, ChannelState]]:
        return [(c, self.states[n]) for n, c in self.channels.items()
                if isinstance(c, PollChannel)]  # fmt: skip

    async def deliver(self, channel: str, reply: dict[str, Any], text: str, key: str) -> None:
        """The delivery worker's `deliver`: one answer through its channel."""
        found = self.channels.get(channel)
        if found is None:
            raise DeliveryError(f"channel {channel!r} is not configured any more",
                                permanent=True)  # fmt: skip
        state = self.states[channel]
        try:
            await found.deliver(reply, text, key)
        except Exception as exc:
            state.fail(f"delivery: {exc}")
            raise
        state.ok(self.clock())

    def snapshot(self) -> list[dict[str, object]]:
        """Every channel's state, for the API."""
        return [s.as_dict() for s in self.states.values()]

    async def aclose(self) -> None:
        for channel in self.channels.values():
            with contextlib.suppress(Exception):
                await channel.aclose()


def _loop_of(channel: AnyChannel) -> str:
    return "poll" if isinstance(channel, TelegramChannel) else "hook"


async def run_channels(rt: Runtime, cs: ChannelSet) -> None:
    """The projector, the delivery worker, the poll tasks and the hook listener, until
    cancelled."""
    cs.clock = rt.clock
    bus = await Bus.open(bus_path(rt.room.path, rt.config.bus))
    projector = Projector(rt.store, bus, rt.room.path, clock=rt.clock)
    cs.projector = projector
    unsubscribe = rt.subscribe(lambda event: projector.poke())
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(projector.run, rt.config.bus.every)
            worker = await tg.start(_delivery, rt, cs, projector)
            cs.worker = worker
            for channel, state in cs.pollers():
                tg.start_soon(poll_channel, rt, channel, state)
            if hooks := cs.hooks():
                tg.start_soon(_hooks, rt, cs, hooks)
    finally:
        unsubscribe()
        cs.worker = None
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(Exception):
                await projector.stopped()
            await bus.close()
            await cs.aclose()


async def _delivery(
    rt: Runtime,
    cs: ChannelSet,
    projector: Projector,
    *,
    task_status: anyio.abc.TaskStatus[DeliveryWorker] = anyio.TASK_STATUS_IGNORED,
) -> None:
    async with anyio.create_task_group() as tg:
        worker = await tg.start(lambda **kw: run_delivery(
            rt.store, rt.bus.commit, cs.deliver, clock=rt.clock, projector=projector,
            config=rt.config.delivery, **kw))  # fmt: skip
        unsubscribe = rt.subscribe(worker.watch)
        task_status.started(worker)
        try:
            await anyio.sleep_forever()
        finally:
            unsubscribe()


async def _hooks(
    rt: Runtime, cs: ChannelSet, hooks: dict[str, tuple[HookChannel, ChannelState]]
) -> None:
    try:
        async with serve_hooks(rt, hooks, cs.listen, cs.allow_remote) as address:
            cs.hook_address = address
            for _, state in hooks.values():
                state.ok(rt.clock())
            rt.log.info("hooks served on %s: %s", address, ", ".join(sorted(hooks)))
            await anyio.sleep_forever()
    except (ServerError, OSError) as exc:  # the runtime goes on; the hooks say why not
        for _, state in hooks.values():
            state.fail(f"not served: {exc}")
        rt.notice("error", f"The hooks are not served: {exc}")
    finally:
        cs.hook_address = None
