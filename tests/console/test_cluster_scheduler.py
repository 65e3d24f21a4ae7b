"""The scheduler view of a console hosting one worker of a cluster (issue 18): a second
worker, in this process, runs a thread of its own on the same PostgreSQL database, and
the view lists every thread of the cluster with the worker that runs it (a column that a
runtime alone does not show: its snapshots stay as they were)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static

from console.screens.scheduler import CLUSTER_COLUMNS
from console.widgets.keyed_table import KeyedTable
from engine.runtime import Runtime
from tests.console.conftest import build
from tests.console.helpers import SIZE, started, until
from tests.console.scheduler_scenes import SLOW, SlowWhenAsked, message, open_scheduler
from tests.test_cluster_runtime import cluster_config


def cell(table: KeyedTable, row: str, column: str) -> str | None:
    return str(table.get_cell(row, column)) if row in table.rows else None


@pytest.mark.anyio
async def test_the_scheduler_shows_which_worker_runs_each_thread(
    tmp_path: Path, room: Path, pg_url: str
) -> None:
    room.mkdir(parents=True)
    (room / "agentdeck.toml").write_text(
        f'[store]\nurl = "{pg_url}"\n[cluster]\nenabled = true\nworker = "deck"\n'
        "lease_seconds = 20\n"
    )
    # Leases long enough for a loaded machine: with 2 s, a heartbeat starved past it lost
    # w1 its thread and "far" was never listed as w1's (a loaded run, load average 11).
    async with Runtime.open(tmp_path / "w1", kind="run", provider=SlowWhenAsked(),
                            config=cluster_config(pg_url, "w1", lease=20)) as far:  # fmt: skip
        await far.submit(message("far", f"{SLOW} over there"))  # w1 is alone: it runs it
        app = build(room, provider=SlowWhenAsked())
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot)
            rt = app.host.runtime  # type: ignore[attr-defined]
            assert rt.coordinator.name == "deck"
            assert far.coordinator.view is not None
            async with far.coordinator._claim_lock:  # w1 claims nothing meanwhile: "near" is ours
                await rt.submit(message("near", f"{SLOW} right here"))
                screen = await open_scheduler(pilot)
                table = screen.query_one("#sched-threads", KeyedTable)
                await until(pilot, lambda: cell(table, "near", "state") is not None
                            and cell(table, "far", "worker") == "w1",
                            "both threads listed",
                            seen=lambda: {t: (cell(table, t, "worker"), cell(table, t, "state"))
                                          for t in ("far", "near")})  # fmt: skip
            assert table.labels == CLUSTER_COLUMNS
            assert [cell(table, t, "worker") for t in ("far", "near")] == ["w1", "deck"]
            assert all("running" in str(cell(table, t, "state")) for t in ("far", "near"))
            assert screen.query_one("#sched-threads-pane").border_title == (
                "Threads of the cluster (2)")  # fmt: skip
            summary = str(screen.query_one("#sched-summary", Static).render())
            assert summary.startswith(" worker deck ")
            await app.shutdown()
