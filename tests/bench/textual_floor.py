"""The start floor for the console benchmark: a minimal app on the console's stack.

    .venv/bin/python tests/bench/textual_floor.py

An app with the console's kinds of widget (three DataTables, an Input, Statics) and no
stylesheet of its own, which does the least the console's chosen stack must do before its
first full screen: define a pydantic model and validate one (the runtime's config, events
and messages are pydantic models), and open a new SQLite file through aiosqlite inside an
anyio task group (the truth layer), then show that it did. Run as bench_console runs the
console (run_test, 160x48). Prints the milliseconds from process start to the frame that
shows the store open: whatever the console does beyond that is the console's own start.
"""

from __future__ import annotations

import time

T_IMPORT = time.perf_counter()

import asyncio  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

gc.disable()  # as the console starts

import aiosqlite  # noqa: E402
import anyio  # noqa: E402
from pydantic import BaseModel  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.containers import Horizontal, Vertical  # noqa: E402
from textual.widgets import DataTable, Input, Static  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.bench.started import process_age  # noqa: E402


class Settings(BaseModel):
    room: str
    fps: int = 30


class Minimal(App[None]):
    def __init__(self, store: Path) -> None:
        super().__init__()
        self.store, self.opened = store, False

    def compose(self) -> ComposeResult:
        yield Static("status", id="status")
        with Horizontal():
            with Vertical():
                yield Static("chat")
                yield Input()
            with Vertical():
                yield DataTable()
                yield DataTable()
                yield DataTable()
        yield Static("keys")

    def on_mount(self) -> None:
        for table in self.query(DataTable):
            table.add_columns("time", "thread", "state")
        self.run_worker(self.open_store())

    async def open_store(self) -> None:
        settings = Settings.model_validate({"room": "floor"})
        async with anyio.create_task_group(), aiosqlite.connect(self.store) as db:
            await db.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, started REAL)")
            await db.execute("INSERT INTO runs VALUES (?, ?)", (settings.room, time.time()))
            await db.commit()
        self.query_one("#status", Static).update(f"{settings.room}: store open")
        self.opened = True


async def first_paint(store: Path) -> float:
    app = Minimal(store)
    painted = asyncio.Event()
    app.post_display_hook = lambda: app.opened and painted.set()  # type: ignore[func-returns-value]
    async with app.run_test(size=(160, 48)):
        await painted.wait()
        return time.perf_counter()


if __name__ == "__main__":
    age_at_import = process_age() - (time.perf_counter() - T_IMPORT)
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:  # removed once measured
        at = asyncio.run(first_paint(Path(tmp) / "execution.db"))
    print(f"{(age_at_import + at - T_IMPORT) * 1000:.0f}")
