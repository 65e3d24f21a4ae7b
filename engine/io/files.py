"""Replacing a file whole: a reader sees the old content or the new, never half of it."""

from __future__ import annotations

import os
import secrets
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


def replace_at(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """Write `data` over `name` in the directory `dir_fd` through a temporary file created
    in that same directory (never through a symlink), synced, then renamed into place
    there, with `mode`. Nothing is left behind when it fails."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = f".{name[:40]}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
