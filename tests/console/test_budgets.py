"""Usage and budgets in the console (issue 33): today's spend in the status bar, kept live
by the steps that end; a group its daily budget holds, in the scheduler view with why;
`b` to raise it (its held turn starts), and input the dialog refuses."""

from __future__ import annotations

import pytest

from console.screens.daily_budget import DailyBudgetScreen, read_cost, read_tokens
from console.spend import TodaySpend, budget_text
from console.widgets.groups_table import GroupsTable
from console.widgets.keyed_table import KeyedTable
from console.widgets.status_bar import StatusBar
from engine.api.usage_models import BudgetRow, BudgetsView, Held, Spend
from engine.domain.events import Notice, StepFinished
from engine.domain.usage import Limit, Usage, spent_text
from engine.lifecycle import StepStatus, TurnStatus
from tests.console.budget_scenes import (
    BUDGET_PREPARE,
    BUDGET_SCENES,
    HELLO_COST,
    held_task,
    priced,
    task_budget,
)
from tests.console.conftest import T0, build
from tests.console.helpers import SIZE, send, started, until
from tests.console.scheduler_scenes import open_scheduler

DAY = 86400.0


def finished(at: float, tokens: tuple[int, int], cost: float | None, step_id: int = 1):  # noqa: ANN201
    return StepFinished(at=at, thread_id="chat:main", turn_id="t_1", step_id=step_id,
                        step_kind="inference", status=StepStatus.SUCCEEDED,
                        input_tokens=tokens[0], output_tokens=tokens[1], cost=cost)  # fmt: skip


def view(day: str, today: Usage, held: dict[str, str] | None = None,
         budgets: tuple[str, ...] = ()) -> BudgetsView:  # fmt: skip
    return BudgetsView(day=day, today=Spend.of(today),
                       budgets=[BudgetRow(scope=s, tokens=None, cost=1.0, source="toml")
                                for s in budgets],
                       held=[Held(scope=k, why=v) for k, v in (held or {}).items()])  # fmt: skip


# -- what the console keeps, without Textual ----------------------------------------------


def test_today_adds_each_step_and_says_what_has_no_price() -> None:
    spend = TodaySpend()
    assert not spend.step(finished(T0, (10, 5), 0.5))  # not read yet: the read will have it
    spend.load(view("2026-01-01", Usage(100, 20, cost=1.0, steps=2)))
    assert spend.step(finished(T0, (10, 5), 0.25))
    assert spend.step(finished(T0, (1000, 200), None))  # a model with no known price
    assert not spend.step(finished(T0, (0, 0), None))  # a step that spent nothing
    assert spend.usage == Usage(1110, 225, cost=1.25, unpriced=1200, steps=4)
    assert spent_text(spend.usage) == "$1.25 · 1.3k tokens (1.2k no price)"
    only_unpriced = TodaySpend()
    only_unpriced.load(view("2026-01-01", Usage()))
    only_unpriced.step(finished(T0, (900, 300), None))
    assert spent_text(only_unpriced.usage or Usage()) == "1.2k tokens · no price"


def test_a_new_utc_day_starts_from_nothing() -> None:
    spend = TodaySpend()
    spend.load(view("2026-01-01", Usage(100, 20, cost=1.0, steps=2), {"room": "reached"}))
    assert not spend.step(finished(T0 - DAY, (10, 5), 0.5))  # yesterday's, seen late
    assert spend.usage == Usage(100, 20, cost=1.0, steps=2)
    assert spend.step(finished(T0 + DAY, (10, 5), 0.5))  # the next day's first step
    assert (spend.day, spend.usage, spend.held) == ("2026-01-02", Usage(10, 5, cost=0.5, steps=1),
                                                    {})  # fmt: skip
    assert spend.due(T0 + 2 * DAY)  # a day with no step: the room's budgets are read again
    assert spend.usage == Usage() and spend.day == "2026-01-03"


def test_holds_come_from_the_read_and_at_once_from_the_notice() -> None:
    spend = TodaySpend()
    spend.load(view("2026-01-01", Usage(), budgets=("group:chore", "turn")))
    assert not spend.due(T0)  # nothing held, nothing spent since the read
    notice = Notice(at=T0, level="warning", text=(
        "group chore's daily budget reached: $1.00 of $1.00 today: new turns of group chore "
        "wait (raise: agentdeck budget group:chore)"))  # fmt: skip
    assert spend.notice(notice)
    assert spend.held == {"group:chore": "group chore's daily budget reached: $1.00 of $1.00 today"}
    assert spend.held_text() == "group chore over budget"
    assert spend.due(T0)  # held: read again until the hold ends
    assert not spend.notice(Notice(at=T0, text="The room's API is not served: busy"))
    spend.load(view("2026-01-01", Usage(), {"room": "r", "group:a": "a", "thread:x": "x"}),
               spent=False)  # fmt: skip
    assert spend.held_text() == "room, group a, thread x over budget"
    spend.load(view("2026-01-01", Usage(), {"thread:x": "x", "thread:\x1b[2Jy" + "z" * 40: "y"}))
    assert spend.held_text() == "2 threads over budget"
    spend.load(view("2026-01-01", Usage(), {"thread:\x1b[2J": "y"}))
    assert spend.held_text() == "thread \\x1b[2J over budget"  # text, never a terminal's
    spend.load(view("2026-01-01", Usage(), budgets=("group:chore",)))
    spend.step(finished(T0, (1, 1), 0.0))
    assert spend.due(T0)  # spending in a room with daily budgets: a hold may have begun


