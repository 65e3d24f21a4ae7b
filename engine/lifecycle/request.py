"""Turn-request lifecycle: what the scheduler decides for a request, once.

queued -> admitted | coalesced | rejected

A request is offered `queued` and leaves that state once: admitted (its turn starts, with
the request's id), coalesced into another request of its thread, or rejected (its group's
queue was full, or the group's overflow policy dropped it for a newer one). The three
ends are final; the runtime stores each status as its word in `turn_requests`.
"""

from __future__ import annotations

from enum import StrEnum

from engine.lifecycle.errors import checked


class RequestStatus(StrEnum):
    QUEUED = "queued"  # offered, in line in its thread and group
    ADMITTED = "admitted"  # terminal: its turn started (the thread is held)
    COALESCED = "coalesced"  # terminal: folded into another request (`coalesced_into`)
    REJECTED = "rejected"  # terminal: refused or dropped, the reason recorded with it


S = RequestStatus
TRANSITIONS: dict[RequestStatus, frozenset[RequestStatus]] = {
    S.QUEUED: frozenset({S.ADMITTED, S.COALESCED, S.REJECTED}),
    S.ADMITTED: frozenset(),
    S.COALESCED: frozenset(),
    S.REJECTED: frozenset(),
}


def check(src: RequestStatus | str, dst: RequestStatus | str) -> RequestStatus:
    """Return `dst` if `src -> dst` is legal, else raise IllegalTransition naming both."""
    return checked("turn request", TRANSITIONS, RequestStatus, src, dst)
