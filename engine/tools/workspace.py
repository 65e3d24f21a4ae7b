"""The workspace's files, opened so that no path leads out of it, even while it changes.

Checking a path and then opening it by name can be raced: between the two, a directory
can become a symlink to the outside, or a FIFO that blocks the open for ever. So nothing
here opens a path by name from the top. Every component is opened relative to the
descriptor of the one before it, starting from the workspace's own, with O_NOFOLLOW, so a
symlink is refused wherever it appears and whenever it got there. Files are opened with
O_NONBLOCK and judged by fstat of the descriptor itself: only regular files are read or
replaced, only directories listed. A file is replaced through a temporary file in the
same directory (the same descriptor), renamed there, so it cannot land anywhere else.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from contextlib import suppress
from pathlib import Path
from typing import Any

from engine.io.files import replace_at
from engine.tools import ToolError

_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 20

_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink"}


def _symlink(path: str, shown: str) -> ToolError:
    where = f"{path!r} is a symlink" if shown == path else f"{path!r} passes through a symlink"
    if shown != path:
        where += f" ({shown!r})"
    return ToolError(
        f"{where}: the file tools do not follow symlinks, which could lead outside the workspace"
    )


class NoSuchFile(ToolError):
    """The path names nothing in the workspace (its text says which path)."""


class Workspace:
    """The room's workspace, reached only through directory descriptors."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def parts(self, path: str) -> list[str]:
        """`path` as names below the workspace (`..` folded, an absolute path inside the
        workspace accepted); ToolError if it points outside."""
        if "\x00" in path:
            raise ToolError(f"path {path!r} contains a NUL character")
        norm = posixpath.normpath(path or ".")
        if norm.startswith("/"):
            for root in {os.path.abspath(self.root), os.path.realpath(self.root)}:
                if norm == root or norm.startswith(root.rstrip("/") + "/"):
                    norm = posixpath.relpath(norm, root)
                    break
            else:
                raise self._outside(path)
        names = [] if norm == "." else norm.split("/")
        if names and names[0] == "..":
            raise self._outside(path)
        return names

    def _outside(self, path: str) -> ToolError:
        return ToolError(f"path {path!r} is outside the workspace ({self.root.resolve()})")

    def _open_root(self) -> int:
        try:  # the workspace itself may be a symlink: the operator chose where it is
            return os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise ToolError(f"the workspace {self.root} cannot be opened: {exc.strerror}") from None

    def _descend(self, names: list[str], path: str, *, create: bool = False) -> int:
        """An O_PATH descriptor of the directory `names` leads to (made when `create`).
        FileNotFoundError when a component is missing; ToolError for anything else."""
        fd = self._open_root()
        try:
            for i, name in enumerate(names):
                shown = "/".join(names[: i + 1])
                try:
                    nxt = self._step(fd, name, create)
                except FileNotFoundError:
                    raise
                except OSError as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise ToolError(f"{shown!r} cannot be opened: {exc.strerror}") from None
                    if _lkind(fd, name) == "symlink":
                        raise _symlink(path, shown) from None
                    raise ToolError(f"{shown!r} is not a directory") from None
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    @staticmethod
    def _step(fd: int, name: str, create: bool) -> int:
        try:
            return os.open(name, _DIR, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
        with suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=fd)
        return os.open(name, _DIR, dir_fd=fd)  # whatever is there now, opened the same way

    def read(self, path: str, limit: int) -> tuple[bytes, int]:
        """At most `limit` bytes of the regular file at `path`, and the file's size."""
        names = self.parts(path)
        if not names:
            raise ToolError(f"{path!r} is a directory; use list_dir")
        try:
            parent = self._descend(names[:-1], path)
            try:
                fd = os.open(names[-1], _READ, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _symlink(path, path) from None
                if exc.errno == errno.ENXIO:  # a socket
                    raise ToolError(f"{path!r} is not a regular file") from None
                raise
            finally:
                os.close(parent)
        except FileNotFoundError:
            raise NoSuchFile(f"no such file: {path!r}") from None
        except ToolError:
            raise
        except OSError as exc:
            raise ToolError(f"{path!r} cannot be opened: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{path!r} is a directory; use list_dir")
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{path!r} is not a regular file")
            data = bytearray()
            while len(data) < limit:
                chunk = os.read(fd, min(limit - len(data), _CHUNK))
                if not chunk:
                    break
                data += chunk
            return bytes(data), st.st_size
        finally:
            os.close(fd)

    def write(self, path: str, data: bytes) -> str:
        """Replace the regular file at `path` whole (making its parent directories);
        returns its path in the workspace."""
        names = self.parts(path)
        if not names:
            raise ToolError(f"{path!r} is a directory")
        try:
            parent = self._descend(names[:-1], path, create=True)
        except FileNotFoundError:  # a parent was removed while it was being made
            raise ToolError(f"{path!r}: its directory changed while it was being made") from None
        try:
            try:
                st = os.stat(names[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{path!r} is a directory")
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise _symlink(path, path)
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{path!r} is not a regular file")
            mode = stat.S_IMODE(st.st_mode) if st is not None else 0o644
            try:
                replace_at(parent, names[-1], data, mode)
            except IsADirectoryError:  # it became one after the check
                raise ToolError(f"{path!r} is a directory") from None
            except OSError as exc:
                raise ToolError(f"{path!r} cannot be written: {exc.strerror}") from None
        finally:
            os.close(parent)
        return "/".join(names)

    def entries(self, path: str) -> list[dict[str, Any]]:
        """The directory at `path`, sorted by name: each entry's name, kind (file, dir,
        symlink, other) and, for a regular file, size. A symlink is never followed."""
        names = self.parts(path)
        try:
            at = self._descend(names, path)
        except FileNotFoundError:
            raise ToolError(f"no such directory: {path!r}") from None
        try:
            fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=at)
        finally:
            os.close(at)
        try:
            with os.scandir(fd) as it:
                found = sorted(it, key=lambda e: e.name)
            out = []
            for entry in found:
                try:
                    st = entry.stat(follow_symlinks=False)  # fstatat on the directory's fd
                except FileNotFoundError:  # removed since it was listed
                    continue
                kind = _KINDS.get(stat.S_IFMT(st.st_mode), "other")
                size = st.st_size if kind == "file" else None
                out.append({"name": entry.name, "kind": kind, "size": size})
            return out
        finally:
            os.close(fd)


def _lkind(dir_fd: int, name: str) -> str:
    """What `name` is now, for an error message only (it may change at any time)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return "gone"
    return _KINDS.get(stat.S_IFMT(st.st_mode), "other")
