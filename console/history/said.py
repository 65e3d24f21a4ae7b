"""What the history screen says it did (console/screens/history.py), as Textual messages:
its handlers' names are the screen's (`on_history_screen_listed`, ...), as when they were
defined in it."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message


class Listed(Message, namespace="history_screen"):
    """A list was drawn: `what` (runs, threads, turns, hits), rows loaded, more to page."""

    def __init__(self, what: str, rows: int, more: bool) -> None:
        super().__init__()
        self.what, self.rows, self.more = what, rows, more


class Jumped(Message, namespace="history_screen"):
    """`w` selected the step and call where `turn_id` suspended."""

    def __init__(self, turn_id: str, step_id: int | None, call_id: str) -> None:
        super().__init__()
        self.turn_id, self.step_id, self.call_id = turn_id, step_id, call_id


class Exported(Message, namespace="history_screen"):
    """The turn was written as JSON to `path` (in the room)."""

    def __init__(self, turn_id: str, path: Path) -> None:
        super().__init__()
        self.turn_id, self.path = turn_id, path


class AuditExported(Message, namespace="history_screen"):
    """The room's decision audit was written to `path` (in the room)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
