"""`agentdeck status` on a cluster's worker: the workers with their heartbeats and leases.

A worker is alive while it runs and its last heartbeat is less than a lease time old; a
dead one's leases expire and the others take its threads over. The threads named per
worker are the first few by id (`SHOWN`; `MAX_LISTED` in --json): the lease count says how
many it holds.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.domain.cluster_view import ClusterView, WorkerView

SHOWN = 8  # threads named per worker in the text (--json has up to MAX_LISTED)
COLUMNS = ("worker", "host", "pid", "state", "alive", "heartbeat", "leases", "threads")


def as_json(view: ClusterView) -> dict[str, Any]:
    """The workers, for `status --json` (the threads are the scheduler's: GET /v1/cluster)."""
    return {"worker": view.worker, "lease_seconds": view.lease_seconds,
            "workers": [dataclasses.asdict(w) for w in view.workers]}  # fmt: skip


def from_json(data: dict[str, Any]) -> ClusterView:
    """The view again from its JSON (the API's, or `dataclasses.asdict`'s); its threads are
    not read back (nothing here shows them)."""
    workers = tuple(WorkerView(**{**w, "threads": tuple(w["threads"])}) for w in data["workers"])
    return ClusterView(worker=data["worker"], lease_seconds=data["lease_seconds"],
                       workers=workers, threads=())  # fmt: skip


def lines(view: ClusterView) -> list[str]:
    """The cluster as a few lines: a summary, then a table of its workers."""
    alive = sum(1 for w in view.workers if w.alive)
    held = sum(w.leases for w in view.workers)
    head = (f"cluster: {alive} of {len(view.workers)} worker{_s(len(view.workers))} alive, "
            f"{held} thread{_s(held)} leased (leases last {_seconds(view.lease_seconds)}); "
            f"this room's runtime is worker {view.worker}")  # fmt: skip
    rows = [COLUMNS] + [_row(w, view.worker) for w in view.workers]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    table = ["  " + "  ".join([*(c.ljust(n) for c, n in zip(r, widths, strict=False)), r[-1]])
             for r in rows]  # fmt: skip
    return [head, *(t.rstrip() for t in table)]


def _row(w: WorkerView, this: str) -> tuple[str, ...]:
    shown = w.threads[:SHOWN]
    named = ", ".join(shown) if shown else "—"
    if w.leases > len(shown):
        named += f" (+{w.leases - len(shown)} more)"
    return (w.id + (" *" if w.id == this else ""), w.host, str(w.pid), w.state,
            "alive" if w.alive else "dead", f"{_seconds(w.heartbeat_age)} ago", str(w.leases),
            named)  # fmt: skip


def _seconds(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    h, m, s = whole // 3600, whole // 60 % 60, whole % 60
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _s(n: int) -> str:
    return "" if n == 1 else "s"
