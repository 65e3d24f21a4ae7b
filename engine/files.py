"""Replacing a file whole: a reader sees the old content or the new, never half of it."""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path


def replace_file(target: Path, data: bytes) -> None:
    """Write `data` over `target` through a temporary file beside it, synced, then renamed
    into place. `target` keeps its mode (a new file gets 0o644); nothing is left behind
    when it fails. The directory must exist."""
    mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
