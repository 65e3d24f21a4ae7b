"""The start floor for the console benchmark: a minimal Textual app, first paint.

    .venv/bin/python tests/bench/textual_floor.py

An app with the console's kinds of widget (three DataTables, an Input, Statics) and no
stylesheet or code of its own, run as bench_console runs the console (run_test, 160x48).
Prints the milliseconds from process start to its first frame: whatever the console does
beyond that is the console's own start.
"""

from __future__ import annotations

import time

T_IMPORT = time.perf_counter()

import asyncio  # noqa: E402
import gc  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

gc.disable()  # as the console starts

import pydantic  # noqa: E402, F401 - the runtime's models need it, as the console does
from textual.app import App, ComposeResult  # noqa: E402
from textual.containers import Horizontal, Vertical  # noqa: E402
from textual.widgets import DataTable, Input, Static  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.bench.started import process_age  # noqa: E402


class Minimal(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("status")
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


async def first_paint() -> float:
    app = Minimal()
    painted = asyncio.Event()
    app.post_display_hook = painted.set
    async with app.run_test(size=(160, 48)):
        await painted.wait()
        return time.perf_counter()


if __name__ == "__main__":
    age_at_import = process_age() - (time.perf_counter() - T_IMPORT)
    at = asyncio.run(first_paint())
    print(f"{(age_at_import + at - T_IMPORT) * 1000:.0f}")
