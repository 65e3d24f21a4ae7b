"""What a worker reads of a thread it has just leased (engine/cluster/member.py): the turns
that hold it, its queued requests and the queued decisions for its suspended calls. The
lease was granted after every checkpoint of the thread's earlier holder committed, so what
these read is the whole of the thread's state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.domain.decisions import Decision
from engine.domain.requests import Request
from engine.store import decisions as recorded
from engine.store.schedule import request_from_row
from engine.store.sqlite import Store


@dataclass
class ThreadWork:
    """One leased thread's unfinished business."""

    thread_id: str
    turns: list[tuple[str, str, str]] = field(default_factory=list)  # (id, status, group)
    requests: list[Request] = field(default_factory=list)  # queued, oldest first
    decisions: list[Decision] = field(default_factory=list)  # queued, oldest first


async def thread_work(store: Store, threads: Sequence[str]) -> dict[str, ThreadWork]:
    """The unfinished business of each of `threads`."""
    work = {t: ThreadWork(t) for t in threads}
    if not work:
        return work
    ids = (json.dumps(list(work)),)
    for row in await store.fetchall("claimed.turns", ids):
        work[row["thread_id"]].turns.append((row["id"], row["status"], row["group_name"]))
    for row in await store.fetchall("claimed.requests", ids):
        work[row["thread_id"]].requests.append(request_from_row(row))
    for row in await store.fetchall("claimed.decisions", ids):
        work[row["call_thread"]].decisions.append(recorded.from_row(row))
    return work


async def queued_requests(store: Store, thread_id: str) -> list[Request]:
    """The thread's queued requests, oldest first."""
    return (await thread_work(store, [thread_id]))[thread_id].requests
