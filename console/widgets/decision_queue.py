"""The decision queue: every suspended call across all threads, oldest first.

Approve (`a`), cancel (`x`), edit then approve (`e`) and approve-and-remember (`A`) are
distinct keys; Enter only opens the details. The widget posts what the operator asked
for; the screen carries it out (with the prompts and confirmations).
"""

from __future__ import annotations

from collections.abc import Callable

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from console.format import age, one_line, short_id
from console.state import CallRow
from console.widgets.keyed_table import KeyedTable

COLUMNS = ("tool", "state", "arguments", "thread", "turn", "age")
ARGS_PREVIEW = 120  # characters of arguments at most; a narrower table cuts them further


class DecisionQueue(KeyedTable):
    """Suspended calls; the keys decide the one under the cursor."""

    # Priority: a leaf widget's keys are handled as the key arrives, not after it has
    # bubbled through every container (one event-loop turn each) up to the app.
    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, priority=True),
        Binding("k", "cursor_up", "Up", show=False, priority=True),
        Binding("a", "decide('approve')", "Approve", priority=True),
        Binding("x", "decide('cancel')", "Cancel call", priority=True),
        Binding("e", "decide('edit')", "Edit+approve", priority=True),
        Binding("A", "decide('remember')", "Approve+remember", priority=True),
        Binding("enter", "decide('details')", "Details", priority=True),
    ]

    class Decide(Message):
        """The operator pressed a decision key on `call`."""

        def __init__(self, action: str, call: CallRow) -> None:
            super().__init__()
            self.action, self.call = action, call

    def __init__(self, clock: Callable[[], float], **kw: object) -> None:
        super().__init__(COLUMNS, state_columns=("state",), give_way=("arguments", "thread"),
                         **kw)  # fmt: skip
        self.clock = clock
        self.filter_text = ""
        self._calls: dict[str, CallRow] = {}

    def show_pending(self, pending: dict[str, CallRow]) -> None:
        """Draw the pending calls (filtered), keeping the cursor on the same call."""
        needle = self.filter_text.lower()
        self._calls = {
            k: c for k, c in pending.items()
            if not needle or needle in f"{c.tool} {c.args} {c.thread_id} {c.turn_id}".lower()
        }  # fmt: skip
        now = self.clock()
        self.show({
            key: (call.tool, call.status, one_line(call.args, ARGS_PREVIEW), call.thread_id, short_id(call.turn_id),
                  age(now - call.updated_at))
            for key, call in self._calls.items()
        })  # fmt: skip

    def action_decide(self, action: str) -> None:
        key = self.current_key()
        if key is not None and key in self._calls:
            self.post_message(self.Decide(action, self._calls[key]))
        elif action != "details":
            self.notify("No decision is selected.", severity="warning")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_decide("details")
