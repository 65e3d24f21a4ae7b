"""The tool calls of the selected turn: tool, arguments, state, result or error, timings."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from console.format import duration, one_line
from console.glyphs import STATE_CLASSES
from console.state import CallRow
from console.widgets.state_text import state_text


class CallsTable(DataTable[Text | str]):
    """Calls of one turn; Enter opens the full arguments and result."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("enter", "details", "Details"),
    ]
    COMPONENT_CLASSES = DataTable.COMPONENT_CLASSES | set(STATE_CLASSES)

    class ShowDetails(Message):
        """Open the detail view of a call."""

        def __init__(self, call_id: str) -> None:
            super().__init__()
            self.call_id = call_id

    def __init__(self, **kw: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kw)  # type: ignore[arg-type]
        self.turn_id = ""

    def on_mount(self) -> None:
        self.add_column("tool", key="tool")
        self.add_column("state", key="state")
        self.add_column("arguments", key="args")
        self.add_column("result / error", key="result")
        self.add_column("took", key="took")

    def show(self, turn_id: str, calls: list[CallRow]) -> None:
        """Draw the calls of `turn_id`, keeping the cursor on the same call."""
        keep = self._cursor_key()
        self.turn_id = turn_id
        self.clear()
        for call in calls:
            outcome = call.result if call.status == "succeeded" else call.error
            took = call.ended_at - call.created_at if call.ended_at is not None else None
            self.add_row(
                call.tool,
                state_text(self, call.status),
                one_line(call.args, 40),
                one_line(outcome or "", 50),
                duration(took),
                key=call.call_id,
            )
        if keep is not None and keep in self.rows:
            self.move_cursor(row=self.get_row_index(keep), animate=False)

    def _cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def action_details(self) -> None:
        if (key := self._cursor_key()) is not None:
            self.post_message(self.ShowDetails(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.ShowDetails(event.row_key.value))
