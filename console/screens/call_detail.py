"""The whole of one tool call: its arguments in full (first: what is decided on), its
result or error, and its facts and timings.

For a waiting call it has the decision keys too: the operator approves what they see.
The screen only says which key was pressed (it is dismissed with the action); the main
screen decides, through the same path as the decision queue's keys, bound to the
arguments this screen showed. On a call that takes no decision (not waiting, or decided
already) the keys say why and do nothing. A breakpoint's pause shows what it paused on
(console/pause.py) and takes a pause's keys: continue, step, edit, end the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen

from console.call_args import shown_args
from console.call_output import OutputTail
from console.copying import copy_call
from console.format import clock_time, duration, facts, plain, visible
from console.glyphs import look
from console.pause import headline, is_pause, offered
from console.pause import sections as pause_sections
from console.spinner import FPS
from console.state import CallRow
from console.widgets.text import Label, Static
from engine.lifecycle import CallStatus

Refusal = Callable[[CallRow], "str | None"]  # why a call takes no decision now (None: it does)
LIVE_LINES = 40  # lines of a running call's output the view follows


class CallDetailScreen(ModalScreen[str | None]):
    """Esc or q closes it; a decision key closes it with its action."""

    BINDINGS = [
        Binding("escape,q", "dismiss(None)", "Close"),
        Binding("a", "decide('approve')", "Approve"),
        Binding("a", "decide('continue')", "Continue"),
        Binding("n", "decide('step')", "Step"),
        Binding("x", "decide('cancel')", "Cancel call"),
        Binding("x", "decide('end_turn')", "End turn"),
        Binding("e", "decide('edit')", "Edit+approve"),
        Binding("e", "decide('edit_pause')", "Edit+continue"),
        Binding("u", "decide('use')", "Use a result"),
        Binding("A", "decide('remember')", "Approve+remember"),
        Binding("R", "decide('remember_room')", "Approve+remember room", show=False),
        Binding("y", "copy('command')", "Copy command"),
        Binding("Y", "copy('output')", "Copy output"),
    ]

    def __init__(self, call: CallRow, refusal: Refusal | None = None,
                 workspace: Path | None = None,
                 tail_of: Callable[[str], OutputTail | None] | None = None) -> None:  # fmt: skip
        super().__init__()
        self.call, self.refusal, self.workspace = call, refusal, workspace
        self.tail_of = tail_of  # what a running call has printed so far (console/state.py)
        self._followed = -1  # the version of its output last drawn
        self._printed = Text()  # and that output, drawn

    def why_not(self) -> str | None:
        """Why the call shown takes no decision here (None: it does)."""
        if self.refusal is None:
            return "Decisions are not taken from this view."
        return self.refusal(self.call)

    def compose(self) -> ComposeResult:
        call = self.call
        state = look(call.status)
        took = call.ended_at - call.created_at if call.ended_at is not None else None
        known = facts((
            ("call", call.call_id), ("tool", call.tool),
            ("state", f"{state.glyph} {state.word}"),
            ("thread", call.thread_id), ("turn", call.turn_id),
            ("created", clock_time(call.created_at)), ("updated", clock_time(call.updated_at)),
            ("took", duration(took) if took is not None else "not finished"),
        ))  # fmt: skip
        waiting = call.status == CallStatus.SUSPENDED and self.why_not() is None
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Pause {call.call_id} · {headline(call)}" if is_pause(call) else
                        f"Call {call.call_id} · {call.tool}", id="question")  # fmt: skip
            with VerticalScroll(id="dialog-body"):
                shown = (pause_sections(call, self.workspace) if is_pause(call) else
                         shown_args(call.tool, call.args, self.workspace))  # fmt: skip
                for n, (label, body) in enumerate(shown):
                    yield Label(label, classes="section")
                    yield Static(body, id="detail-args" if n == 0 else f"detail-args-{n}")
                if call.status == CallStatus.RUNNING and self.tail_of is not None:
                    yield Label("output, as it runs", classes="section")
                    yield Static("(nothing printed yet)", id="detail-output")
                if call.result is not None:
                    yield Label("result", classes="section")
                    yield Static(plain(call.result, lines=True), id="detail-result")
                if call.error:
                    label = "waiting because" if call.status == CallStatus.SUSPENDED else "error"
                    yield Label(label, classes="section")
                    yield Static(plain(call.error, lines=True), id="detail-error")
                yield Label("details", classes="section")
                yield Static(known)
            hint = "The decision keys (below) act on exactly what is shown · Esc closes"
            yield Label(hint if waiting else "Esc closes", classes="hint")

    def on_mount(self) -> None:
        if self.call.status == CallStatus.RUNNING and self.tail_of is not None:
            self.set_interval(1 / FPS, self._follow, name="output")

    def _follow(self) -> None:
        """Draw what the running call printed since the last look (its last LIVE_LINES
        lines); once it has ended, say where its result is."""
        assert self.tail_of is not None
        tail, shown = self.tail_of(self.call.call_id), self.query_one("#detail-output", Static)
        if tail is None:  # never printed, or ended (its tail goes with it)
            if self._followed >= 0:
                self._followed = -2
                self._printed.append("\n(it has ended: its result is in the chat and the "
                                     "calls pane)", "italic")  # fmt: skip
                shown.update(self._printed)
            return
        if tail.version == self._followed:
            return
        self._followed = tail.version
        self._printed = text = Text()
        for n, (stream, line) in enumerate(tail.last(LIVE_LINES)):
            text.append(("\n" if n else "") + visible(line.expandtabs()),
                        "red" if stream == "stderr" else "dim" if stream == "skipped" else "")  # fmt: skip
        shown.update(text)

    def action_copy(self, what: str) -> None:
        copy_call(self, self.call, "output" if what == "output" else "command")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A pause's keys for a pause, a call's for a call (console/pause.py)."""
        if action != "decide" or not parameters:
            return True
        return offered(str(parameters[0]), is_pause(self.call))

    def action_decide(self, action: str) -> None:
        if (why := self.why_not()) is not None:
            self.notify(why, title="Nothing decided", severity="warning")
            return
        self.dismiss(action)
