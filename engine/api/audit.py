"""The decision audit for those who read it: a page read from a store (the owner's
`audit` operation, a free room's reader), every page followed through any client
(`agentdeck audit`, the console's export), and the export written as a file in the room.

Following pages holds one page at a time, so a room with hundreds of thousands of
decisions is exported in bounded memory, by the owner and over its API alike.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from engine.api.client import Invalid
from engine.domain.audit import MAX_PAGE, AuditEntry, AuditError, AuditPage, json_line

if TYPE_CHECKING:
    from engine.api.client import RoomClient
    from engine.store.reader import Reads

EXPORTS = "exports"  # the room's folder of exports (the history's turns go there too)


async def read_page(reads: Reads | None, **query: Any) -> AuditPage:
    """One page of the audit from `reads` (None: a room with no database yet, so none);
    `Invalid` for a query that cannot be read (a bad position, a time that is no time)."""
    if reads is None:
        return AuditPage(entries=[])
    from engine.store.audit import page

    try:
        return await page(reads, **query)
    except AuditError as exc:
        raise Invalid(str(exc)) from None


async def pages(
    client: RoomClient,
    *,
    since: float | None = None,
    thread: str | None = None,
    decided_by: str | None = None,
    kind: str | None = None,
    after: str | None = None,
    size: int = MAX_PAGE,
) -> AsyncIterator[list[AuditEntry]]:
    """The audit's entries a page at a time, oldest first, through `client`."""
    while True:
        page = await client.audit(since=since, thread=thread, decided_by=decided_by,
                                  kind=kind, limit=size, after=after)  # fmt: skip
        if page.entries:
            yield page.entries
        if page.next is None:
            return
        after = page.next


def export_path(room: Path, now: float | None = None) -> Path:
    """Where an export made at `now` goes: `exports/audit-YYYYMMDD-HHMMSS.jsonl` in the room
    (local time), `-2`, `-3`... when one of that second exists."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    folder = room / EXPORTS
    target, n = folder / f"audit-{stamp}.jsonl", 1
    while target.exists():
        n += 1
        target = folder / f"audit-{stamp}-{n}.jsonl"
    return target


async def export(client: RoomClient, target: Path, **query: Any) -> int:
    """Write the audit (all of it, or what `query` keeps: `pages`' filters) to `target` as
    JSON lines, one entry a line; return how many. The file is private to its owner (0600,
    its folder made 0700) and appears whole or not at all (written beside it, then
    renamed)."""
    await anyio.to_thread.run_sync(lambda: target.parent.mkdir(mode=0o700, parents=True,
                                                               exist_ok=True))  # fmt: skip
    partial = target.with_name(f".{target.name}.partial")
    fd = await anyio.to_thread.run_sync(
        lambda: os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    )
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            async for entries in pages(client, **query):
                text = "".join(json_line(e) + "\n" for e in entries)
                await anyio.to_thread.run_sync(out.write, text)
                count += len(entries)
            await anyio.to_thread.run_sync(out.flush)
            await anyio.to_thread.run_sync(os.fsync, out.fileno())
        await anyio.to_thread.run_sync(os.replace, partial, target)
    except BaseException:
        with suppress(OSError):
            partial.unlink()
        raise
    return count