def test_budget_text_says_spend_against_each_cap() -> None:
    spent = Usage(1000, 200, cost=1.2)
    assert budget_text(spent, Limit(cost=5.0)) == "$1.20 / $5.00"
    assert budget_text(spent, Limit(tokens=100_000)) == "1.2k / 100k tokens"
    assert budget_text(spent, Limit(5000, 5.0)) == "$1.20 / $5.00 · 1.2k / 5k tokens"
    assert budget_text(None, Limit(cost=5.0)) == "$0.00 / $5.00"
    assert budget_text(spent, None) == budget_text(spent, Limit()) == "—"


@pytest.mark.parametrize(("typed", "cost"), [
    ("5", 5.0), ("$1.20", 1.2), (" 0.5 ", 0.5), (".25", 0.25), ("1,000", 1000.0), ("", None),
    ("0", 0.0),
])  # fmt: skip
def test_a_cost_reads_as_dollars(typed: str, cost: float | None) -> None:
    assert read_cost(typed) == cost


@pytest.mark.parametrize(("typed", "tokens"), [
    ("120000", 120_000), ("120k", 120_000), ("1.5M", 1_500_000), ("1_000", 1000), ("", None),
])  # fmt: skip
def test_tokens_read_as_a_whole_number(typed: str, tokens: int | None) -> None:
    assert read_tokens(typed) == tokens


@pytest.mark.parametrize(("read", "typed", "says"), [
    (read_cost, "-3", "negative"), (read_cost, "abc", "not a number"),
    (read_cost, "nan", "not a number"), (read_cost, "inf", "not a number"),
    (read_cost, "1e3", "not a number"), (read_cost, "2000000000", "at most"),
    (read_tokens, "-1", "negative"), (read_tokens, "1.5", "whole number"),
    (read_tokens, "12x", "whole number"), (read_tokens, "k", "whole number"),
    (read_tokens, "9" * 20, "at most"),
])  # fmt: skip
def test_what_is_not_an_amount_is_refused_with_why(read, typed: str, says: str) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match=says):
        read(typed)


# -- the status bar -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_status_bar_counts_todays_spend_as_steps_finish(deck_app, room) -> None:
    priced(room)
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        status = main.query_one(StatusBar)
        await until(pilot, lambda: status.spent, "today's spend read", ok=lambda u: u == Usage())
        assert "today $0.00 · 0 tokens" in status.render().plain
        reads = []
        real = app.bridge.api.budgets

        async def counted():  # noqa: ANN202
            reads.append(1)
            return await real()

        app.bridge.api.budgets = counted  # type: ignore[method-assign]
        rt = app.host.runtime
        await send(pilot, "hello", click=False)
        await until(pilot, lambda: status.spent, "the turn's spend",
                    ok=lambda u: u is not None and u.steps == 1)  # fmt: skip
        assert status.spent == rt.budgets.spent_in("room")
        assert status.spent.cost == pytest.approx(HELLO_COST)
        assert "today $0.12 · 42 tokens" in status.render().plain
        await until(pilot, lambda: main.state.counts(), "idle", ok=lambda c: c == (0, 0))
        await send(pilot, "calc 2+2", click=False)  # two inferences: each step adds
        await until(pilot, lambda: main.state.counts(), "idle", ok=lambda c: c == (0, 0))
        truth = rt.budgets.spent_in("room")
        await until(pilot, lambda: status.spent, "both turns", ok=lambda u: u == truth)
        assert truth.steps == 3
        assert f"today {spent_text(truth)}" in status.render().plain
        assert not reads  # kept by the events: the room was not asked again (no budgets)
        await app.shutdown()


@pytest.mark.anyio
async def test_the_offline_model_is_free_and_a_narrow_bar_keeps_the_cost(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=(80, 24)) as pilot:
        main = await started(pilot)
        status = main.query_one(StatusBar)
        await send(pilot, "hello", click=False)
        await until(pilot, lambda: status.spent, "the turn's spend",
                    ok=lambda u: u is not None and u.tokens == 42)  # fmt: skip
        line = status.render().plain
        assert "today $0.00" in line and "tokens" not in line  # 80 columns: the short form
        assert "model offline-rules-1" in line
        await app.shutdown()


