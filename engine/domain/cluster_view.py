"""What an operator sees of a cluster (issue 18): its workers with their heartbeats and
leases, and every thread of the whole runtime with the worker leasing it.

Plain records, read by a worker (`ClusterMember.view`, SQL in engine/store/pg/overview.py)
and answered by the API (GET /v1/cluster) to `agentdeck status` and the console. They live
outside engine/cluster/ so that a client reads them without loading the database driver
a worker needs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.domain.scheduler_stats import Statistics, ThreadStats

MAX_LISTED = 20  # threads named per worker; its lease count says how many more it holds


@dataclass(frozen=True)
class WorkerView:
    """One worker as `agentdeck status` lists it."""

    id: str
    host: str
    pid: int
    state: str  # running | stopped (as the worker last said)
    alive: bool  # running, and its heartbeat is less than a lease time old
    started_at: float
    heartbeat_at: float
    heartbeat_age: float  # seconds between its last heartbeat and the database's now
    leases: int  # threads it leases now
    threads: tuple[str, ...]  # the first MAX_LISTED of them, by id


@dataclass(frozen=True)
class ClusterView:
    """The workers of one cluster and every thread with work or a lease, read at one time
    of the database's clock."""

    worker: str  # the worker that answered
    lease_seconds: float
    workers: tuple[WorkerView, ...]
    threads: tuple[ThreadStats, ...]  # with `worker` set (None: no lease held)


def across(local: Statistics, view: ClusterView | None) -> Statistics:
    """The scheduler's snapshot of one worker made the cluster's: its groups and queue as
    they are (group counts already include the other workers' running turns), and every
    thread of the cluster with its worker. A thread this worker's scheduler knows keeps
    the state it has here (fresher than the database's), with the lease's worker. With no
    cluster (`view` None), the snapshot as it is."""
    if view is None:
        return local
    held = {t.thread_id: t.worker for t in view.threads}
    mine = {t.thread_id: replace(t, worker=held.get(t.thread_id, view.worker))
            for t in local.threads}  # fmt: skip
    threads = [*mine.values(), *(t for t in view.threads if t.thread_id not in mine)]
    threads.sort(key=lambda t: (t.state == "idle", t.thread_id))
    return replace(local, threads=tuple(threads), worker=view.worker)
