"""What the properties share: throwaway rooms, the command line captured, a time bound, and
the checks that say a room is intact and an error is one line."""

from __future__ import annotations

import contextlib
import io
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from hypothesis import settings

from engine.cli import main

T = TypeVar("T")
# The budget of a property whose examples open a room or run a turn (tens of milliseconds
# each): half the profile's.
ROOMY = settings(max_examples=max(10, settings.default.max_examples // 2))


@contextlib.contextmanager
def scratch(template: Path | None = None) -> Iterator[Path]:
    """A fresh folder for one example (a copy of `template`'s room when given), removed after."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        room = Path(tmp) / "room"
        if template is not None:
            shutil.copytree(template, room)
        else:
            room.mkdir()
        yield room


def cli(*argv: str) -> tuple[int, str, str]:
    """`agentdeck ARGV` in this process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    """`err` when it is one line of text and no traceback; else the test fails."""
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.endswith("\n"), f"not one line: {err!r}"
    return err


def integrity(db: Path) -> str:
    """PRAGMA integrity_check of a room's execution.db ("ok" when intact)."""
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        conn.close()


def rows(db: Path, sql: str, *params: object) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def within(seconds: float, fn: Callable[[], T]) -> T:
    """`fn()` in a thread, failing the example if it has not returned after `seconds`.

    A cancel scope cannot stop a computation that never yields (a schedule walking to year
    9999 in a worker thread); a thread that is still alive at the bound is the evidence.
    """
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test below
            box["error"] = exc

    worker = threading.Thread(target=run, name="fuzz-within", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise AssertionError(f"still running after {seconds:g}s: a hang")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
