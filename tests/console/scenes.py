"""The console states that snapshots and screenshots show, built on the real app.

Each scene is a `run_before` coroutine: it drives the app through the operator's keys (or
the runtime API where a key path would only add waiting) into one state, waits for what it
shows, and ends with `steady`: the screen as it stays, whenever the snapshot is taken.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from textual.notifications import Notifications
from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from console.screens.main import MainScreen
from console.widgets.lines import LineView
from engine.providers.base import ModelRequest, TextDelta
from engine.providers.offline import OfflineModel
from tests.console.helpers import send, started, until, until_pending


class StalledModel(OfflineModel):
    """The offline model that stops mid-answer, so a streaming state holds still; `said`
    is the text it streamed, once it stopped (the runtime took every piece before)."""

    def __init__(self, pieces: int = 6) -> None:
        super().__init__(delay=0, chunk_chars=4)
        self.pieces = pieces
        self.said: str | None = None

    async def stream(self, request: ModelRequest) -> AsyncIterator:  # type: ignore[override]
        self.said, text = None, ""
        for i, event in enumerate(self.events(request)):
            if i == self.pieces:
                self.said = text
                await anyio.sleep_forever()
            text += event.text if isinstance(event, TextDelta) else ""
            yield event


def undrawn(app: Any) -> dict[str, object]:
    """What the console has yet to draw: the runtime's events the bridge has not folded,
    a `Changed` the main screen has not handled (a toast may come with it), panes due, the
    tables whose columns are not sized yet (they are on the table's next idle), and the
    line views whose scrollbar waits for its next sync (a few times a second)."""
    bridge = app.bridge
    left: dict[str, object] = {"events": bridge.backlog, "changed": bridge._posted,
                               "panes": sorted(bridge._due)}  # fmt: skip
    left["tables"] = [t.id or type(t).__name__ for screen in app.screen_stack
                      for t in screen.query(DataTable)
                      if t._require_update_dimensions or t._updated_cells]  # fmt: skip
    left["scrollbars"] = [v.id or type(v).__name__ for screen in app.screen_stack
                          for v in screen.query(LineView) if v._bar_stale]  # fmt: skip
    return {k: v for k, v in left.items() if v}


async def steady(pilot: Pilot, *, notifications: bool = False) -> None:
    """The screen as it stays, so a snapshot does not depend on when it is taken: every
    change drawn, tables sized, animations over, the app idle, no blinking cursor, and no
    toast (one comes at its own moment, and lasts seconds), unless the scene is about
    one (`notifications`)."""
    app = pilot.app
    for screen in app.screen_stack:
        for field in screen.query(Input):
            field.cursor_blink = False
    await until(pilot, lambda: undrawn(app), "the console drew everything", ok=lambda u: not u)
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    # A table sized after a frame was drawn may keep that frame's lines (their widths were
    # already right): draw every table afresh.
    for screen in app.screen_stack:
        for table in screen.query(DataTable):
            table._clear_caches()
            table.refresh()
    if not notifications:
        app.clear_notifications()  # (this refreshes the toasts of the screen on top only)
        for screen in app.screen_stack:
            for rack in screen.query("ToastRack"):
                rack.show(Notifications())  # type: ignore[attr-defined]
    await pilot.pause()


async def empty(pilot: Pilot) -> None:
    await started(pilot)
    await steady(pilot)


async def streaming(pilot: Pilot) -> None:
    main = await started(pilot)
    await send(pilot, "hello there", click=False)
    model = pilot.app.host.runtime.provider  # type: ignore[attr-defined]
    await until(pilot, lambda: main.state.thread("chat:main").streaming,
                "the answer streams until the model stalls",
                ok=lambda text: model.said is not None and text == model.said)  # fmt: skip
    await steady(pilot)


async def queue(pilot: Pilot, command: str = "make test") -> None:
    """Three calls wait on two threads (`command` and `git status`, then a write_file),
    the queue focused."""
    main = await started(pilot)
    await send(pilot, f"run `{command}` and run `git status`", click=False)
    await until(pilot, lambda: len(main.state.pending) == 2, "two calls wait")
    await pilot.press("ctrl+n")
    await send(pilot, 'write "release notes" to NOTES.md', click=False)
    await until(pilot, lambda: len(main.state.pending) == 3, "three calls wait")
    # the card of chat:2's call may take the keyboard as the frame is drawn: let it, then
    # the queue takes it (else which of the two has it depends on when the frame came)
    await until(pilot, lambda: undrawn(pilot.app), "the frame drawn", ok=lambda u: not u)
    await pilot.pause()
    main.query_one("#decisions").focus()
    await steady(pilot)


async def call_detail(pilot: Pilot) -> None:
    main = await started(pilot)
    await send(pilot, "run `echo hi` and calc 6*7", click=False)
    await until_pending(pilot, main)
    main.query_one("#calls").focus()
    await pilot.press("enter")
    await until(pilot, lambda: type(pilot.app.screen).__name__ == "CallDetailScreen", "detail")
    await steady(pilot)


COMMAND = "pytest -q tests/console -k 'queue or detail' --maxfail=1 -x"  # ~60 characters
LONG_COMMAND = ("rsync -av --delete --exclude '.git' --exclude '__pycache__' build/site/ "
                "deploy@docs.example.org:/srv/www/docs/ && ssh deploy@docs.example.org "
                "'systemctl reload nginx'")  # fmt: skip


async def queue_narrow(pilot: Pilot) -> None:
    """At 80x24: the queue takes the width and shows each command whole."""
    await queue(pilot, COMMAND)


async def detail_of(pilot: Pilot, text: str) -> None:
    """The details of the call `text` asks for, opened by Enter in the decision queue."""
    main = await started(pilot)
    await send(pilot, text, click=False)
    await until_pending(pilot, main)
    main.query_one("#decisions").focus()
    await pilot.press("enter")
    await until(pilot, lambda: type(pilot.app.screen).__name__ == "CallDetailScreen", "detail")
    await steady(pilot)


async def detail_shell(pilot: Pilot) -> None:
    await detail_of(pilot, f"run `{LONG_COMMAND}`")


async def detail_write(pilot: Pilot) -> None:
    notes = pilot.app.room.workspace / "NOTES.md"  # type: ignore[attr-defined]
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("v1 notes\n\n- draft\n")
    await detail_of(pilot, 'write "v2 is out: the queue shows every command whole" to NOTES.md')


async def help_screen(pilot: Pilot) -> None:
    main = await started(pilot)
    main.query_one("#timeline").focus()
    await pilot.press("f1")
    await until(pilot, lambda: type(pilot.app.screen).__name__ == "HelpScreen", "help")
    await steady(pilot)


async def light(pilot: Pilot) -> None:
    pilot.app.theme = "agentdeck-light"
    await call_detail_closed(pilot)


async def call_detail_closed(pilot: Pilot) -> None:
    """A busy console: answered turn, a waiting call, the timeline."""
    main = await started(pilot)
    await send(pilot, "calc (6*7) + 0.5", click=False)
    await until(pilot, lambda: main.state.turns and main.state.counts() == (0, 0), "turn done")
    await send(pilot, "run `ls -la` please", click=False)
    await until_pending(pilot, main)
    await steady(pilot)


async def card(pilot: Pilot) -> None:
    """A call of the thread the chat shows, on its card, the card's keys live."""
    main = await started(pilot)
    await send(pilot, f"run `{COMMAND}`", click=False)
    the_card = main.query_one("DecisionCard")
    await until(pilot, lambda: the_card.armed, "the card holds the keyboard, its keys live")
    await steady(pilot)


async def marked(pilot: Pilot) -> None:
    """The queue with a long command wrapped in its row, and two calls marked."""
    await queue(pilot, LONG_COMMAND)
    await pilot.press("space", "space")
    await steady(pilot)


# Prints a build's lines, then a warning once the scene lets it (so stdout's and stderr's
# order is the same every time), then runs until the app closes.
BUILD = ("printf 'compiling %s\\n' engine/turn console/widgets tests/console; "
         "while [ ! -e go1 ]; do sleep 0.02; done; echo 'warning: 2 tests skipped' >&2; "
         "while [ ! -e go2 ]; do sleep 0.02; done")  # fmt: skip


async def approved(pilot: Pilot, command: str) -> MainScreen:
    """`command` asked for, approved from the queue, the chat's input focused again."""
    main = await started(pilot)
    await send(pilot, f"run `{command}`", click=False)
    await until_pending(pilot, main)
    main.query_one("#decisions").focus()
    await pilot.press("a")  # (the queue, as `helpers.approved`; the message sent by keys)
    await until(pilot, lambda: main.state.pending, "approved", ok=lambda p: not p)
    main.query_one("#chat-input").focus()
    return main


async def running_output(pilot: Pilot) -> None:
    """A running command: its spinner and time, and what it printed so far, stderr apart."""
    main = await approved(pilot, BUILD)
    workspace = pilot.app.room.workspace  # type: ignore[attr-defined]

    def lines() -> list[tuple[str, str]]:
        tail = next(iter(main.state.output.values()), None)
        return tail.last(8) if tail is not None else []

    await until(pilot, lines, "the build's lines", ok=lambda seen: len(seen) == 3)
    (workspace / "go1").touch()
    await until(pilot, lines, "the warning", ok=lambda seen: len(seen) == 4)
    log = main.query_one("ChatLog")
    await until(pilot, lambda: log.output, "drawn", ok=lambda shown: len(shown) == 4)  # type: ignore[attr-defined]
    await steady(pilot)


async def long_output(pilot: Pilot, *, whole: bool) -> None:
    """A finished command's 60 lines of output as text, cut after a screenful (`whole`:
    all of it, ctrl+r)."""
    main = await approved(pilot, "seq 60")
    await until(pilot, lambda: main.state.counts(), "the turn ends", ok=lambda c: c == (0, 0))
    if whole:
        await pilot.press("ctrl+r")
    await steady(pilot)


async def output_cut(pilot: Pilot) -> None:
    await long_output(pilot, whole=False)


async def output_whole(pilot: Pilot) -> None:
    await long_output(pilot, whole=True)


SCENES: dict[str, tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict]] = {
    "card": (card, (160, 48), {}),
    "card_narrow": (card, (80, 24), {}),
    "marked": (marked, (160, 48), {}),
    "empty": (empty, (160, 48), {}),
    "streaming": (streaming, (160, 48), {"provider": StalledModel()}),
    "queue": (queue, (160, 48), {}),
    "call_detail": (call_detail, (160, 48), {}),
    "help": (help_screen, (160, 48), {}),
    "light": (light, (160, 48), {}),
    "narrow": (call_detail_closed, (80, 24), {}),
    "queue_narrow": (queue_narrow, (80, 24), {}),
    "detail_shell": (detail_shell, (160, 48), {}),
    "detail_shell_narrow": (detail_shell, (80, 24), {}),
    "detail_write": (detail_write, (160, 48), {}),
    "detail_write_narrow": (detail_write, (80, 24), {}),
    "running_output": (running_output, (160, 48), {}),
    "running_output_narrow": (running_output, (80, 24), {}),
    "output_cut": (output_cut, (160, 48), {}),
    "output_cut_narrow": (output_cut, (80, 24), {}),
    "output_whole": (output_whole, (160, 48), {}),
    "output_whole_narrow": (output_whole, (80, 24), {}),
}
