"""What the runtime keeps of a turn it drives, and of a request admitted as it was
offered: small records the supervisor, the runtime and a cluster's worker share (the
supervisor runs the turns; engine/services/supervisor.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from engine.domain.outcome import TurnOutcome
from engine.store import Op, StoreError


@dataclass
class TurnHandle:
    """A turn the runtime is driving (or about to): wait on `done`, cancel via the runtime."""

    turn_id: str
    thread_id: str
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope | None = None
    cancel_reason: str | None = None
    lost: bool = False  # a cluster's worker lost the thread's lease: stop, write nothing
    token: int | None = None  # a cluster's: the lease token its checkpoints are fenced with
    admitted: anyio.Event = field(default_factory=anyio.Event)  # a resumed turn got a slot
    # A turn done here: where it stands, as its last commit wrote it (no read to answer
    # its waiters; a done turn changes no more)
    outcome: TurnOutcome | None = None


class Carried:
    """A request admitted as it was offered: its rows (the request, its key) go into its
    turn's first commit, one writer trip where there were two; the offer waits for that
    commit (`durable`), or for the error that stopped it."""

    def __init__(self, request_id: str, ops: list[Op]) -> None:
        self.request_id, self.ops = request_id, ops
        self._done = anyio.Event()
        self._error: BaseException | None = None

    def settle(self, error: BaseException | None) -> None:
        if not self._done.is_set():
            self._error = error
            self._done.set()

    async def durable(self) -> None:
        await self._done.wait()
        if self._error is not None:
            if isinstance(self._error, anyio.get_cancelled_exc_class()):
                raise StoreError("the runtime stopped before the request was written")
            raise self._error
