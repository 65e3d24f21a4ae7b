"""Usage, cost and budgets (issue 33): tokens in, out and cached with their cost per step,
turn, thread, group, room and day; budgets that stop a turn (`budget`) or hold a group's
new turns and say why; raised through the API; kept across a restart."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine.api.local import LocalClient
from engine.config import (
    BudgetConfig,
    Config,
    GroupSettings,
    LimitSettings,
    ModelConfig,
    PriceSettings,
)
from engine.domain.events import Notice
from engine.domain.messages import Message
from engine.domain.usage import Limit, Scope, Usage, over, parse_scope
from engine.providers.base import ModelEvent, ModelRequest, UsageEvent
from engine.providers.prices import Priced, priced
from engine.room import Room
from tests.helpers import rows, runtime
from tests.scripted import Reply, ScriptedModel, after_tools

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

PRICE = PriceSettings(input=1.0, output=2.0, cached=0.5)  # dollars per million tokens
# one inference: 1000 in (400 of them cached), 100 out: 600 + 400 * 0.5 + 100 * 2 = 1000
INFERENCE = 1000 / 1_000_000


class Metered(ScriptedModel):
    """A scripted model that reports 1000 tokens in (400 cached) and 100 out."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for event in super().stream(request):
            if isinstance(event, UsageEvent):
                event = UsageEvent(input_tokens=1000, output_tokens=100, cached_tokens=400)
            yield event


def adds(request: ModelRequest) -> Reply:
    """One `add` call, then an answer: two inferences a turn."""
    if after_tools(request.messages):
        return Reply(text="done")
    return Reply(calls=[("add", {"a": 1, "b": 2})])


def loops(request: ModelRequest) -> Reply:
    """An agent that never stops calling tools."""
    return Reply(calls=[("add", {"a": 1, "b": 2})])


def task(thread: str, text: str = "go") -> Message:
    return Message(origin="task", sender="self", thread_id=thread, text=text)


def chat(thread: str, text: str = "hi") -> Message:
    return Message(origin="invoke", sender="test", thread_id=thread, text=text)


async def test_totals_per_turn_thread_group_and_room_are_the_sums_of_the_steps(
    tmp_path: Path,
) -> None:
    config = Config(model=ModelConfig(price=PRICE))
    async with runtime(tmp_path, Metered(adds), config=config) as rt:
        for m in (chat("c1"), chat("c1"), chat("c2"), task("t1")):
            assert (await rt.run_turn(m)).status == "done"
        steps = await rows(rt, "SELECT s.turn_id, t.thread_id, s.input_tokens, s.output_tokens,"
                               " s.cached_tokens, s.cost FROM steps s JOIN turns t"
                               " ON t.id = s.turn_id WHERE s.input_tokens > 0")  # fmt: skip
        turns = await rows(rt, "SELECT id, input_tokens, output_tokens, cached_tokens, cost,"
                               " unpriced FROM turns")  # fmt: skip
        report = await LocalClient(rt).usage(by="thread")
        groups = await LocalClient(rt).usage(by="group")
        stats = rt.statistics()
    assert len(steps) == 8  # two inferences a turn
    assert all(s[2:5] == (1000, 100, 400) and s[5] == pytest.approx(INFERENCE) for s in steps)
    for turn_id, i, o, c, cost, unpriced in turns:
        mine = [s for s in steps if s[0] == turn_id]
        assert (i, o, c, unpriced) == (sum(s[2] for s in mine), sum(s[3] for s in mine),
                                       sum(s[4] for s in mine), 0)  # fmt: skip
        assert cost == pytest.approx(sum(s[5] for s in mine))
    by_thread = {r.key: r for r in report.rows}
    for thread in ("c1", "c2", "t1"):
        mine = [s for s in steps if s[1] == thread]
        row = by_thread[thread]
        assert (row.input_tokens, row.output_tokens, row.cached_tokens, row.steps) == (
            sum(s[2] for s in mine),
            sum(s[3] for s in mine),
            sum(s[4] for s in mine),
            len(mine),
        )
        assert row.cost == pytest.approx(sum(s[5] for s in mine))
    assert report.total.input_tokens == 8000 and report.total.cost == pytest.approx(8 * INFERENCE)
    assert {r.key: r.steps for r in groups.rows} == {"chat": 6, "task": 2}
    today = {g.name: g.today for g in stats.groups}
    assert today["chat"] is not None and today["chat"].cost == pytest.approx(6 * INFERENCE)
    assert stats.today is not None and stats.today.tokens == 8 * 1100


