"""A cluster's worker as its background tasks and its turn helpers see it (`Member`); the
runtime it belongs to is a coordinator's `Host` (engine/services/coordinator.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:
    import anyio

    from engine.cluster.listen import Listener
    from engine.cluster.worker import ClusterWorker
    from engine.services.coordinator import Host
    from engine.store.pg.cluster import Conn


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

    async def refresh(self, thread_id: str) -> None: ...

    async def quietly(self, step: Any) -> None: ...

    async def db(self, use: Callable[[Conn], Awaitable[T]], again: bool = False) -> T: ...

    async def leases(self, use: Callable[[Conn], Awaitable[T]]) -> T: ...
