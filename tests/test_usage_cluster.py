"""Budgets hold across a cluster's workers (issue 33): what one worker's turns spent holds
another worker's new turns of the same group, and a budget raised through one worker lets
them go on every worker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest

from engine.api.local import LocalClient
from engine.config import GroupSettings, LimitSettings
from engine.domain.messages import Message
from engine.domain.usage import Usage
from engine.lifecycle import TurnStatus
from engine.runtime import Runtime
from engine.turn.state import TurnState
from tests.scripted import add
from tests.test_cluster_runtime import cluster_config
from tests.test_usage import Metered, adds
from tests.wait import until

pytestmark = pytest.mark.anyio

HELD = "group task's daily budget reached: 2.2k of 2.2k tokens today"


def task(thread: str) -> Message:
    return Message(origin="task", sender="self", thread_id=thread, text="go")


@asynccontextmanager
async def two_workers(tmp_path: Path, url: str) -> AsyncIterator[list[Runtime]]:
    async with AsyncExitStack() as stack:
        rts = []
        for name in ("w0", "w1"):
            config = cluster_config(url, name).model_copy(
                update={"groups": {"task": GroupSettings(budget=LimitSettings(tokens=2200))}}
            )
            rts.append(await stack.enter_async_context(Runtime.open(
                tmp_path / name, kind="run", provider=Metered(adds), tools=[add],
                config=config)))  # fmt: skip
        yield rts


def why_held(*workers: Runtime) -> list[str]:
    return [q.waits_because for rt in workers for q in rt.statistics().queued]


async def test_a_group_budget_spent_on_one_worker_holds_the_others_turns(
    tmp_path: Path, pg_url: str
) -> None:
    async with two_workers(tmp_path, pg_url) as (a, b):
        first = await a.submit(task("t1"))
        assert (await a.wait_turn(first.turn_id)).reason == "natural"  # 2200 tokens
        for rt in (a, b):  # whichever ran it, the other reads it within its refresh
            await until(lambda: rt.budgets.spent_in("group:task").tokens,  # noqa: B023
                        "each worker sees the group's spend", ok=lambda n: n == 2200)  # fmt: skip
        b.budgets.groups, b.budgets.room = {}, Usage()  # as if it had not read it yet:
        turn = TurnState("t_x", "t9", TurnStatus.RUNNING, 0.0, group="task")
        stop = await b.budgets.stop_before(turn, Usage())  # the check reads the store
        assert stop is not None and stop.reason == "budget"
        await b.budgets.refresh()
        held = await b.submit(task("t2"))
        await until(
            lambda: why_held(a, b), "t2 held by the group's budget", ok=lambda w: w == [HELD]
        )
        steps = await b.store.fetchall(
            "SELECT count(*) FROM steps WHERE turn_id = %s", (held.turn_id,))  # fmt: skip
        assert steps[0][0] == 0  # it made no inference
        view = await LocalClient(b).set_budget("group:task", tokens=100_000)
        assert view.held == []
        await until(lambda: a.budgets.limit("group:task"), "w0 reads the raised budget",
                    ok=lambda limit: limit is not None and limit.tokens == 100_000)  # fmt: skip
        assert (await b.wait_turn(held.turn_id)).reason == "natural"