async def test_a_model_with_no_price_counts_its_tokens_as_unpriced(tmp_path: Path) -> None:
    async with runtime(tmp_path, Metered(adds)) as rt:  # a scripted model: in no price table
        await rt.run_turn(chat("c1"))
        turn = await rows(rt, "SELECT input_tokens, output_tokens, cost, unpriced FROM turns")
        steps = await rows(rt, "SELECT cost FROM steps WHERE input_tokens > 0")
        report = await LocalClient(rt).usage()
    assert turn == [(2000, 200, 0.0, 2200)]
    assert steps == [(None,), (None,)]  # no price: none made up
    assert (report.total.cost, report.total.unpriced) == (0.0, 2200)


async def test_a_turn_over_its_budget_stops_with_budget_before_the_inference_that_passes_it(
    tmp_path: Path,
) -> None:
    config = Config(budget=BudgetConfig(turn=LimitSettings(tokens=2500)))
    async with runtime(tmp_path, Metered(loops), config=config) as rt:
        outcome = await rt.run_turn(chat("c1"))
        spent = await rows(rt, "SELECT input_tokens + output_tokens, rounds FROM turns")
        calls = await rows(rt, "SELECT count(*) FROM tool_calls")
    assert (outcome.status, outcome.reason) == ("done", "budget")
    # 1100 a step: after two (2200) the third would pass 2500, so it never starts
    assert spent == [(2200, 2)] and calls == [(2,)]
    assert "the turn's budget: 2.2k of 2.5k tokens" in (outcome.detail or "")
    assert "agentdeck budget turn" in (outcome.detail or "")


async def test_a_group_over_its_daily_budget_holds_new_turns_says_why_and_a_raise_lets_them_go(
    tmp_path: Path,
) -> None:
    config = Config(model=ModelConfig(price=PRICE),
                    groups={"task": GroupSettings(budget=LimitSettings(cost=0.003))})  # fmt: skip
    async with runtime(tmp_path, Metered(adds), config=config) as rt:
        client = LocalClient(rt)
        assert (await rt.run_turn(task("t1"))).reason == "natural"  # $0.002
        stopped = await rt.run_turn(task("t2"))  # $0.003 after one step: the next would pass
        assert stopped.reason == "budget"
        assert stopped.detail == ("group task's daily budget: $0.0030 of $0.0030 today "
                                  "(raise: agentdeck budget group:task)")  # fmt: skip
        held = await rt.submit(task("t3"))
        stats = await client.statistics()
        why = [q.waits_because for q in stats.queued if q.request_id == held.turn_id]
        assert why == ["group task's daily budget reached: $0.0030 of $0.0030 today"]
        assert [g.held for g in stats.groups if g.name == "task"] == [why[0]]
        assert (await rt.run_turn(chat("c1"))).status == "done"  # another group runs
        view = await client.budgets()
        assert [(b.scope, b.reached) for b in view.budgets] == [
            ("group:task", "$0.0030 of $0.0030")
        ]
        assert [h.scope for h in view.held] == ["group:task"]
        view = await client.set_budget("group:task", cost=0.01)
        assert view.held == [] and view.budgets[0].source == "set"
        assert (await rt.wait_turn(held.turn_id)).status == "done"


