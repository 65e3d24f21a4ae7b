"""Decisions across workers: the decision is recorded and announced in one transaction
(`notify_decision` in engine/store/pg/cluster.py: NOTIFY goes out at commit, never for a
rollback), and each worker's `Notifier` LISTENs on its own connection and yields the notices,
so the worker holding the thread applies the decision at once.

NOTIFY is a wake-up, not the record: a notice sent while a worker was not listening (it was
starting, or its listening connection had dropped) is not replayed. The decision row is
durable before the notice, so a worker reads the queued decisions of the threads it takes
(at acquire, and after each time it starts listening) and misses none.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import psycopg

from engine.store.pg import cluster as sql
from engine.store.pg.cluster import Conn

log = logging.getLogger("agentdeck")


@dataclass(frozen=True, slots=True)
class DecisionNotice:
    """A decision was recorded for a call in this thread."""

    decision_id: str
    thread_id: str


def parse_notice(payload: str) -> DecisionNotice | None:
    """The notice in a payload, or None (logged) if it is not one."""
    try:
        body = json.loads(payload)
        decision, thread = body["decision"], body["thread"]
    except (ValueError, TypeError, KeyError):
        log.warning("ignored a malformed decision notice (%d chars)", len(payload))
        return None
    if not isinstance(decision, str) or not isinstance(thread, str):
        log.warning("ignored a decision notice without string ids")
        return None
    return DecisionNotice(decision, thread)


class Notifier:
    """One worker's listening connection on the decisions channel."""

    def __init__(self, conninfo: str, *, application_name: str = "agentdeck") -> None:
        self._conninfo = conninfo
        self._application_name = application_name
        self._conn: Conn | None = None

    async def start(self) -> None:
        """Open the connection and LISTEN; from here on no committed decision is missed
        (read the queued ones once after this, for anything decided before)."""
        self._conn = await psycopg.AsyncConnection.connect(
            self._conninfo, autocommit=True, application_name=self._application_name
        )
        await sql.listen_decisions(self._conn)

    async def notices(
        self, holds: Callable[[str], bool] | None = None
    ) -> AsyncIterator[DecisionNotice]:
        """Notices as they arrive, only for threads `holds` accepts (all if None). A dropped
        connection raises psycopg.OperationalError: start again, then re-read the queued
        decisions."""
        if self._conn is None:
            raise RuntimeError("Notifier.start() first")
        async for note in self._conn.notifies():
            if note.channel != sql.DECISIONS_CHANNEL:
                continue
            notice = parse_notice(note.payload)
            if notice is not None and (holds is None or holds(notice.thread_id)):
                yield notice

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def __aenter__(self) -> Notifier:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
