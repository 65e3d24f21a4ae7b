"""Rebuilding the scheduler when a runtime starts, from what the room keeps
(engine/store/schedule.py) and its config."""

from __future__ import annotations

from engine.config import Config
from engine.domain.requests import Request
from engine.services.scheduler import Scheduler
from engine.store import Store
from engine.store.schedule import group_row, read_schedule


async def restore_schedule(
    store: Store, scheduler: Scheduler, config: Config
) -> tuple[set[str], list[Request]]:
    """Rebuild `scheduler` from the room and its config: groups (and write them back),
    threads held by unfinished turns, queued requests. Returns the turns a stopped run
    left `running`, and the requests it had queued (now in the scheduler again)."""
    stored = await read_schedule(store)
    for group in stored.groups:
        scheduler.groups[group.name] = group
    for name, settings in config.groups.items():
        # (what the group's agents are told and their model are not the scheduler's)
        scheduler.configure(name, **settings.model_dump(exclude_none=True,
                                                        exclude={"instructions", "model", "budget"}))  # fmt: skip
    for name, settings in config.groups.items():
        if settings.strategy is not None:
            scheduler.configure(name, strategy=settings.strategy)
    await store.write([group_row(g) for g in scheduler.groups.values()])
    interrupted: set[str] = set()
    for held in stored.held:
        scheduler.hold(held.thread_id, held.turn_id, held.group, held.status)
        if held.status == "running":
            interrupted.add(held.turn_id)
    for req in stored.queued:
        scheduler.requeue(req)
    return interrupted, stored.queued
