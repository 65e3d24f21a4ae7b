"""The decision queue: every suspended call across all threads, oldest first.

Approve (`a`), cancel (`x`), edit then approve (`e`), use a given result (`u`) and
approve-and-remember (`A` for the thread, `R` for the room) are distinct keys; Enter only
opens the details. A shell call where a sandbox confines it may also be approved to run
outside the sandbox (`O`) or in it with the network (`N`): call by call, never remembered,
never for marked calls together. The widget posts what the operator asked for; the screen
carries it out (with the prompts and confirmations).

A breakpoint's pause (console/pause.py) has its own row ("paused", and what it paused on)
and keys: `a` continues, `n` steps, `e` edits what it paused on and continues, `x` ends the
turn; the keys that do not apply to it (use a result, remember, the sandbox's) are not
offered on its row, and it is decided alone, never marked.

A decision key acts only while the queue has the focus and shows it. After the
operator's own decision the cursor goes to the next call (of the same thread first), and
the next key acts on it at once; only when the row under the cursor changed by itself in
the last CHANGED seconds (a call arrived there, the one under it was decided elsewhere or
at its deadline) does a key ask first, saying what changed. A call already decided keeps
its row, marked, until the decision is applied.

Space marks the call under the cursor, `*` every waiting call of its thread; `a` or `x`
then decide all the marked behind one confirmation that lists them, each bound to the
arguments shown. A call whose outcome
a crash left unknown shows as needing review, and its decision keys say to press `!` (the
review screen) instead of sending a decision the engine would refuse.

A row wraps its arguments (a `shell` call's command itself) over up to ROW_LINES lines,
then says how many more there are ("…+N lines"; Enter shows them all). Narrower than
COMPACT_BELOW cells (an 80-column terminal), the queue draws each call on at least two
lines (tool over thread) and gives the arguments the width.

A call with a deadline (engine.services.deadlines) shows the time left in a `left` column (shown
only while some call has one), redrawn each second; in the last minute (the last fifth of
a shorter deadline) its row is styled as a warning, and a notification says once which
call it is, when its deadline passes and what happens then.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import replace

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from console.copying import copy_call
from console.deadlines import deadline_near, left, time_left
from console.format import age, clock_time, one_line, short_id
from console.pause import is_pause, offered, summary
from console.state import CallRow
from console.tool_facts import SANDBOX_ACTIONS, ToolFacts
from console.widgets.keyed_table import KeyedTable, wrapped

COLUMNS = ("tool", "state", "arguments", "thread", "turn", "age")
COMPACT_COLUMNS = ("call", "state", "arguments", "age")  # call: the tool over the thread
COMPACT_BELOW = 80  # cells of width under which the queue is compact
ARGS_PREVIEW = 2_000  # characters of arguments drawn at most (the rest: the details)
ROW_LINES = 3  # lines a row's arguments wrap over at most
CHANGED = 1.0  # seconds after the row under the cursor changed by itself that a key asks
MARK = "● "  # before the tool of a marked call


class DecisionQueue(KeyedTable):
    """Suspended calls; the keys decide the one under the cursor."""

    # Priority: a leaf widget's keys are handled as the key arrives, not after it has
    # bubbled through every container (one event-loop turn each) up to the app.
    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, priority=True),
        Binding("k", "cursor_up", "Up", show=False, priority=True),
        Binding("a", "decide('approve')", "Approve", priority=True),
        Binding(
            "a",
            "decide('continue')",
            "Continue",
            priority=True,
            tooltip="Go on from a breakpoint's pause",
        ),
        Binding(
            "n",
            "decide('step')",
            "Step",
            priority=True,
            tooltip="Go on from a breakpoint's pause for one inference or one tool round, "
            "then pause again",
        ),
        Binding("x", "decide('cancel')", "Cancel call", priority=True),
        Binding(
            "x",
            "decide('end_turn')",
            "End turn",
            priority=True,
            tooltip="Cancel at a breakpoint's pause: the whole turn ends (it asks first)",
        ),
        Binding("e", "decide('edit')", "Edit+approve", priority=True),
        Binding(
            "e",
            "decide('edit_pause')",
            "Edit+continue",
            priority=True,
            tooltip="Edit what a breakpoint's pause holds, then go on",
        ),
        Binding("u", "decide('use')", "Use a result", priority=True),
        Binding("A", "decide('remember')", "Approve+remember", priority=True),
        Binding(
            "O",
            "decide('outside')",
            "Approve outside the sandbox",
            show=False,
            priority=True,
            tooltip="Approve a shell call to run outside the sandbox (this call only)",
        ),
        Binding(
            "N",
            "decide('network')",
            "Approve with the network",
            show=False,
            priority=True,
            tooltip="Approve a shell call to run in the sandbox, with the network",
        ),
        Binding(
            "R", "decide('remember_room')", "Approve+remember room", show=False, priority=True
        ),  # fmt: skip
        Binding("enter", "decide('details')", "Details", priority=True),
        Binding("space", "mark", "Mark", priority=True),
        Binding("y", "copy('command')", "Copy command", show=False, priority=True),
        Binding("asterisk", "mark_thread", "Mark thread", show=False, priority=True),
    ]

    COMPONENT_CLASSES = KeyedTable.COMPONENT_CLASSES | {"queue--warning"}

    class Decide(Message):
        """The operator pressed a decision key on `call`."""

        def __init__(self, action: str, call: CallRow, ask: str = "") -> None:
            super().__init__()
            self.action, self.call = action, call
            self.ask = ask  # why the screen must ask before anything else ("": no need)

    class DecideMarked(Message):
        """The operator pressed `a` or `x` with calls marked: `calls`, as shown."""

        def __init__(self, action: str, calls: list[CallRow]) -> None:
            super().__init__()
            self.action, self.calls = action, calls

    def __init__(self, clock: Callable[[], float], keys_clock: Callable[[], float] = time.monotonic,
                 tools: ToolFacts | None = None, **kw: object) -> None:  # fmt: skip
        super().__init__(COLUMNS, state_columns=("state",), give_way=("arguments", "thread"),
                         **kw)  # fmt: skip
        self.clock = clock
        self.tools = tools or ToolFacts()  # whether a shell call may run outside the sandbox
        self.keys_clock = keys_clock  # for GUARD (seconds, monotonic); tests pass their own
        self.filter_text = ""
        self.decided: dict[str, str] = {}  # call id -> the action of its unapplied decision
        self._calls: dict[str, CallRow] = {}
        self._seen: dict[str, CallRow] = {}  # the calls drawn last (to name one that left)
        self._pending: dict[str, CallRow] = {}  # as last shown, to draw again when compacted
        self._thread_of: dict[str, str] = {}  # of the calls drawn, for the cursor's next row
        self.marked: dict[str, CallRow] = {}  # marked calls, as they were when marked
        # the row the cursor came to by itself, when, and what happened (for CHANGED)
        self._changed: tuple[str, float, str] | None = None
        self._near: set[str] = set()  # calls shown whose deadline is near (rows warned)
        self._told: set[str] = set()  # calls whose near deadline was notified
        self._pause_keys = False  # the keys offered are a pause's (the cursor is on one)

    def show_pending(
        self, pending: dict[str, CallRow], decided: dict[str, str] | None = None
    ) -> None:
        """Draw the pending calls (filtered), keeping the cursor on the same call; those
        in `decided` are marked so."""
        if decided is not None:
            self.decided = decided
        self._seen, self._pending = dict(self._calls), pending
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
            tool = (MARK if key in self.marked else "") + call.tool
            args, ago = args_text(call), age(now - call.updated_at)
            cells = (
                (f"{tool}\n{call.thread_id}", state, args, ago) if self.lines > 1 else
                (tool, state, args, call.thread_id, short_id(call.turn_id), ago)
            )  # fmt: skip
            rows[key] = (*cells[:2], left(call, now, key in near), *cells[2:]) if timed else cells
        for gone in [k for k in self.marked if k not in pending or k in self.decided]:
            del self.marked[gone]
        under = self.current_key()
        self.show(rows)
        self._thread_of = {k: c.thread_id for k, c in self._calls.items()}
        if (now_under := self.current_key()) != under and now_under is not None:
            why = ("a new call arrived under the cursor" if under is None or under in rows else
                   f"the call under the cursor ({self._what(under)}) is no longer waiting")  # fmt: skip
            self._changed = (now_under, self.keys_clock(), why)
        self._keys_follow()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A decision key is offered as the row under the cursor takes it: a breakpoint's
        pause its own (console/pause.py), any other call the others."""
        if action == "mark":  # a pause is decided on its own
            return not self._on_pause()
        if action != "decide" or not parameters:
            return True
        return offered(str(parameters[0]), self._on_pause())

    def _on_pause(self) -> bool:
        """The cursor is on a pause, and nothing is marked (a and x are the marks' then)."""
        key = self.current_key()
        return not self.marked and key is not None and is_pause(self._calls.get(key))

    def _keys_follow(self) -> None:
        """The footer says the row's keys again when the cursor went between a pause and
        a call."""
        if (pause := self._on_pause()) != self._pause_keys:
            self._pause_keys = pause
            self.refresh_bindings()

    def _what(self, key: str) -> str:
        call = self._pending.get(key) or self._seen.get(key)
        return f"{call.tool} on {call.thread_id}" if call is not None else key

    def row_height(self, key: str, cells: tuple[str, ...]) -> int:
        """A row's arguments wrap over up to ROW_LINES lines (two at least when compact)."""
        args = cells[self.labels.index("arguments")]
        room = self.room_of("arguments") or self.scrollable_content_region.width or 80
        return max(self.lines, min(ROW_LINES, len(wrapped(args, max(room, 2)))))

    def advance_from(self, call_id: str) -> None:
        """The operator decided `call_id`: the cursor goes to the next call still to decide
        (of its thread first), so the next key acts on it."""
        if self.current_key() != call_id:
            return
        keys = [k for k in self._calls if k not in self.decided or k == call_id]
        rest = {k: () for k in keys if k != call_id}
        nxt = self.successor(call_id, keys, rest)  # type: ignore[arg-type]
        if nxt is not None and nxt in self.rows:
            self.move_cursor(row=self.get_row_index(nxt), animate=False)

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
        has none left, the same position."""
        thread = self._thread_of.get(gone)
        at = before.index(gone) if gone in before else len(before)
        mine = [k for k in before if k in rows and self._thread_of.get(k) == thread]
        below = [k for k in mine if before.index(k) > at]
        if below or mine:
            return below[0] if below else mine[-1]
        return super().successor(gone, before, rows)

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
        if action in SANDBOX_ACTIONS and (refused := self._no_sandbox_choice(key, action)):
            self.notify(refused, title="Nothing decided", severity="warning")
            return
        if action != "details" and self.marked:
            if action not in ("approve", "cancel"):
                self.notify("Marked calls are approved (a) or denied (x) together; the other "
                            "keys decide one call: space unmarks.", severity="warning")  # fmt: skip
                return
            self.post_message(self.DecideMarked(action, list(self.marked.values())))
            return
        if key is None or key not in self._calls:
            if action != "details":
                self.notify("No decision is selected.", severity="warning")
            return
        call, ask = self._calls[key], ""
        if not offered(action, is_pause(call)):  # (the row changed as the key came)
            self.notify(f"{call.tool} on {call.thread_id} takes other keys: see the footer.",
                        title="Nothing decided", severity="warning")  # fmt: skip
            return
        if action != "details" and call.under_review:
            self.notify(f"{call.tool} call {call.call_id} was running when agentdeck stopped: "
                        "its outcome is unknown, so it takes a review, not a decision. Press ! "
                        "to review it.", title="Needs review", severity="warning")  # fmt: skip
            return
        changed = self._changed
        if action != "details" and key not in self.decided and changed is not None:
            if changed[0] == key and self.keys_clock() - changed[1] < CHANGED:
                ask = f"This row changed just now: {changed[2]}."
        self.post_message(self.Decide(action, call, ask))

    def _no_sandbox_choice(self, key: str | None, action: str) -> str:
        """Why the call under the cursor cannot be approved outside the sandbox (or with
        the network); "" when it can."""
        call = self._calls.get(key) if key is not None and not self.marked else None
        if call is None:
            return "O and N approve one shell call (under the cursor, none marked) another way."
        if call.tool != "shell":
            return f"{call.tool} does not run in the sandbox: only a shell call does."
        sandbox = self.tools.sandbox_state()
        if sandbox != "on":
            return ("There is no sandbox to leave: a approves it as it is." if sandbox != "unknown"
                    else "The sandbox is not known yet: a approves it as the room runs it.")  # fmt: skip
        if not self.tools.offers(call.tool, action):
            return "The sandbox lets commands reach the network already: a approves it so."
        return ""

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The operator's own move (a key, a click): what is under the cursor now is theirs."""
        changed = self._changed
        if changed is not None and event.row_key.value != changed[0]:
            self._changed = None
        self._keys_follow()

    def action_copy(self, what: str) -> None:
        key = self.current_key()
        copy_call(
            self, self._calls.get(key) if key else None, "output" if what == "output" else "command"
        )

    def action_mark(self) -> None:
        """Mark the call under the cursor (or unmark it), then go to the next row."""
        key = self.current_key()
        if key is None or key not in self._calls or key in self.decided:
            return
        if is_pause(self._calls[key]):
            self.notify("A breakpoint's pause is decided on its own: a continues, n steps, "
                        "x ends its turn.", severity="warning")  # fmt: skip
            return
        if self.marked.pop(key, None) is None:
            self.marked[key] = as_shown(self._calls[key])
        self.show_pending(self._pending)
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1, animate=False)

    def action_mark_thread(self) -> None:
        """Mark every waiting call of the cursor's thread (unmark them when all are)."""
        key = self.current_key()
        if key is None or key not in self._calls:
            return
        thread = self._calls[key].thread_id
        mine = {k: c for k, c in self._calls.items()
                if c.thread_id == thread and k not in self.decided and not c.under_review
                and not is_pause(c)}  # fmt: skip
        if mine.keys() <= self.marked.keys():
            for k in mine:
                del self.marked[k]
        else:
            self.marked.update((k, as_shown(c)) for k, c in mine.items() if k not in self.marked)
        self.show_pending(self._pending)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_decide("details")


def as_shown(call: CallRow) -> CallRow:
    """A copy of `call` as it is now: a decision on it is bound to these arguments."""
    return replace(call, args=copy.deepcopy(call.args))


def args_text(call: CallRow) -> str:
    """A call's arguments as its row shows them: a `shell` call's command itself, any other
    call's JSON on one line."""
    args = call.args
    if is_pause(call):
        return summary(call, ARGS_PREVIEW)
    if call.tool == "shell" and isinstance(args, dict) and isinstance(args.get("command"), str):
        rest = {k: v for k, v in args.items() if k != "command"}
        command = args["command"][:ARGS_PREVIEW]
        return f"$ {command}" + (f"  {one_line(rest, 200)}" if rest else "")
    return one_line(args, ARGS_PREVIEW)


def _state(call: CallRow) -> str:
    """The state word of a waiting call: a call a crash left for review says so, a
    breakpoint's pause is "paused"."""
    return "review" if call.under_review else "paused" if is_pause(call) else call.status
