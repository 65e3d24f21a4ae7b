"""This run's turn requests as the runtime remembers them, by id and by idempotency key.

A long-lived runtime offers millions of requests; each is kept (with its message) for as
long as someone may ask about it in memory: while it is queued, while its turn (or the
turn it was coalesced into) runs or waits here. Past `LIMIT` entries, the oldest of the
others leave; the store answers for them (`keyed_request`, `coalesced_into`, the turn's
own rows), so an old request asked about later gets the same answer, one read later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.domain.requests import Request
from engine.lifecycle import RequestStatus
from engine.services.handles import TurnHandle
from engine.services.scheduler import Rejected
from engine.store import Store
from engine.store.schedule import keyed_request

LIMIT = 4096  # requests kept besides those still in line or running (oldest leave first)


class RecentRequests(dict[str, Request]):
    """Requests by id (or key), in the order they came; past twice `limit` entries, the
    oldest of those not queued and whose turn is not `live` leave until `limit` are left."""

    def __init__(self, live: Mapping[str, Any], limit: int = LIMIT) -> None:
        super().__init__()
        self._live, self.limit = live, limit

    def _keep(self, req: Request) -> bool:
        """Whether a request may still be asked about in memory: queued, or its turn (or
        the one it went into) runs or waits here."""
        return req.status is RequestStatus.QUEUED or req.id in self._live or (
            req.turn_id in self._live)  # fmt: skip

    def __setitem__(self, key: str, value: Request) -> None:
        super().__setitem__(key, value)
        if len(self) > 2 * self.limit:
            self._prune()

    def _prune(self) -> None:
        excess = len(self) - self.limit
        gone = []
        for key, req in self.items():  # oldest first
            if excess <= 0:
                break
            if not self._keep(req):
                gone.append(key)
                excess -= 1
        for key in gone:
            del self[key]

    async def offered(self, key: str, store: Store,
                      by_id: RecentRequests) -> tuple[Request, TurnHandle] | None:  # fmt: skip
        """(Of the requests by idempotency key.) The request an earlier offer of `key` made,
        in this run or an earlier one, with a handle on its turn; `Rejected` if it was
        refused; None if `key` is new."""
        first = self.get(key) or await keyed_request(store, key)
        first = self.get(key) or first  # an offer of the same key may have won meanwhile
        if first is None:
            return None
        first = by_id.get(first.id, first)
        if first.status is RequestStatus.REJECTED:
            raise Rejected(first.reason or "rejected")
        if (handle := self._live.get(first.turn_id)) is None:  # it ran, or waits: see outcome
            handle = TurnHandle(first.turn_id, first.thread_id)
            handle.done.set()
        return first, handle