# -- the scheduler view and `b` -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_held_group_shows_why_and_b_raises_its_budget(deck_app, room) -> None:
    task_budget(room)
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await held_task(pilot)
        main, rt = app.main, app.host.runtime
        why = "group task's daily budget reached: $0.12 of $0.10 today"
        table = screen.query_one(GroupsTable)
        cells = {c: " ".join(str(table.get_cell("task", c)).split())  # (the why may wrap)
                 for c in ("today", "budget", "held because")}  # fmt: skip
        assert cells == {"today": "$0.12 · 42 tokens", "budget": "$0.12 / $0.10",
                         "held because": why.removeprefix("group task's ")}  # fmt: skip
        assert str(table.get_cell("chat", "budget")) == "—"
        assert str(table.get_cell("chat", "state")) == "● active"
        queued = screen.query_one("#sched-queued", KeyedTable)
        [held] = [str(queued.get_cell(k.value, "waits because")) for k in queued.rows]
        assert held == why
        summary = str(screen.query_one("#sched-summary").render())
        assert "today $0.12 · 42 tokens" in summary
        status = main.query_one(StatusBar)
        await until(pilot, lambda: status.held, "the status bar says it",
                    ok=lambda h: h == "group task over budget")  # fmt: skip

        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, DailyBudgetScreen), "the dialog")
        dialog = app.screen
        cost = dialog.query_one("#cost")
        assert cost.value == "0.1" and dialog.query_one("#tokens").value == ""
        cost.value = ""
        await pilot.press(*"5", "enter")
        await until(pilot, lambda: app.screen is screen, "the dialog closed")
        assert rt.budgets.limit("group:task") == Limit(cost=5.0)
        await until(pilot, lambda: main.state.counts(), "the held turn ran",
                    ok=lambda c: c == (0, 0) and len([t for t in main.state.turns.values()
                                                       if t.status == TurnStatus.DONE]) == 2)  # fmt: skip
        await until(pilot, lambda: str(table.get_cell("task", "state")), "the row says active",
                    ok=lambda s: s == "● active")  # fmt: skip
        assert str(table.get_cell("task", "budget")).endswith(" / $5.00")
        assert str(table.get_cell("task", "held because")) == ""
        await until(pilot, lambda: queued.row_count, "nothing queued", ok=lambda n: n == 0)
        await until(pilot, lambda: status.held, "the warning gone", ok=lambda h: h == "")

        await pilot.press("b")  # ctrl+t: back to agentdeck.toml's $0.10 (it holds again)
        await until(pilot, lambda: isinstance(app.screen, DailyBudgetScreen), "the dialog")
        await pilot.press("ctrl+t")
        await until(pilot, lambda: rt.budgets.limit("group:task"), "agentdeck.toml's",
                    ok=lambda limit: limit == Limit(cost=0.10))  # fmt: skip
        await until(pilot, lambda: str(table.get_cell("task", "state")), "held again",
                    ok=lambda s: s == "$ held")  # fmt: skip
        await app.shutdown()


@pytest.mark.anyio
async def test_bad_input_says_why_and_changes_nothing(deck_app, room) -> None:
    task_budget(room)
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await held_task(pilot)
        rt = app.host.runtime
        sent = []
        real = app.bridge.set_budget

        async def recorded(*args, **kw):  # noqa: ANN002, ANN003, ANN202
            sent.append((args, kw))
            return await real(*args, **kw)

        app.bridge.set_budget = recorded  # type: ignore[method-assign]
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, DailyBudgetScreen), "the dialog")
        dialog = app.screen
        error = dialog.query_one("#budget-error")
        for field, typed, says in (("#cost", "-3", "cost: -3 is negative"),
                                   ("#cost", "lots", "cost: lots is not a number"),
                                   ("#tokens", "12.5", "tokens: 12.5 is not a whole number")):  # fmt: skip
            dialog.query_one("#cost").value = "0.1"
            dialog.query_one(field).value = ""
            dialog.query_one(field).focus()
            await pilot.press(*typed, "enter")
            await until(pilot, lambda: str(error.render()), f"the error for {typed}",
                        ok=lambda text, s=says: s in text and "Nothing is set." in text)  # fmt: skip
            assert app.screen is dialog  # still open: nothing was sent
        dialog.query_one("#tokens").value = ""
        await until(pilot, lambda: str(error.render()), "the error gone once it reads",
                    ok=lambda text: text == "")  # fmt: skip
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "backed out")
        assert not sent
        assert rt.budgets.limit("group:task") == Limit(cost=0.10)
        assert rt.scheduler.held_groups.get("task")
        assert app.is_running
        await app.shutdown()


@pytest.mark.anyio
async def test_the_rooms_own_budget_is_said_in_the_summary_and_the_status_bar(
    deck_app, room
) -> None:
    priced(room, "[budget]\nroom = { tokens = 10 }\n")
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "hello", click=False)
        status = main.query_one(StatusBar)
        await until(pilot, lambda: status.held, "the status bar says it",
                    ok=lambda h: h == "room over budget")  # fmt: skip
        assert "⚠ room over budget" in status.render().plain
        screen = await open_scheduler(pilot)
        summary = str(screen.query_one("#sched-summary").render())
        assert summary.endswith("today $0.12 · 42 tokens  "
                                "⚠ the room's daily budget reached: 42 of 10 tokens today")  # fmt: skip
        await app.shutdown()


@pytest.mark.parametrize("scene", list(BUDGET_SCENES))
def test_budget_snapshot(scene: str, snap_compare, room) -> None:
    run_before, size, kw = BUDGET_SCENES[scene]
    BUDGET_PREPARE[scene](room)
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)
