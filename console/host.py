"""Hosting the runtime inside the Textual app: open it in a worker, close it on quit.

The runtime's anyio task group runs on Textual's asyncio loop. `serve` holds
`Runtime.open` for the app's lifetime; `close` lets it leave its block so turns are
stopped and the room released before the app exits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from console.bridge import Bridge, RunInfo
from console.history import seed
from engine.config import load_config
from engine.providers.offline import OfflineModel
from engine.room import Room

LIVE_DELAY = 0.02  # the offline model's pace in the real console, so streaming is visible


def console_provider(room: Room) -> Any:
    """The offline model at a visible pace unless the room configures a model or a pace."""
    config = load_config(room.config)
    if config.model.provider in (None, "offline") and config.model.offline_delay == 0:
        return OfflineModel(delay=LIVE_DELAY)
    return None  # the runtime chooses from agentdeck.toml


class RuntimeHost:
    """Owns the open runtime for the app's lifetime."""

    def __init__(self, room: Room, *, clock: Callable[[], float], ids: Callable[[str], str] | None,
                 provider: Any) -> None:  # fmt: skip
        self.room, self.clock, self.ids, self.provider = room, clock, ids, provider
        self._closing = asyncio.Event()
        self.closed = asyncio.Event()
        self.started = False  # serve began: `closed` will be set
        self.error: BaseException | None = None

    async def serve(self, bridge: Bridge, target: Any) -> None:
        """Open the runtime, seed the view from history, then wait until `close`."""
        self.started = True
        from engine.runtime import Runtime  # after the first screen: it is not needed to draw

        try:
            async with Runtime.open(self.room, kind="console", clock=self.clock, ids=self.ids,
                                    provider=self.provider) as rt:  # fmt: skip
                bridge.attach(rt, target)  # before any await: no event is missed
                try:
                    threads = await seed(self.room, bridge.state)
                    model = f"{rt.provider.name}:{rt.provider.model}"
                    info = RunInfo(self.room.path.name, rt.run_id, model)
                    target.post_message(Bridge.Attached(info, threads))
                    await self._closing.wait()
                finally:
                    bridge.flush()
                    bridge.detach()
        except Exception as exc:  # the app shows it and exits with status 1
            self.error = exc
            raise
        finally:
            self.closed.set()

    async def close(self) -> None:
        """Leave the runtime's block (or, when its worker was cancelled, let it finish
        unwinding) and wait until it has closed the room."""
        self._closing.set()
        if self.started:
            await self.closed.wait()
