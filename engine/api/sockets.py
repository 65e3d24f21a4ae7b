"""Paths of Unix sockets, whatever the room's path length.

A socket's path must fit `sun_path` (108 bytes on Linux, less elsewhere). A room deep in
the file system reaches its socket through the directory's descriptor instead,
`/proc/self/fd/N/agent.sock`, kept open for the life of the process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

SUN_PATH = 100  # bytes; a little under the smallest limit (104 on the BSDs)
_dirs: dict[Path, int] = {}


def connect_path(path: Path) -> str:
    """A path to bind or connect `path` by, short enough for `sun_path`."""
    text = str(path)
    if len(os.fsencode(text)) < SUN_PATH or not sys.platform.startswith("linux"):
        return text
    parent = path.parent
    fd = _dirs.get(parent)
    if fd is None:
        fd = _dirs[parent] = os.open(parent, os.O_PATH | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{path.name}"


@contextlib.contextmanager
def bind_path(path: Path) -> Iterator[str]:
    """A path to bind `path` by while the block runs (the directory may go away after)."""
    text = str(path)
    if len(os.fsencode(text)) < SUN_PATH or not sys.platform.startswith("linux"):
        yield text
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def answers(path: Path) -> bool:
    """True if something accepts connections on the socket at `path` now."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(connect_path(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()
