"""What a cluster's worker reaches of the runtime it belongs to: the runtime as the cluster
modules see it, so that they depend on this shape and not on engine.runtime (which builds
them, engine/lifetime.py: the dependency runs one way)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:
    import anyio

    from engine.bus import EventBus
    from engine.cluster.listen import Listener
    from engine.cluster.worker import ClusterWorker
    from engine.config import Config
    from engine.decisions.inbox import DecisionInbox
    from engine.handles import TurnHandle
    from engine.outcome import TurnOutcome
    from engine.scheduler import Request, Scheduler
    from engine.store import Store
    from engine.store.pg.cluster import Conn
    from engine.supervisor import TurnSupervisor
    from engine.turn.context import TurnContext


class Host(Protocol):
    """The runtime a `ClusterMember` is one worker of."""

    store: Store
    config: Config
    ctx: TurnContext
    bus: EventBus
    supervisor: TurnSupervisor
    scheduler: Scheduler
    decisions: DecisionInbox
    live: dict[str, TurnHandle]
    run_id: str
    serves_queue: bool
    clock: Callable[[], float]

    def request(self, request_id: str) -> Request | None: ...

    def adopt(self, req: Request) -> None: ...

    def drop_request(self, request_id: str) -> None: ...

    def notice(self, level: str, text: str) -> None: ...

    async def outcome(self, turn_id: str) -> TurnOutcome: ...

    async def reload_rules(self) -> None: ...


class Member(Protocol):
    """A cluster's worker as its background tasks and its turn helpers see it
    (engine/cluster/tasks.py, anywhere.py; the class is engine/cluster/member.py)."""

    rt: Host
    name: str
    url: str
    lease: float
    worker: ClusterWorker | None
    listener: Listener | None
    beat_ok: float
    wanted: anyio.Event

    def holds(self, thread_id: str) -> bool: ...

    async def claim(self, threads: Iterable[str] | None = None, group: str | None = None
                    ) -> list[str]: ...  # fmt: skip

    async def beat(self) -> None: ...

    def lost(self, thread_id: str) -> None: ...

    async def reconnect(self) -> None: ...

    async def quietly(self, step: Any) -> None: ...

    async def db(self, use: Callable[[Conn], Awaitable[T]]) -> T: ...
