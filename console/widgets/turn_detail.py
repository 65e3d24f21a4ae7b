"""One turn of the history, drawn with the live view's own widgets.

Its steps in a `Timeline` (Enter goes to the calls), its calls in a `CallsTable` (Enter
asks for a call's details: `CallsTable.ShowDetails` goes up to the screen, which opens
them), and its facts, suspension, decisions and messages in a `HistoryNotes` pane. It
draws a turn the screen hands it (`show`, a dict of `History.turn`) and holds no
connection.
"""

from __future__ import annotations

from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical

from console.format import set_title
from console.history.view import DIM, Cells, call_rows, notes, step_rows, turn_title
from console.state import CallRow
from console.steps import StepRow
from console.widgets.calls_table import CallsTable
from console.widgets.history_notes import HistoryNotes
from console.widgets.timeline import Timeline

NOTHING: list[Cells] = [(("no turn to show", DIM),)]


class TurnDetail(Vertical):
    """Steps, calls and notes of the turn `detail` (None: no turn)."""

    def __init__(self, **kw: object) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.detail: dict[str, Any] | None = None
        self.steps: list[StepRow] = []  # the timeline's rows (it holds this list)
        self.calls: list[CallRow] = []
        self._seq = 0  # step rows are numbered on across turns: see `step_rows`

    def compose(self) -> ComposeResult:
        with Vertical(id="hist-steps-pane", classes="pane"):
            yield Timeline(self.steps, id="hist-steps")
        with Vertical(id="hist-calls-pane", classes="pane"):
            yield CallsTable(id="hist-calls")
        with Vertical(id="hist-turn-pane", classes="pane"):
            yield HistoryNotes("select a turn", id="hist-turn")

    def on_mount(self) -> None:
        for pane, title in (("steps", "Steps"), ("calls", "Calls"), ("turn", "Turn")):
            set_title(self.query_one(f"#hist-{pane}-pane"), title)

    @property
    def turn_id(self) -> str | None:
        """The turn shown, if any."""
        return self.detail["turn"]["turn_id"] if self.detail else None

    def show(self, detail: dict[str, Any] | None) -> None:
        """Draw this turn from its first step (None: say there is no turn to show)."""
        self.detail = detail
        timeline = self.query_one(Timeline)
        self.steps[:] = step_rows(detail, self._seq) if detail else []
        self._seq += len(self.steps)
        timeline.follow = False
        timeline.refresh_rows()
        timeline.action_first()
        self.calls = call_rows(detail) if detail else []
        turn_id = self.turn_id or ""
        self.query_one(CallsTable).show(turn_id, self.calls)
        self.query_one(HistoryNotes).show(notes(detail) if detail else NOTHING)
        self._title("steps", f"Steps · {turn_id}" if detail else "Steps")
        self._title("calls", f"Calls · {turn_id}" if detail else "Calls")
        self._title("turn", turn_title(detail["turn"]) if detail else "Turn")

    def call(self, call_id: str) -> CallRow | None:
        """The shown turn's call `call_id`, if it has it."""
        return next((c for c in self.calls if c.call_id == call_id), None)

    def select_call(self, call_id: str) -> None:
        """Put the calls table's cursor on `call_id` (if the turn has it)."""
        keys = [c.call_id for c in self.calls]
        if call_id not in keys:
            return
        table = self.query_one(CallsTable)
        target = keys.index(call_id)
        for _ in range(len(keys)):
            if table.cursor < target:
                table.action_cursor_down()
            elif table.cursor > target:
                table.action_cursor_up()

    def jump(self, step_id: int | None, call_id: str) -> None:
        """Select the step and the call where the turn suspended, focus the call, and bring
        the notes' "Where it suspended" to the top."""
        timeline = self.query_one(Timeline)
        index = next((i for i, s in enumerate(self.steps) if s.step_id == step_id), 0)
        timeline.action_first()
        if index:
            timeline.action_cursor(index)
        self.select_call(call_id)
        self.query_one(CallsTable).focus()
        pane = self.query_one(HistoryNotes)
        pane.scroll_to_line(next((i for i, line in enumerate(pane.lines)
                                  if line and line[0][0].startswith("Where")), 0))  # fmt: skip

    def _title(self, pane: str, title: str) -> None:
        widget = self.query_one(f"#hist-{pane}-pane")
        set_title(widget, title)

    @on(Timeline.OpenTurn)
    def steps_open(self, event: Timeline.OpenTurn) -> None:
        event.stop()
        self.query_one(CallsTable).focus()

    @on(Timeline.Selected)
    def steps_selected(self, event: Timeline.Selected) -> None:
        event.stop()  # one turn is shown: moving through its steps changes nothing else
