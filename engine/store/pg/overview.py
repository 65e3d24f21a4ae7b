"""The cluster at a glance, in SQL: its workers with their heartbeats and leases, and every
thread with a turn running or waiting, a queued request or a lease, with the worker that
leases it, read on one connection with one reading of the database's clock; what
`agentdeck status` and the scheduler view across workers show (engine/domain/cluster_view.py).
"""

from __future__ import annotations

from collections import defaultdict

from engine.domain.cluster_view import MAX_LISTED, ClusterView, WorkerView
from engine.domain.scheduler_stats import ThreadStats
from engine.store.pg.cluster import Conn, db_now, leases, list_workers

MAX_THREADS = 5_000  # threads one view lists at most (the busy ones first)

# At most one turn of a thread is running or waiting; DISTINCT ON keeps the newest should
# a crash have left more. A turn left running by a dead worker shows with no worker until
# another one takes the thread over.
THREADS = """
WITH busy AS (
    SELECT DISTINCT ON (thread_id) thread_id, id, status FROM turns
    WHERE status <> 'done' ORDER BY thread_id, created_at DESC
), queued AS (
    SELECT thread_id, min(group_name) AS group_name, count(*) AS n FROM turn_requests
    WHERE status = 'queued' GROUP BY thread_id
), held AS (
    SELECT thread_id, worker_id FROM thread_leases
    WHERE worker_id IS NOT NULL AND expires_at > %(now)s
), ids AS (
    SELECT thread_id FROM busy UNION SELECT thread_id FROM queued
    UNION SELECT thread_id FROM held
)
SELECT i.thread_id, COALESCE(h.group_name, q.group_name, ''), b.id, COALESCE(b.status, 'idle'),
       COALESCE(q.n, 0), l.worker_id
FROM ids i
LEFT JOIN threads h ON h.id = i.thread_id
LEFT JOIN busy b ON b.thread_id = i.thread_id
LEFT JOIN queued q ON q.thread_id = i.thread_id
LEFT JOIN held l ON l.thread_id = i.thread_id
ORDER BY b.id IS NULL, i.thread_id
LIMIT %(limit)s
"""


async def cluster_threads(conn: Conn, *, now: float, limit: int = MAX_THREADS) -> list[ThreadStats]:
    """Every thread with work or a lease (busy ones first, then by id), with its worker."""
    cur = await conn.execute(THREADS, {"now": now, "limit": limit})
    return [
        ThreadStats(thread_id=t, group=g, turn_id=turn, state=state, queued=n, worker=w)
        for t, g, turn, state, n, w in await cur.fetchall()
    ]


async def read_view(conn: Conn, worker: str, lease_seconds: float) -> ClusterView:
    """The workers (with the first MAX_LISTED threads each leases) and the threads."""
    at = await db_now(conn)
    rows = await list_workers(conn, lease_seconds, now=at)
    named: defaultdict[str, list[str]] = defaultdict(list)
    for lease in await leases(conn, now=at):  # by thread id
        if len(named[lease.worker_id]) < MAX_LISTED:
            named[lease.worker_id].append(lease.thread_id)
    workers = tuple(
        WorkerView(id=r.id, host=r.host, pid=r.pid, state=r.state, alive=r.alive,
                   started_at=r.started_at, heartbeat_at=r.heartbeat_at,
                   heartbeat_age=max(0.0, at - r.heartbeat_at), leases=r.leases,
                   threads=tuple(named.get(r.id, ())))
        for r in rows
    )  # fmt: skip
    threads = tuple(await cluster_threads(conn, now=at))
    return ClusterView(worker=worker, lease_seconds=lease_seconds, workers=workers,
                       threads=threads)  # fmt: skip
