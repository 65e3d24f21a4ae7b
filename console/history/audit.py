"""The room's decision audit exported from the history screen (E): every decision of the
room read through the runtime's client (this console's runtime, or the owner's API), never
from the store, and written as JSON lines to `exports/audit-YYYYMMDD-HHMMSS.jsonl` in the
room (engine/api/audit.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.bridge import Bridge


async def export_audit(bridge: Bridge | None, room: Path, now: float) -> tuple[Path, str]:
    """Write the audit; return where, and what to tell the operator. RuntimeError when no
    runtime is reachable; the client's errors and OSError as they come."""
    from engine.api.audit import export, export_path

    if bridge is None:
        raise RuntimeError("no runtime is reachable from here")
    target = export_path(room, now)
    entries = await export(bridge.api, target)
    what = "1 entry" if entries == 1 else f"{entries:,} entries"
    return target, f"The decision audit ({what}) written to {target}"
