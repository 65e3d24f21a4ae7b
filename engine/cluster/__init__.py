"""Several runtime workers on one PostgreSQL database (issue 18): thread leases with fencing
tokens, singleton loops, decisions that reach the worker holding their thread, and group
budgets that hold across the cluster. The SQL is in engine/store/pg/cluster.py."""

from engine.cluster.notify import DecisionNotice, Notifier
from engine.cluster.singleton import SingletonLock
from engine.cluster.worker import ClusterWorker
from engine.store.pg.cluster import ClusterError, Fenced, Lease, WorkerRow

__all__ = [
    "ClusterError",
    "ClusterWorker",
    "DecisionNotice",
    "Fenced",
    "Lease",
    "Notifier",
    "SingletonLock",
    "WorkerRow",
]
