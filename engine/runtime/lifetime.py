"""How a runtime opens and closes (`Runtime.open`): own the room, open its store, build the
runtime, repair what a crash left, run its task group (turns, the full-text batch, the
approval deadlines, a cluster worker's heartbeat, claims and event relay), and on the way
out stop all of it, the store last, the room's ownership after."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import anyio

from engine.config import Config, load_config
from engine.providers.base import Provider
from engine.room import Ownership, Room
from engine.runtime.heap import settle as settle_heap
from engine.services.coordinator import Coordinator, Host, OneRoom
from engine.services.deadlines import DeadlineWatch
from engine.store import Store, StoreError
from engine.store.select import open_store, store_url
from engine.tools import Tool, ToolRegistry
from engine.turn.plugins import Plugin, default_stop_policies

if TYPE_CHECKING:
    from engine.domain.decisions import Decision
    from engine.domain.events import Event
    from engine.services.budgets import Budgets
    from engine.services.supervisor import TurnSupervisor
    from engine.tools.mcp import McpServers
    from engine.turn.models import Models
    from engine.turn.output import OutputPump


class Served(Host, Protocol):
    """The runtime as its lifetime opens, serves and closes it (engine.runtime.Runtime,
    which imports this module: named by its shape, not imported)."""

    provider: Provider

    def __init__(self, room: Room, store: Store, config: Config, provider: Provider,
                 tools: ToolRegistry, plugins: list[Plugin], kind: str,
                 clock: Callable[[], float], ids: Callable[[str], str] | None,
                 coordinator: Coordinator) -> None: ...  # fmt: skip

    @property
    def supervisor(self) -> TurnSupervisor: ...

    output: OutputPump
    models: Models
    budgets: Budgets
    mcp: McpServers | None

    async def _start(self) -> None: ...

    async def _stop(self) -> None: ...

    async def decide(self, decision: Decision, *, need_hash: bool = False) -> str: ...

    def subscribe(self, callback: Callable[[Event], None], *,
                  relayed: bool = True) -> Callable[[], None]: ...  # fmt: skip


R = TypeVar("R", bound=Served)
INDEX_EVERY = 1.0  # seconds between two full-text batches (History.search lags this much)


@asynccontextmanager
async def serving(
    cls: type[R],  # engine.runtime.Runtime
    room: Room | str | Path | None,
    *,
    kind: str,
    provider: Provider | None,
    tools: list[Tool] | None,
    plugins: list[Plugin] | None,
    config: Config | None,
    clock: Callable[[], float],
    sleep: Callable[[float], Awaitable[Any]],
    ids: Callable[[str], str] | None,
    resume: Literal["all", "none"],
) -> AsyncIterator[R]:
    """`Runtime.open`'s body: the composition root, where the coordinator is chosen."""
    room = room if isinstance(room, Room) else Room.at(room)
    room.create()
    config = config or load_config(room.config)
    ownership = Ownership(room, kind)
    ownership.acquire()
    try:
        room.ensure()
        had_history = room.db.exists()
        opened = room.tighten()
        store = await open_store(room.db, config.store, shared=config.cluster.enabled)
        room.tighten()  # a new execution.db is made with the process's umask
        try:
            if provider is None:
                from engine.providers.select import make_provider

                provider = make_provider(config).provider
            if tools is None:
                from engine.tools.builtin import builtin_tools

                tools = builtin_tools()
            if plugins is None:
                plugins = default_stop_policies(config.runtime)
            coordinator = _coordinator(config, one_off=resume != "all")
            rt = cls(room, store, config, provider, ToolRegistry(tools), plugins, kind,
                     clock, ids, coordinator)  # fmt: skip
            rt.serves_queue = resume == "all"
            await rt._start()
            settle_heap()  # what exists now lives as long as the process (heap.py)
            if opened and had_history:  # (a folder made by hand for a new room: no word)
                rt.notice("warning", f"room {room.path} was readable by other users "
                          f"({', '.join(opened)}): made private to its owner")  # fmt: skip
            sv = rt.supervisor
            try:
                async with anyio.create_task_group() as tg:
                    sv.tg = tg
                    tg.start_soon(store.index_forever, INDEX_EVERY)
                    tg.start_soon(rt.output.run)  # running calls' output, paced
                    tg.start_soon(rt.budgets.watch, sv.pump)  # a new day lets held turns go
                    if rt.mcp is not None:  # listed before a resumed turn looks for its tool
                        await rt.mcp.start(tg)
                    await coordinator.start(rt)
                    await tg.start(coordinator.run)
                    if resume == "all":
                        if config.approvals.any_deadline:  # else nothing to watch
                            watch = DeadlineWatch(store, config.approvals, clock=clock,
                                sleep=sleep, decide=rt.decide, queued=rt.decisions.queued_for,
                                subscribe=rt.subscribe, notice=rt.notice).run  # fmt: skip
                            coordinator.singleton("deadlines", watch)  # on one runtime
                        if config.retention.active:  # finished turns pruned: now, then hourly
                            from engine.services.retention import Retention

                            kept = Retention.of(store, room.path, config, clock)
                            coordinator.singleton("retention", lambda: kept.run(sleep))
                        for turn_id in sorted(sv.interrupted):
                            sv.spawn_resume(turn_id)
                        for turn_id in await coordinator.stale_turns(rt.decisions):  # decided, not
                            if turn_id not in sv.live:  # applied: a run died between
                                sv.spawn_resume(turn_id)
                    else:
                        await sv.review_left()
                    sv.pump()  # requests a previous run accepted and did not start
                    yield rt
                    tg.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # The caller's own error comes out as itself, not wrapped in a group.
                if len(group.exceptions) == 1:
                    raise group.exceptions[0] from group
                raise
            finally:
                with anyio.CancelScope(shield=True):
                    await rt._stop()
                    await coordinator.stop()
                    if (aclose := getattr(rt.provider, "aclose", None)) is not None:
                        await aclose()
                    await rt.models.aclose()  # those groups and threads have of their own
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()
    finally:
        ownership.release()


def _coordinator(config: Config, *, one_off: bool) -> Coordinator:
    """One room alone, or (`[cluster] enabled`) one worker of a cluster on the database."""
    if not config.cluster.enabled:
        return OneRoom()
    if one_off:
        raise StoreError(
            "this room's store is shared by a cluster's workers, and a one-off runtime would "
            "run turns outside their leases: start a worker here (agentdeck run) and the "
            "command goes through it"
        )
    from engine.cluster.member import ClusterMember  # (psycopg: only a cluster's worker)

    url = store_url(config.store)
    assert url is not None  # open_store refused a cluster on SQLite
    return ClusterMember(url, config.cluster)
