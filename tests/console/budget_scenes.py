"""Scenes of usage and budgets (issue 33): the status bar with today's spend and a group
its budget holds, the scheduler view with a held group, and the dialog that raises it.

The room prices the offline model (`[model] price`, dollars per million tokens), so its
turns cost something: "hello" is 1 token in and 41 out, $0.124 at these prices. A group's
daily budget of $0.10 holds its new turns after that one turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

from console.screens.daily_budget import DailyBudgetScreen
from console.screens.scheduler import SchedulerScreen
from console.widgets.groups_table import GroupsTable
from console.widgets.status_bar import StatusBar
from tests.console.helpers import send, started, until
from tests.console.scenes import steady
from tests.console.scheduler_scenes import message, open_scheduler

PRICE = "[model]\nprice = { input = 1000, output = 3000 }\n"
HELLO_COST = (1 * 1000 + 41 * 3000) / 1_000_000  # what "hello" costs at PRICE


def priced(room: Path, budgets: str = "") -> None:
    """A room whose model has a price, and the budgets in `budgets` (TOML)."""
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(PRICE + budgets)


def chat_budget(room: Path) -> None:
    priced(room, "[groups.chat]\nbudget = { cost = 0.10 }\n")


def task_budget(room: Path) -> None:
    priced(room, "[groups.task]\nbudget = { cost = 0.10 }\n")


async def status_spend(pilot: Pilot) -> None:
    """One chat turn spent past the chat's daily budget: the status bar says today's spend
    and that the group is held."""
    main = await started(pilot)
    await send(pilot, "hello", click=False)
    status = main.query_one(StatusBar)
    await until(pilot, lambda: (status.spent, status.held), "the spend and the hold",
                ok=lambda s: s[0] is not None and s[0].tokens and s[1])  # fmt: skip
    await until(pilot, lambda: main.state.counts(), "idle", ok=lambda c: c == (0, 0))
    main.query_one("#timeline").focus()
    await steady(pilot)


async def held_task(pilot: Pilot) -> SchedulerScreen:
    """A task turn spent past the task group's budget, the next one held; the scheduler
    view open on the task group."""
    await started(pilot)
    rt = pilot.app.host.runtime  # type: ignore[attr-defined]
    await rt.submit(message("task:notes", "hello"))
    await until(pilot, lambda: rt.scheduler.held_groups.get("task"), "the task group held")
    await rt.submit(message("task:notes", "what is 6*7"))
    await until(
        pilot, lambda: len(rt.statistics().queued), "the next turn queued", ok=lambda n: n == 1
    )
    # the first turn done before the view opens: its tables size their columns once (a
    # thread seen running, then idle, kept the wider column: the snapshots differed)
    await until(pilot, lambda: rt.statistics().running, "the first turn done", ok=lambda n: n == 0)
    screen = await open_scheduler(pilot)
    table = screen.query_one(GroupsTable)
    await until(pilot, lambda: str(table.get_cell("task", "state")), "the row says held",
                ok=lambda s: s == "$ held")  # fmt: skip
    table.focus()
    for _ in range(table.row_count):
        if table.current_key() == "task":
            return screen
        await pilot.press("j")
    raise AssertionError("no task group in the table")


async def scheduler_held(pilot: Pilot) -> None:
    await held_task(pilot)
    await steady(pilot)


async def budget_dialog(pilot: Pilot) -> None:
    await held_task(pilot)
    await pilot.press("b")
    await until(pilot, lambda: isinstance(pilot.app.screen, DailyBudgetScreen), "the dialog")
    await steady(pilot)


async def budget_dialog_error(pilot: Pilot) -> None:
    await budget_dialog(pilot)
    dialog = pilot.app.screen
    dialog.query_one("#cost").value = ""  # type: ignore[attr-defined]
    await pilot.press(*"-2", "enter")
    await until(pilot, lambda: dialog.query_one("#budget-error").render(), "the error",
                ok=lambda text: "negative" in str(text))  # fmt: skip
    await steady(pilot)


Scene = tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict]
BUDGET_SCENES: dict[str, Scene] = {
    "status_spend": (status_spend, (160, 48), {}),
    "scheduler_held": (scheduler_held, (160, 48), {}),
    "budget_dialog": (budget_dialog, (160, 48), {}),
    "budget_dialog_error": (budget_dialog_error, (160, 48), {}),
}
BUDGET_PREPARE: dict[str, Callable[[Path], None]] = {
    "status_spend": chat_budget,
    "scheduler_held": task_budget,
    "budget_dialog": task_budget,
    "budget_dialog_error": task_budget,
}
