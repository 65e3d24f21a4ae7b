"""Several runtime workers on one PostgreSQL database (issue 18): thread leases with fencing
tokens, singleton loops, work notices that reach the worker holding a thread, and group
budgets that hold across the cluster; a runtime joins as a `ClusterMember` (member.py). The
SQL is in engine/store/pg/cluster.py and claims.py."""

from engine.cluster.singleton import SingletonLock
from engine.cluster.worker import ClusterWorker
from engine.store.pg.cluster import ClusterError, Fenced, Lease, WorkerRow

__all__ = [
    "ClusterError",
    "ClusterWorker",
    "Fenced",
    "Lease",
    "SingletonLock",
    "WorkerRow",
]
