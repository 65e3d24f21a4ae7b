"""Fork and replay from the console (issue 37): what the operator asked for, `F` on a step
(`ForkAt`) or `P` on a turn (`ReplayOf`), in the live timeline or in history. A widget
posts one; the app opens the dialog (console/screens/travelling.py)."""

from __future__ import annotations

from textual.message import Message


class ForkAt(Message):
    """The operator asked to fork at step `step_id` of `turn_id` (on `thread_id`)."""

    def __init__(self, turn_id: str, step_id: int, thread_id: str, group: str | None) -> None:
        super().__init__()
        self.turn_id, self.step_id, self.thread_id, self.group = turn_id, step_id, thread_id, group


class ReplayOf(Message):
    """The operator asked to replay `turn_id` (on `thread_id`)."""

    def __init__(self, turn_id: str, thread_id: str, group: str | None) -> None:
        super().__init__()
        self.turn_id, self.thread_id, self.group = turn_id, thread_id, group
