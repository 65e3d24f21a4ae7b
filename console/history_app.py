"""The console when another process owns the room: its history, read-only, no runtime.

History reads through its own read-only connection, so it never needs ownership and
never blocks the owner.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App

import themes
from console import settings
from console.screens.history import HistoryScreen
from engine.room import Room


class HistoryHost(App[None]):
    """Only the history screen, over a room some other process may own: no runtime."""

    CSS_PATH = str(Path(themes.__file__).with_name("app.tcss"))
    TITLE = "agentdeck · history (read-only)"

    def __init__(self, room: Room | Path, *, page_size: int = 50,
                 clock: Callable[[], float] = time.time, why: str = "") -> None:  # fmt: skip
        super().__init__()
        self.room = room if isinstance(room, Room) else Room.at(room)
        self.page_size, self.clock, self.why = page_size, clock, why
        settings.use_themes(self)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return settings.state_variables(self)

    def on_mount(self) -> None:
        screen = HistoryScreen(self.room, clock=self.clock, page_size=self.page_size)
        self.push_screen(screen, callback=lambda _: self.exit())
        if self.why:  # the reason this is not the console, where the operator will see it
            self.notify(self.why, title="History, read-only", timeout=15)
