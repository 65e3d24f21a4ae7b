"""Where the console's runtime is: hosted in this process, or attached to the room's owner.

`RuntimeHost` (a free room) opens the runtime in the app's worker, runs its loops and
serves its API, so other consoles and the CLI can join. `AttachedHost` (an owned room)
follows the owner's event stream through its API, and when the owner goes away says so,
waits for a new one and attaches again. Either way the bridge gets a `RoomClient` and
the events, and the screens cannot tell the difference.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
from textual.message import Message as TextualMessage

from console.bridge import Bridge, RunInfo
from console.seed import seed
from engine.config import load_config
from engine.providers.offline import OfflineModel
from engine.room import Room, owner_of, shown

if TYPE_CHECKING:  # the client's modules load with the runtime, after the first screen
    from engine.api.client import RoomClient

LIVE_DELAY = 0.02  # the offline model's pace in the real console, so streaming is visible
LOOK_EVERY = 0.5  # seconds between looks for a new owner while detached


def console_provider(room: Room) -> Any:
    """The offline model at a visible pace unless the room configures a model or a pace."""
    config = load_config(room.config)
    if config.model.provider in (None, "offline") and config.model.offline_delay == 0:
        return OfflineModel(delay=LIVE_DELAY)
    return None  # the runtime chooses from agentdeck.toml


class Host:
    """Serves the bridge until `close`; `closed` is set once it has let go of the room."""

    hosted = True

    def __init__(self, room: Room) -> None:
        self.room = room
        self._closing = asyncio.Event()
        self.closed = asyncio.Event()
        self.started = False  # serve began: `closed` will be set
        self.error: BaseException | None = None
        self.runtime: Any = None  # the runtime, while hosted here (tests and benchmarks)

    async def serve(self, bridge: Bridge, target: Any) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Let go of the room (closing the runtime when hosted) and wait until done."""
        self._closing.set()
        if self.started:
            await self.closed.wait()

    async def _follow(self, client: RoomClient, bridge: Bridge, target: Any, info: RunInfo) -> None:
        """Follow the client's events, read the room's state, tell the screen; until
        `close` (or until the owner is gone: `OwnerGone`)."""

        async def resync() -> None:
            bridge.restart()
            await seed(client, bridge.state)
            target.post_message(Bridge.Attached(info))

        bridge.connect(client, target)
        try:
            async with anyio.create_task_group() as tg:
                # following before the room is read: no event falls between the two
                follow = functools.partial(client.follow, watch=bridge.watch)
                await tg.start(follow, bridge.receive, resync)
                await seed(client, bridge.state)
                target.post_message(Bridge.Attached(info))
                await self._closing.wait()
                tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the one error of the follower, as itself
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            bridge.flush()
            bridge.disconnect()


class RuntimeHost(Host):
    """Owns the room: the runtime, its loops and its API, for the app's lifetime."""

    class Settled(TextualMessage):
        """What starts after the first screen (the room's loops and API) has started."""

    def __init__(self, room: Room, *, clock: Callable[[], float], ids: Callable[[str], str] | None,
                 provider: Any, serve_api: bool = True, loops: bool = True) -> None:  # fmt: skip
        super().__init__(room)
        self.clock, self.ids, self.provider = clock, ids, provider
        self.serve_api, self.loops = serve_api, loops
        self._drawn = asyncio.Event()  # the first full screen is drawn

    async def serve(self, bridge: Bridge, target: Any) -> None:
        """Open the runtime and follow it until `close`; once the first full screen is
        drawn (`first_screen_drawn`), start the room's loops and serve its API."""
        self.started = True
        from engine.api.local import LocalClient  # after the first paint: not needed to draw
        from engine.runtime import Runtime

        try:
            async with Runtime.open(self.room, kind="console", clock=self.clock, ids=self.ids,
                                    provider=self.provider) as rt:  # fmt: skip
                self.runtime = rt
                info = RunInfo(shown(self.room.path), rt.run_id,
                               f"{rt.provider.name}:{rt.provider.model}", "hosted")  # fmt: skip
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._after_first_screen, rt, target)
                    await self._follow(LocalClient(rt), bridge, target, info)
                    if not self._drawn.is_set():  # closed before its first screen was drawn
                        tg.cancel_scope.cancel()
        except ExceptionGroup as group:  # the one error (the loops' start, say) as itself
            self.error = group.exceptions[0] if len(group.exceptions) == 1 else group
            raise self.error from None
        except Exception as exc:  # the app shows it and exits with status 1
            self.error = exc
            raise
        finally:
            self.runtime = None
            self.closed.set()

    def first_screen_drawn(self) -> None:
        """The app drew the attached run: what the first screen does not need may load."""
        self._drawn.set()

    async def _after_first_screen(self, rt: Any, target: Any) -> None:
        """The room's loops and API, which the first screen does not show: their modules
        (channels, Starlette, FastAPI, uvicorn) load once it is drawn, in a thread; then
        `Settled` tells the app."""
        await self._drawn.wait()
        if self.loops:
            start_loops = await anyio.to_thread.run_sync(_start_loops)
            start_loops(rt)  # (a malformed channels.toml: the app shows it and exits)
        if self.serve_api:
            await self._serve_api(rt, target)
        else:
            target.post_message(self.Settled())

    async def _serve_api(self, rt: Any, target: Any) -> None:
        """The room's API, until `close` (its modules load in a thread: ~0.3 s)."""
        from engine.api.client import ServerError

        server = await anyio.to_thread.run_sync(_server_module)
        try:
            async with server.serve_api(rt):
                target.post_message(self.Settled())
                await self._closing.wait()
        except (ServerError, OSError) as exc:  # hosting goes on; other operators cannot join
            rt.notice("error", f"The room's API is not served: {exc}")
            target.post_message(self.Settled())


def _start_loops() -> Callable[[Any], None]:
    from engine.loops.start import start_loops

    return start_loops


def _server_module() -> Any:
    import engine.loops.server

    return engine.loops.server


class AttachedHost(Host):
    """A client of the room's owner; when it goes away, waits for the next one."""

    hosted = False

    def __init__(self, room: Room) -> None:
        super().__init__(room)
        self.free = False  # the owner went away and nobody owns the room now

    async def serve(self, bridge: Bridge, target: Any) -> None:
        self.started = True
        from engine.api.client import OwnerGone
        from engine.api.connect import connect

        try:
            gone = False  # the operator has been told the runtime is gone
            while not self._closing.is_set():
                try:
                    client = await connect(self.room, wait=2.0)
                except OwnerGone as exc:
                    client, why = None, str(exc)
                else:
                    why = f"nobody owns {self.room.path}"
                if client is None:
                    free = owner_of(self.room) is None
                    if not gone or (free and not self.free):  # once, and once more if free
                        gone = True
                        target.post_message(Bridge.Detached(why, free))
                    self.free = free
                    with anyio.move_on_after(LOOK_EVERY):
                        await self._closing.wait()
                    continue
                self.free = gone = False
                async with client:
                    owner = client.owner
                    assert owner is not None
                    info = RunInfo(shown(self.room.path), owner.run_id, owner.model,
                                   f"attached to pid {owner.pid}")  # fmt: skip
                    try:
                        await self._follow(client, bridge, target, info)
                    except OwnerGone as exc:
                        gone = True
                        target.post_message(Bridge.Detached(str(exc), free=False))
        finally:
            self.closed.set()
