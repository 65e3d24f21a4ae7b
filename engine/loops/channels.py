"""The room's channels at run time: the hook and poll loops, the bus, outbound delivery.

`ChannelSet.read` reads channels.toml and hooks.toml when the runtime opens (a malformed
file stops the start, before anything is written), so that every turn from a channel owes
its answer, whichever process runs it. `run_channels` (the runtime loops, `start_loops`)
starts each channel with its secrets (one whose variable is unset does not start, and
says so; the others do) and runs, in the runtime's task group:
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
from engine.channels import SlackChannel, TelegramChannel, WebhookChannel, channel_of
from engine.channels.base import DeliveryError, HookChannel, PollChannel
from engine.channels.config import (
    POLLED,
    ChannelConfigError,
    SlackConfig,
    TelegramConfig,
    WebhookConfig,
    hook_listener,
    read_channels,
    secret_names_of,
)
from engine.loops.inbound import ChannelState
from engine.loops.poll import poll_channel
from engine.runtime import Runtime
from engine.services.delivery import DeliveryWorker, run_delivery
from engine.services.projector import Projector, bus_path
from engine.store.bus import Bus
from engine.tools.redact import Secrets

log = logging.getLogger("agentdeck")
AnyChannel = TelegramChannel | SlackChannel | WebhookChannel
AnyConfig = TelegramConfig | SlackConfig | WebhookConfig


@dataclass
class ChannelSet:
    """The channels of a room, their states, and what runs them."""

    configs: dict[str, AnyConfig] = field(default_factory=dict)
    channels: dict[str, AnyChannel] = field(default_factory=dict)  # started (`open`)
    states: dict[str, ChannelState] = field(default_factory=dict)
    listen: str = ""
    allow_remote: str | None = None
    hook_address: str | None = None  # where the hook listener is bound, once it is
    hooks_settled: anyio.Event = field(default_factory=anyio.Event)  # bound, failed or none
    worker: DeliveryWorker | None = None
    projector: Projector | None = None
    clock: Callable[[], float] = time.time

    @classmethod
    def read(cls, room_dir: Path) -> ChannelSet:
        """The room's channels as configured, none started (ChannelConfigError, one line,
        for a malformed channels.toml or hooks.toml: it stops the start)."""
        configs = read_channels(room_dir)
        listen, allow = hook_listener(room_dir)
        states = {c.name: ChannelState(c.name, c.kind, _loop_of(c.kind), c.group) for c in configs}
        return cls(configs={c.name: c for c in configs}, states=states, listen=listen,
                   allow_remote=allow)  # fmt: skip

    def open(self, env: Mapping[str, str] | None = None) -> None:
        """Make each channel with its secrets. One whose secret is unset or empty does not
        start: its state says why, the others run, and its answers wait in the outbox."""
        env = os.environ if env is None else env
        mask = Secrets.from_env(secret_names_of(self.configs.values()), env).mask
        for name, config in self.configs.items():
            self.states[name].mask = mask
            try:
                self.channels[name] = channel_of(config, env)
            except ChannelConfigError as exc:
                self.states[name].fail(f"not started: {exc}")
                self.states[name].state = "stopped"

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
            if channel in self.configs:  # its secret is missing: a restart with it may send
                raise DeliveryError(f"channel {channel!r} is not running: "
                                    f"{self.states[channel].last_error}", permanent=False)  # fmt: skip
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


def _loop_of(kind: str) -> str:
    return "poll" if kind in POLLED else "hook"


async def run_channels(rt: Runtime, cs: ChannelSet) -> None:
    """The projector, the delivery worker, the poll tasks and the hook listener, until
    cancelled."""
    cs.clock = rt.clock
    cs.open()
    for name, state in cs.states.items():
        if name not in cs.channels:
            rt.notice("error", f"Channel {name} does not start: {state.last_error}")
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
            else:
                cs.hooks_settled.set()
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
            config=rt.config.delivery, mask=Secrets.from_env(rt.ctx.secret_env).mask, **kw))  # fmt: skip
        unsubscribe = rt.subscribe(worker.watch)
        task_status.started(worker)
        try:
            await anyio.sleep_forever()
        finally:
            unsubscribe()


async def _hooks(
    rt: Runtime, cs: ChannelSet, hooks: dict[str, tuple[HookChannel, ChannelState]]
) -> None:
    # The listener (Starlette, uvicorn) loads only in a room with hooks, after it opened.
    from engine.loops.hook import serve_hooks

    try:
        async with serve_hooks(rt, hooks, cs.listen, cs.allow_remote) as address:
            cs.hook_address = address
            for _, state in hooks.values():
                state.ok(rt.clock())
            cs.hooks_settled.set()
            rt.log.info("hooks served on %s: %s", address, ", ".join(sorted(hooks)))
            await anyio.sleep_forever()
    except (ServerError, OSError) as exc:  # the runtime goes on; the hooks say why not
        for _, state in hooks.values():
            state.fail(f"not served: {exc}")
        rt.notice("error", f"The hooks are not served: {exc}")
        cs.hooks_settled.set()
    finally:
        cs.hook_address = None
