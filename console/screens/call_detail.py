"""The whole of one tool call: full arguments, result or error, and its timings."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from console.format import clock_time, duration, pretty
from console.glyphs import look
from console.state import CallRow
from engine.lifecycle import CallStatus


class CallDetailScreen(ModalScreen[None]):
    """Read-only; Esc or q closes it."""

    BINDINGS = [Binding("escape,q", "dismiss(None)", "Close")]

    def __init__(self, call: CallRow) -> None:
        super().__init__()
        self.call = call

    def compose(self) -> ComposeResult:
        call = self.call
        state = look(call.status)
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        took = call.ended_at - call.created_at if call.ended_at is not None else None
        for name, value in (
            ("call", call.call_id), ("tool", call.tool),
            ("state", f"{state.glyph} {state.word}"),
            ("thread", call.thread_id), ("turn", call.turn_id),
            ("created", clock_time(call.created_at)), ("updated", clock_time(call.updated_at)),
            ("took", duration(took) if took is not None else "not finished"),
        ):  # fmt: skip
            facts.add_row(name, value)
        with Vertical(id="dialog", classes="wide"):
            yield Label(f"Call {call.call_id} · {call.tool}", id="question")
            with VerticalScroll(id="dialog-body"):
                yield Static(facts)
                yield Label("arguments", classes="section")
                yield Static(Text(pretty(call.args)), id="detail-args")
                if call.result is not None:
                    yield Label("result", classes="section")
                    yield Static(Text(call.result), id="detail-result")
                if call.error:
                    label = "waiting because" if call.status == CallStatus.SUSPENDED else "error"
                    yield Label(label, classes="section")
                    yield Static(Text(call.error), id="detail-error")
            yield Label("Esc closes", classes="hint")
