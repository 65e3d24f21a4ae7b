"""Which model answered each turn, in the console (issue 32): a room whose task group has an
offline model of its own; the chat title of the task thread names that model, the chat's
the room's, and the history's turn pane says the model of each turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.screens.history import HistoryScreen
from console.widgets.chat_pane import ChatPane
from console.widgets.history_notes import HistoryNotes
from engine.lifecycle import TurnStatus
from tests.console.helpers import SIZE, send, started, until
from tests.console.history_scenes import open_history, pick

pytestmark = [pytest.mark.anyio, pytest.mark.console]

TOML = '[groups.task.model]\nprovider = "offline"\nmodel = "offline-small"\n'


def done_on(main, thread_id: str) -> str | None:  # type: ignore[no-untyped-def]
    """The id of a turn on `thread_id` the console saw end (None: none yet)."""
    return next((t.turn_id for t in main.state.turns.values()
                 if t.thread_id == thread_id and t.status == TurnStatus.DONE), None)  # fmt: skip


def model_line(screen: HistoryScreen) -> str:
    lines = ["".join(text for text, _ in line) for line in screen.query_one(HistoryNotes).lines]
    [said] = [line for line in lines if line.startswith("model")]
    return said


async def test_the_chat_title_and_the_history_say_which_model_answered(deck_app, room: Path):
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(TOML)
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        chat = main.query_one(ChatPane)
        await send(pilot, "hello", click=False)
        chat_turn = await until(pilot, lambda: done_on(main, "chat:main"), "the chat turn")
        await until(pilot, lambda: str(chat.border_title), "the chat's model in its title",
                    ok=lambda title: title.endswith("· offline-rules-1"))  # fmt: skip
        (room / "tasks").mkdir(exist_ok=True)
        (room / "tasks" / "report.md").write_text("say hello\n")  # the pulse loop runs it
        task_turn = await until(pilot, lambda: done_on(main, "task:report"), "the task turn")
        assert main.state.turns[task_turn].model == "offline:offline-small"

        main.query_one("#timeline").focus()
        await pilot.press("ctrl+t")  # the task thread in the chat: its title names its model
        await until(pilot, lambda: type(app.screen).__name__, "the threads",
                    ok=lambda name: name == "ThreadPickerScreen")  # fmt: skip
        threads = app.screen.threads  # type: ignore[attr-defined]
        for _ in range(threads.index("task:report") - threads.index("chat:main")):
            await pilot.press("down")
        for _ in range(threads.index("chat:main") - threads.index("task:report")):
            await pilot.press("up")
        await pilot.press("enter")
        await until(pilot, lambda: main.thread_id, "the task thread",
                    ok=lambda thread: thread == "task:report")  # fmt: skip
        await until(pilot, lambda: str(chat.border_title), "the task's model in its title",
                    ok=lambda title: title.startswith("Chat · task:report")
                    and title.endswith("· offline-small"))  # fmt: skip

        screen = await open_history(pilot)
        await pick(pilot, screen, task_turn)
        assert model_line(screen) == "model  offline:offline-small"
        await pick(pilot, screen, chat_turn)
        assert model_line(screen) == "model  offline:offline-rules-1"
        await app.shutdown()
