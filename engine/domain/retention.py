"""What a pass of retention pruned, or would prune (`agentdeck gc`, `POST /v1/gc`)."""

from __future__ import annotations

from pydantic import BaseModel


class SpaceView(BaseModel):
    """A store's size: its files on disk (a PostgreSQL database's size), and what its data
    uses of them (what `[retention] gb` limits)."""

    file_bytes: int
    used_bytes: int
    bus_bytes: int = 0  # the room's bus file (bus/events.db), shared with other rooms maybe


class GcReport(BaseModel):
    """One pass: the limits it applied, the turns it pruned (or, `dry_run`, would prune)
    with their steps, calls, events and the outputs of messages it slimmed, about how many
    bytes that frees, and the store's size before and after."""

    dry_run: bool
    days: float | None  # finished turns older than this were pruned (None: no such limit)
    gb: float | None  # the oldest finished turns were pruned while the store used more
    turns: int = 0
    steps: int = 0  # deleted
    calls: int = 0  # slimmed: kept for their decisions, without results
    events: int = 0  # deleted from execution.db
    messages: int = 0  # conversation entries whose outputs were slimmed
    bus_events: int = 0  # deleted from the bus
    freed_estimate: int = 0  # bytes, estimated from what was deleted or slimmed
    oldest_ended_at: float | None = None  # of the turns pruned
    newest_ended_at: float | None = None
    before: SpaceView
    after: SpaceView | None = None  # None: a dry run
    vacuumed: bool = False  # the whole database was rewritten (`--vacuum`)
    note: str | None = None  # what the operator may want to know (space not given back)
