"""agent.run: a small JSON summary of what a runtime is running now, for `cat` and scripts.

The truth is execution.db; this file is a convenience, so it is written when the run
starts and stops, and otherwise at most every `EVERY` seconds, once for however many
turns changed meanwhile, in a worker thread (a write costs about a millisecond here).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from engine.room import Room

EVERY = 0.25  # seconds between two rewrites while running

log = logging.getLogger("agentdeck")


class SummaryFile:
    """Writes `snapshot(stopped)` to the room's agent.run."""

    def __init__(self, room: Room, snapshot: Callable[[bool], dict[str, Any]]) -> None:
        self.room, self.snapshot = room, snapshot
        self._due = False  # a rewrite is scheduled

    def write(self, stopped: bool = False) -> None:
        """Now (the run starts or stops)."""
        self._save(self.snapshot(stopped))

    def changed(self, tg: TaskGroup | None) -> None:
        """A turn started or settled: rewrite within EVERY seconds."""
        if self._due or tg is None:
            return
        self._due = True
        tg.start_soon(self._rewrite)

    async def _rewrite(self) -> None:
        await anyio.sleep(EVERY)
        self._due = False
        # the snapshot is taken here, on the event loop; only the file write is threaded
        await anyio.to_thread.run_sync(self._save, self.snapshot(False))

    def _save(self, summary: dict[str, Any]) -> None:
        try:
            self.room.write_summary(summary)
        except OSError as exc:
            log.warning("cannot write %s: %s", self.room.summary, exc)


def summary_of(rt: Any, stopped: bool) -> dict[str, Any]:
    """What agent.run says of the runtime `rt` (an engine.runtime.Runtime)."""
    return {
        "run_id": rt.run_id,
        "kind": rt.kind,
        "pid": os.getpid(),
        "state": "stopped" if stopped else "active",
        "model": f"{rt.provider.name}:{rt.provider.model}",
        "running_turns": sorted(rt.supervisor.loops),
        "waiting_turns": sorted(
            h.turn_id for h in rt.scheduler.holders.values() if h.state != "running"
        ),
        "updated_at": time.time(),  # wall time, not the runtime clock tests fix
        **rt.api,
    }
