"""Helpers for Pilot tests: wait for a state by letting the app run, never for a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from textual.command import Provider
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot

from console.screens.main import MainScreen
from tests import wait

T = TypeVar("T")


async def until(
    pilot: Pilot, probe: Callable[[], T], what: str, *, within: float = wait.PATIENCE, **kw: Any
) -> T:
    """`tests.wait.until` in a Pilot test: the value of `probe()` once it holds (`kw` are
    `until`'s: `ok`, `seen`), the app running between looks."""

    async def tick() -> None:
        await pilot.pause(0.01)  # a tick, not a wait: the app draws between looks

    return await wait.until(probe, what, within=within, tick=tick, **kw)


SIZE = (160, 48)  # the terminal size of every Pilot and snapshot test


async def send(pilot: Pilot, text: str, *, click: bool = True) -> None:
    """Put `text` in the chat input (at once: each pilot key waits for idle) and press Enter.
    `click` reaches the input with the mouse (snapshots focus it, so nothing is hovered)."""
    main = pilot.app.main  # type: ignore[attr-defined]
    if click:
        await pilot.click("#chat-input")
    else:
        main.query_one("#chat-input").focus()
    main.query_one("#chat-input").value = text
    await pilot.press("enter")


async def until_pending(pilot: Pilot, main: MainScreen) -> None:
    """Wait until a call waits in the decision queue."""
    await until(pilot, lambda: main.state.pending, "a call waits")


async def started(pilot: Pilot) -> MainScreen:
    """Wait until the runtime is open and the main screen has its history."""
    app = pilot.app
    await until(pilot, lambda: app.host.runtime is not None, "runtime open")  # type: ignore[attr-defined]
    await until(pilot, lambda: app.main.query_one("StatusBar").run_id.startswith("r_"),  # type: ignore[attr-defined]
                "status bar shows the run")  # fmt: skip
    return app.main  # type: ignore[attr-defined,no-any-return]


async def call_waits(pilot: Pilot, text: str) -> MainScreen:
    """Start, send `text` (it asks for a call that needs a decision) and wait until the
    call waits in the decision queue."""
    main = await started(pilot)
    await send(pilot, text)
    await until_pending(pilot, main)
    return main


async def approved(pilot: Pilot, text: str) -> MainScreen:
    """`call_waits`, then the call approved from the decision queue (the queue keeps the
    keyboard)."""
    main = await call_waits(pilot, text)
    main.query_one("#decisions").focus()
    await pilot.press("a")
    return main


class Recorder:
    """The `message_hook`: keeps every message of the given types."""

    def __init__(self, *types: type[Message]) -> None:
        self.types = types
        self.seen: list[Message] = []

    def __call__(self, message: Message) -> None:
        # A bubbling message passes the hook once per node; keep it once.
        if isinstance(message, self.types) and not any(m is message for m in self.seen):
            self.seen.append(message)

    def of(self, kind: type[Message]) -> list[Message]:
        return [m for m in self.seen if isinstance(m, kind)]


def told(recorder: Recorder, severity: str | None = None) -> list[str]:
    """What the console told the operator (of `severity`, or all): the text of every
    notification, in order, as `recorder` kept their `Notify` messages."""
    return [
        m.notification.message
        for m in recorder.of(Notify)
        if isinstance(m, Notify) and severity in (None, m.notification.severity)
    ]


async def palette(provider: Provider) -> dict[str, Callable[[], object]]:
    """What the command palette offers before anything is typed: each title, in order, and
    what choosing it runs (the provider's discovery hits)."""
    return {hit.text or "": hit.command async for hit in provider.discover()}


def decisions_sent(main: MainScreen) -> list:
    """Record each decision the screen sends to the runtime (and still send it)."""
    sent: list = []
    client = main.bridge.api
    decide = client.decide

    async def record(decision):  # noqa: ANN001, ANN202
        sent.append(decision)
        return await decide(decision)

    client.decide = record  # type: ignore[method-assign]
    return sent