async def test_budgets_and_the_days_spend_survive_a_restart(tmp_path: Path) -> None:
    config = Config(model=ModelConfig(price=PRICE))
    said: list[str] = []
    async with runtime(tmp_path, Metered(adds), config=config) as rt:
        rt.subscribe(lambda e: said.append(e.text) if isinstance(e, Notice) else None)
        await LocalClient(rt).set_budget("thread:t1", tokens=3000)
        await rt.run_turn(task("t1"))  # 2200
        await rt.run_turn(task("t1", "again"))  # the second stops at 2200 + 1100 > 3000
        ends = await rows(rt, "SELECT reason FROM turns ORDER BY created_at")
    assert ends == [("natural",), ("budget",)]
    assert said == [
        "the thread's daily budget reached: 3.3k of 3k tokens today: new turns of "
        "thread t1 wait (raise: agentdeck budget thread:t1)"
    ]
    async with runtime(tmp_path, Metered(adds), config=config, first_id=100) as rt:
        view = await LocalClient(rt).budgets()
        assert [(b.scope, b.tokens, b.source, b.set_by) for b in view.budgets] == [
            ("thread:t1", 3000, "set", "operator")
        ]
        assert view.today.usage.tokens == 3300
        held = await rt.submit(task("t1", "third"))
        stats = rt.statistics()
        why = [q.waits_because for q in stats.queued if q.request_id == held.turn_id]
        assert why == ["the thread's daily budget reached: 3.3k of 3k tokens today"]
        assert (await rt.run_turn(task("t2"))).status == "done"  # another thread runs
        await LocalClient(rt).set_budget("thread:t1", clear=True)  # back to the toml's: none
        assert (await rt.wait_turn(held.turn_id)).status == "done"


async def test_a_room_budget_holds_every_group_and_stops_a_running_turn(tmp_path: Path) -> None:
    config = Config(budget=BudgetConfig(room=LimitSettings(tokens=3000)))
    async with runtime(tmp_path, Metered(adds), config=config) as rt:
        await rt.run_turn(chat("c1"))  # 2200
        outcome = await rt.run_turn(task("t1"))  # 2200 + 1100 passes 3000 at its second step
        assert (outcome.status, outcome.reason) == ("done", "budget")
        assert "the room's daily budget: 3.3k of 3k tokens today" in (outcome.detail or "")
        held = await rt.submit(chat("c2"))
        stats = rt.statistics()
        assert stats.held == "the room's daily budget reached: 3.3k of 3k tokens today"
        assert [q.waits_because for q in stats.queued] == [stats.held]
        await LocalClient(rt).set_budget("room")  # no limits: no budget for the room
        assert (await rt.wait_turn(held.turn_id)).status == "done"


async def test_a_new_utc_day_lets_held_turns_go(tmp_path: Path) -> None:
    now = [1_800_000_000.0]  # 2027-01-15 08:00 UTC
    config = Config(budget=BudgetConfig(thread=LimitSettings(tokens=2200)))
    async with runtime(tmp_path, Metered(adds), config=config, clock=lambda: now[0]) as rt:
        await rt.run_turn(chat("c1"))
        held = await rt.submit(chat("c1", "more"))
        assert rt.statistics().queued[0].waits_because.startswith("the thread's daily budget")
        now[0] += 86400
        assert rt.budgets.day_changed()
        rt.supervisor.pump()
        assert (await rt.wait_turn(held.turn_id)).status == "done"
        report = await LocalClient(rt).usage(by="day", since="2027-01-15")
    assert [r.key for r in report.rows] == ["2027-01-16", "2027-01-15"]


