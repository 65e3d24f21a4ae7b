"""The file tools against a workspace that changes under them: no escape, no hang, no litter.

The race test flips `workspace/d` between a directory, a regular file, a symlink to the
outside (to a directory and to a file) and a FIFO while the tools run, for a bounded number
of rounds; a thread join with a timeout is the guard that catches a hang.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from engine.tools import ToolContext
from engine.tools import builtin as bt

OUTSIDE = "OUTSIDE-CONTENT"
ROUNDS = 1500  # rounds of tool calls; the swapper flips `d` until they are done
MAX_SWAPS = 300_000
HANG_GUARD = 60.0  # seconds a join waits before calling it a hang


def _release_fifos(*roots: Path) -> None:
    """Open every FIFO for writing (non-blocking), so that a reader stuck in open() returns."""
    for root in roots:
        for base, dirs, files in os.walk(root):
            for name in dirs + files:
                path = os.path.join(base, name)
                with suppress(OSError):
                    if stat.S_ISFIFO(os.lstat(path).st_mode):
                        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def _all_files(root: Path) -> list[str]:
    return [os.path.join(b, n) for b, _, names in os.walk(root) for n in names]


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads often, so the swapper lands between a tool's check and its open."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def test_swapping_a_directory_for_a_symlink_or_fifo_never_escapes_or_hangs(
    tmp_path: Path, fast_switching: None
) -> None:
    ws, out, trash = tmp_path / "ws", tmp_path / "outside", tmp_path / "trash"
    for p in (ws, out, trash):
        p.mkdir()
    (out / "secret.txt").write_text(OUTSIDE)
    (out / "only-outside").write_text(OUTSIDE)
    outside_before = sorted(os.listdir(out))
    d = ws / "d"
    ctx = ToolContext(workspace=ws)
    done = threading.Event()
    escapes: list[str] = []
    counts = {"calls": 0, "swaps": 0}

    def swapper() -> None:
        for i in range(MAX_SWAPS):
            if done.is_set():
                return
            with suppress(OSError):  # whatever `d` is now goes out of the workspace
                os.rename(d, trash / str(i))
            with suppress(OSError):  # write_file may have made `d` a directory again
                match i % 5:
                    case 0:
                        os.symlink(out, d)
                    case 1:
                        os.symlink(out / "secret.txt", d)
                    case 2:
                        os.mkfifo(d)
                    case 3:
                        d.mkdir()
                        (d / "secret.txt").write_text("inside")
                    case 4:
                        d.write_text("inside")
            counts["swaps"] += 1

    calls: list[tuple[Any, dict[str, Any]]] = [
        (bt.read_file, {"path": "d/secret.txt"}),
        (bt.read_file, {"path": "d"}),
        (bt.list_dir, {"path": "d"}),
        (bt.write_file, {"path": "d/new.txt", "text": "written"}),
        (bt.write_file, {"path": "d", "text": "written"}),
    ]

    def caller() -> None:
        try:
            for _ in range(ROUNDS):
                for t, args in calls:
                    try:
                        value = t.fn(**args, ctx=ctx)
                    except Exception:  # refusals (ToolError) and races the tool lost
                        continue
                    finally:
                        counts["calls"] += 1
                    if OUTSIDE in str(value) or "only-outside" in str(value):
                        escapes.append(f"{t.name}({args['path']!r}) -> {str(value)[:60]}")
        finally:
            done.set()

    threads = [threading.Thread(target=f, daemon=True) for f in (swapper, caller)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join(HANG_GUARD)
        hung = [t for t in threads if t.is_alive()]
        assert not hung, f"a tool hung after {counts['calls']} calls (a FIFO opened blocking?)"
    finally:
        done.set()
        _release_fifos(ws, trash)
        for t in threads:
            t.join(HANG_GUARD)
    assert counts["swaps"] > 100 and counts["calls"] == ROUNDS * len(calls)
    assert escapes == [], f"{len(escapes)} escapes, e.g. {escapes[:3]}"
    assert sorted(os.listdir(out)) == outside_before, "a file was created outside"
    assert (out / "secret.txt").read_text() == OUTSIDE
    litter = [p for p in _all_files(tmp_path) if p.endswith(".tmp")]
    assert litter == [], f"{len(litter)} temporary files left, e.g. {litter[:3]}"


@pytest.mark.anyio
async def test_list_dir_reports_a_symlink_as_a_symlink_and_nothing_of_its_target(
    tmp_path: Path,
) -> None:
    ws, out = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    out.mkdir()
    (out / "big").write_bytes(b"x" * 12345)
    (ws / "to_dir").symlink_to(out)
    (ws / "to_file").symlink_to(out / "big")
    (ws / "dangling").symlink_to(tmp_path / "nothing")
    (ws / "plain").write_text("abc")
    t = bt.list_dir
    result = await t.call(t.validate({}), ToolContext(workspace=ws))
    assert result.status == "success", result.message
    assert result.content == [
        {"name": "dangling", "kind": "symlink", "size": None},
        {"name": "plain", "kind": "file", "size": 3},
        {"name": "to_dir", "kind": "symlink", "size": None},
        {"name": "to_file", "kind": "symlink", "size": None},
    ]


@pytest.mark.anyio
async def test_symlinks_are_not_followed_even_when_they_point_inside(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("hi")
    (tmp_path / "inner").symlink_to(tmp_path / "real")
    (tmp_path / "alias.txt").symlink_to(tmp_path / "real" / "f.txt")
    ctx = ToolContext(workspace=tmp_path)
    for t, args in [
        (bt.read_file, {"path": "inner/f.txt"}),
        (bt.read_file, {"path": "alias.txt"}),
        (bt.list_dir, {"path": "inner"}),
        (bt.write_file, {"path": "inner/g.txt", "text": "x"}),
        (bt.write_file, {"path": "alias.txt", "text": "x"}),
    ]:
        result = await t.call(t.validate(args), ctx)
        assert result.status == "error" and "do not follow symlinks" in result.message, args
    assert (tmp_path / "alias.txt").is_symlink() and (
        tmp_path / "real" / "f.txt"
    ).read_text() == "hi"
    assert sorted(os.listdir(tmp_path / "real")) == ["f.txt"]


@pytest.mark.anyio
async def test_absolute_paths_inside_the_workspace_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("abc")
    ctx = ToolContext(workspace=tmp_path)
    t = bt.read_file
    result = await t.call(t.validate({"path": str(tmp_path / "a.txt")}), ctx)
    assert result.status == "success" and result.content == "abc"


@pytest.mark.anyio
async def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old")
    target.chmod(0o600)

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    t = bt.write_file
    with monkeypatch.context() as m:
        m.setattr(os, "fsync", broken_fsync)
        result = await t.call(
            t.validate({"path": "keep.txt", "text": "new"}), ToolContext(tmp_path)
        )
    assert result.status == "error" and "No space left on device" in result.message
    assert os.listdir(tmp_path) == ["keep.txt"] and target.read_text() == "old"
    ok = await t.call(t.validate({"path": "keep.txt", "text": "new"}), ToolContext(tmp_path))
    assert ok.status == "success" and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # the file keeps its mode
