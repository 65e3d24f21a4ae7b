"""The console hosting one worker of a cluster shows, live, a turn another worker runs
(issue 18; engine/cluster/relay.py): its call waiting for a decision reaches the decision
queue, its conversation the open thread's chat, and approving the call by keyboard here
gets the turn done over there."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.widgets.decision_queue import DecisionQueue
from engine.lifecycle import TurnStatus
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.console.conftest import build
from tests.console.helpers import SIZE, started, until
from tests.console.scheduler_scenes import message
from tests.helpers import on
from tests.test_cluster_runtime import cluster_config


@pytest.mark.anyio
async def test_a_call_another_worker_runs_is_decided_from_this_console(
    tmp_path: Path, room: Path, pg_url: str
) -> None:
    room.mkdir(parents=True)
    (room / "agentdeck.toml").write_text(
        f'[store]\nurl = "{pg_url}"\n[cluster]\nenabled = true\nworker = "deck"\n'
        "lease_seconds = 2\n"
    )
    async with Runtime.open(tmp_path / "w1", kind="run", provider=OfflineModel(delay=0),
                            config=cluster_config(pg_url, "w1")) as far:  # fmt: skip
        app = build(room)
        async with app.run_test(size=SIZE) as pilot:
            main = await started(pilot)
            rt = app.host.runtime  # type: ignore[attr-defined]
            assert rt.coordinator.name == "deck"
            await main.switch_thread("far")  # its chat is open when the turn runs
            async with rt.coordinator._claim_lock:  # this worker claims nothing: w1 runs it all
                handle = await far.submit(message("far", "please run `echo from-far`"))
                queue = main.query_one(DecisionQueue)
                await until(pilot, lambda: len(main.state.pending) == 1, "the call waits here")
                [call] = main.state.pending.values()
                assert (call.turn_id, call.thread_id) == (handle.turn_id, "far")
                await until(pilot, lambda: call.call_id in queue.rows, "it is in the queue")
                queue.focus()
                await pilot.pause()
                await pilot.press("a")
                await until(pilot, lambda: main.state.turns[handle.turn_id].status
                            == TurnStatus.DONE, "the turn is done")  # fmt: skip
                await until(
                    pilot,
                    lambda: not main.state.pending and call.call_id not in queue.rows,
                    "the queue redrawn without it",
                )  # (a frame later)
            ran = await on(rt.store).fetchall(
                "SELECT DISTINCT run_id FROM steps WHERE turn_id = ?", (handle.turn_id,))  # fmt: skip
            assert [r[0] for r in ran] == [far.run_id], "w1 ran every step, the resumed too"
            result = await on(rt.store).fetchone(
                "SELECT status, result FROM tool_calls WHERE id = ?", (call.call_id,))  # fmt: skip
            assert result[0] == "succeeded" and "from-far" in result[1]
            await until(pilot, lambda: [e.role for e in main.state.thread("far").entries][:2]
                        == ["user", "assistant"], "the conversation is in the chat")  # fmt: skip
            assert "echo from-far" in main.state.thread("far").entries[0].text
            await app.shutdown()