def test_scopes_limits_and_words() -> None:
    assert parse_scope("group:chore") == Scope("group", "chore")
    assert parse_scope("thread") == Scope("thread") and str(Scope("thread", "a:b")) == "thread:a:b"
    for bad in ("", "group:", "day", "group: ", "thread:"):
        with pytest.raises(ValueError):
            parse_scope(bad)
    assert over(Usage(10, 0), Limit(tokens=10)) == "10 of 10 tokens"  # reached: stop
    assert over(Usage(5, 0), Limit(tokens=10)) is None
    assert over(Usage(5, 0), Limit(tokens=10), Usage(6, 0)) == "5 of 10 tokens"  # would pass
    assert over(Usage(cost=1.5), Limit(cost=1.0)) == "$1.50 of $1.00"


async def test_prices_come_from_the_table_the_rooms_own_or_none(tmp_path: Path) -> None:
    class Known:
        name, model, base_url = "openai", "gpt-4o", "https://api.openai.com/v1"

    table = priced(Known(), None)  # type: ignore[arg-type]
    cost = await table.cost(1_000_000, 0, 0)
    assert cost is not None and cost > 0  # the maintained table has gpt-4o's price
    Known.model = "no-such-model-anywhere"
    assert await priced(Known(), None).cost(1000, 10, 0) is None  # type: ignore[arg-type]
    Known.base_url = "http://127.0.0.1:8000/v1"  # a local server: no price
    assert await priced(Known(), None).cost(1000, 10, 0) is None  # type: ignore[arg-type]
    own = priced(Known(), PRICE)  # type: ignore[arg-type]
    assert await own.cost(1000, 100, 400) == pytest.approx(INFERENCE)
    assert await Priced(free=True).cost(10**6, 10**6, 0) == 0.0

    class Offline:
        name, model = "offline", "offline"

    assert priced(Offline(), None).free  # type: ignore[arg-type]


async def test_usage_and_budgets_over_the_rooms_socket(tmp_path: Path) -> None:
    from engine.api.client import NotFound
    from engine.api.remote import RemoteClient
    from tests.test_api import body, raw, served, settled

    room = tmp_path / "room"
    async with served(room), RemoteClient(Room.at(room)) as client, raw(room) as http:
        turn = await client.submit(body("calc 2+2"))
        assert (await settled(client, turn.turn_id)).status == "done"
        report = await client.usage(by="model")
        assert [r.key for r in report.rows] == ["offline:offline-rules-1"]
        assert report.total.input_tokens > 0 and report.total.cost == 0.0  # free
        view = await client.set_budget("group:chat", tokens=10)
        assert [(h.scope, h.why.split(":")[0]) for h in view.held] == [
            ("group:chat", "group chat's daily budget reached")
        ]
        with pytest.raises(NotFound):
            await client.set_budget("group:nosuch", cost=1.0)
        for bad in ({"scope": "day"}, {"scope": "room", "cost": -1}, {"scope": "room", "x": 1},
                    {"scope": "room", "cost": "1"}, {"scope": "room", "tokens": 1.5},
                    {"scope": "room", "tokens": 5, "clear": True}):  # fmt: skip
            r = await http.put("/v1/budgets", json=bad)
            assert r.status_code == 422, (bad, r.text)
        for query in ("since=yesterday", "by=week", "limit=0"):
            assert (await http.get(f"/v1/usage?{query}")).status_code == 422, query
        assert [b.scope for b in (await client.budgets()).budgets] == ["group:chat"]


def test_a_group_on_another_model_does_not_take_the_rooms_price() -> None:
    from engine.config import GroupSettings
    from engine.turn.models import Models

    config = Config(model=ModelConfig(price=PRICE), groups={
        "chore": GroupSettings(model=ModelConfig(provider="offline")),
        "task": GroupSettings(model=ModelConfig(context_window=4096)),  # the same model
    })  # fmt: skip
    models = Models(config, OfflineFree(), make=lambda m: OfflineFree(f"w{m.context_window}"))
    assert models.priced(models.choose("c1", "chore")).free  # the offline model: free
    assert models.priced(models.choose("t1", "task")).rates == PRICE  # the room's, still


class OfflineFree:
    name = "offline"

    def __init__(self, model: str = "offline-rules-1") -> None:
        self.model = model
