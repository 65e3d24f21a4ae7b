"""The decision queue: every suspended call across all threads, oldest first.

Approve (`a`), cancel (`x`), edit then approve (`e`), use a given result (`u`) and
approve-and-remember (`A` for the thread, `R` for the room) are distinct keys; Enter only opens the details. The widget
posts what the operator asked for; the screen carries it out (with the prompts and
confirmations).

A decision key acts only while the queue has the focus and shows it; pressed within
GUARD seconds of the focus arriving (a letter typed while the operator believes they are
in the chat), or on a call of another thread the cursor moved to by itself (the row under
it left), it asks first. A call already decided keeps its row, marked, until the decision
is applied; the cursor stays on the same position when a row leaves. A call whose outcome
a crash left unknown shows as needing review, and its decision keys say to press `!` (the
review screen) instead of sending a decision the engine would refuse.

Narrower than COMPACT_BELOW cells (an 80-column terminal), the queue draws each call on
two lines (tool over thread) and gives the arguments the width, wrapped over both lines,
so a whole command of about 90 characters shows in its row.

A call with a deadline (engine.services.deadlines) shows the time left in a `left` column (shown
only while some call has one), redrawn each second; in the last minute (the last fifth of
a shorter deadline) its row is styled as a warning, and a notification says once which
call it is, when its deadline passes and what happens then.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from console.format import age, clock_time, one_line, short_id
from console.state import CallRow
from console.widgets.keyed_table import KeyedTable

COLUMNS = ("tool", "state", "arguments", "thread", "turn", "age")
COMPACT_COLUMNS = ("call", "state", "arguments", "age")  # call: the tool over the thread
COMPACT_BELOW = 80  # cells of width under which the queue is compact
WARN_LAST = 60.0  # seconds before a deadline its row warns (a fifth of a shorter deadline)
ARGS_PREVIEW = 120  # characters of arguments at most; a narrower table cuts them further
GUARD = 0.3  # seconds after the focus arrives in which a decision key asks first


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
        Binding("u", "decide('use')", "Use a result", priority=True),
        Binding("A", "decide('remember')", "Approve+remember", priority=True),
        Binding(
            "R", "decide('remember_room')", "Approve+remember room", show=False, priority=True
        ),  # fmt: skip
        Binding("enter", "decide('details')", "Details", priority=True),
    ]

    COMPONENT_CLASSES = KeyedTable.COMPONENT_CLASSES | {"queue--warning"}

    class Decide(Message):
        """The operator pressed a decision key on `call`."""

        def __init__(self, action: str, call: CallRow, ask: str = "") -> None:
            super().__init__()
            self.action, self.call = action, call
            self.ask = ask  # why the screen must ask before anything else ("": no need)

    def __init__(self, clock: Callable[[], float], keys_clock: Callable[[], float] = time.monotonic,
                 **kw: object) -> None:  # fmt: skip
        super().__init__(COLUMNS, state_columns=("state",), give_way=("arguments", "thread"),
                         **kw)  # fmt: skip
        self.clock = clock
        self.keys_clock = keys_clock  # for GUARD (seconds, monotonic); tests pass their own
        self.filter_text = ""
        self.decided: dict[str, str] = {}  # call id -> the action of its unapplied decision
        self._calls: dict[str, CallRow] = {}
        self._pending: dict[str, CallRow] = {}  # as last shown, to draw again when compacted
        self._thread_of: dict[str, str] = {}  # of the calls drawn, for the cursor's next row
        self._focus_at = float("-inf")
        self._landed: str | None = None  # another thread's call the cursor moved to itself
        self._near: set[str] = set()  # calls shown whose deadline is near (rows warned)
        self._told: set[str] = set()  # calls whose near deadline was notified

    def on_focus(self) -> None:
        self._focus_at = self.keys_clock()

    def show_pending(
        self, pending: dict[str, CallRow], decided: dict[str, str] | None = None
    ) -> None:
        """Draw the pending calls (filtered), keeping the cursor on the same call; those
        in `decided` are marked so."""
        if decided is not None:
            self.decided = decided
        self._pending = pending
        needle = self.filter_text.lower()
        self._calls = {
            k: c for k, c in pending.items()
            if not needle or needle in f"{c.tool} {c.args} {c.thread_id} {c.turn_id}".lower()
        }  # fmt: skip
        self._thread_of.update((k, c.thread_id) for k, c in self._calls.items())
        now = self.clock()
        near = {k for k, c in pending.items() if k not in self.decided and deadline_near(c, now)}
        self._tell(pending, near, now)
        base = COMPACT_COLUMNS if self.lines > 1 else COLUMNS
        timed = any(c.deadline_at is not None for c in self._calls.values())
        labels = (*base[:2], "left", *base[2:]) if timed else base  # after the state
        near &= set(self._calls)
        if labels != self.labels or near != self._near:  # new columns, or rows restyled:
            self.labels, self._near, self._drawn, self._room = labels, near, {}, {"": -1}
            if not self._calls:  # (`show` redraws all, columns too, when there are rows)
                self.clear(columns=True)
                self._add_columns()
        rows: dict[str, tuple[str, ...]] = {}
        for key, call in self._calls.items():
            state = "decided" if key in self.decided else _state(call)
            args, ago = one_line(call.args, ARGS_PREVIEW), age(now - call.updated_at)
            cells = (
                (f"{call.tool}\n{call.thread_id}", state, args, ago) if self.lines > 1 else
                (call.tool, state, args, call.thread_id, short_id(call.turn_id), ago)
            )  # fmt: skip
            rows[key] = (*cells[:2], left(call, now, key in near), *cells[2:]) if timed else cells
        self.show(rows)
        self._thread_of = {k: c.thread_id for k, c in self._calls.items()}

    def on_resize(self) -> None:
        compact = 0 < self.size.width < COMPACT_BELOW
        if compact != (self.lines > 1):
            self.labels = COMPACT_COLUMNS if compact else COLUMNS
            self.give_way = ("arguments",) if compact else ("arguments", "thread")
            self.lines = 2 if compact else 1
            keep = self.current_key()
            self._drawn, self._room = {}, {}
            self.clear(columns=True)
            self._add_columns()
            self.show_pending(self._pending)
            if keep is not None and keep in self.rows:
                self.move_cursor(row=self.get_row_index(keep), animate=False)
            return
        super().on_resize()

    def _tell(self, pending: dict[str, CallRow], near: set[str], now: float) -> None:
        """Say once of the calls whose deadline came near: which (the soonest, and how many
        more), when, and what then; one notification however many came near at once."""
        self._told &= set(pending)
        new = sorted(
            (k for k in pending if k in near and k not in self._told),
            key=lambda k: pending[k].deadline_at or 0,
        )  # (in the queue's order)
        if not new:
            return
        self._told |= set(new)
        call = pending[new[0]]
        then = "approved" if call.on_deadline == "approve" else "cancelled"
        at = call.deadline_at or now
        more = f" (and {len(new) - 1} more call{'s' if len(new) > 2 else ''})" if new[1:] else ""
        self.notify(f"{call.tool} {one_line(call.args, 40)} on {call.thread_id}{more}: its "
                    f"deadline is {clock_time(at)} (in {time_left(at - now)}); undecided, it is "
                    f"{then} then.", title="Decision deadline", severity="warning")  # fmt: skip

    def _cell(self, label: str, value: str, key: str | None = None) -> Text:
        cell = super()._cell(label, value, key)
        if key not in self._near or label == "state":  # (the state keeps its own colour)
            return cell
        text = cell.copy()
        text.stylize(self.get_component_rich_style("queue--warning", partial=True))
        return text

    def successor(
        self, gone: str, before: list[str], rows: dict[str, tuple[str, ...]]
    ) -> str | None:
        """The next call down of the same thread (else the one above it); when its thread
        has none left, the same position, and a decision key there asks first."""
        thread = self._thread_of.get(gone)
        at = before.index(gone) if gone in before else len(before)
        mine = [k for k in before if k in rows and self._thread_of.get(k) == thread]
        below = [k for k in mine if before.index(k) > at]
        if below or mine:
            return below[0] if below else mine[-1]
        self._landed = super().successor(gone, before, rows)
        return self._landed

    def focus_shown(self) -> bool:
        """The queue has the focus and the operator can see it does: the terminal has the
        focus, the queue's screen is the one shown and the queue is on it."""
        return (self.has_focus and self.app.app_focus and self.screen.is_current
                and self.display and self.region.area > 0)  # fmt: skip

    def action_decide(self, action: str) -> None:
        key = self.current_key()
        if action != "details" and not self.focus_shown():
            self.notify("The decision queue does not have the focus: press d to go there first.",
                        severity="warning")  # fmt: skip
            return
        if key is None or key not in self._calls:
            if action != "details":
                self.notify("No decision is selected.", severity="warning")
            return
        call, ask = self._calls[key], ""
        if action != "details" and call.under_review:
            self.notify(f"{call.tool} call {call.call_id} was running when agentdeck stopped: "
                        "its outcome is unknown, so it takes a review, not a decision. Press ! "
                        "to review it.", title="Needs review", severity="warning")  # fmt: skip
            return
        if action != "details" and key not in self.decided:
            if self.keys_clock() - self._focus_at < GUARD:
                ask = "The decision queue got the focus just now."
            elif key == self._landed:
                ask = (f"The cursor moved to this call of {call.thread_id} by itself "
                       "(the call under it left).")  # fmt: skip
            self._landed = None
        self.post_message(self.Decide(action, call, ask))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_decide("details")


def _state(call: CallRow) -> str:
    """The state word of a waiting call: a call a crash left for review says so."""
    return "review" if call.under_review else call.status


def time_left(seconds: float) -> str:
    """Time to a deadline as the queue shows it: 4m12s, 45s, 1h05m; "due now" once passed."""
    if seconds <= 0:
        return "due now"
    whole = math.ceil(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def deadline_near(call: CallRow, now: float) -> bool:
    """Whether `call`'s deadline is in its last minute (the last fifth of a short one)."""
    if call.deadline_at is None:
        return False
    whole = call.deadline_at - call.updated_at
    return call.deadline_at - now <= min(WARN_LAST, whole / 5)


def left(call: CallRow, now: float, near: bool) -> str:
    """The `left` cell: the time to its deadline (marked ⚠ when near), else nothing."""
    if call.deadline_at is None:
        return ""
    return f"⚠ {time_left(call.deadline_at - now)}" if near else time_left(call.deadline_at - now)
