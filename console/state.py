"""The console's view state, folded from runtime events; no Textual here.

The bridge folds a frame's worth of events at once and learns from the returned `Changes`
which panes need redrawing. Everything held is bounded (the timeline keeps the newest
`MAX_STEPS` steps, finished turns beyond `MAX_TURNS` are forgotten), so the console's
memory does not grow with the runtime's age.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.events import (
    CallChanged,
    DecisionRecorded,
    Event,
    MessageAppended,
    Notice,
    StepFinished,
    StepStarted,
    TextDelta,
    TurnChanged,
    TurnStarted,
)

MAX_STEPS = 5_000
MAX_TURNS = 2_000
MAX_CHAT = 500  # entries kept per thread


@dataclass
class StepRow:
    """One timeline line."""

    seq: int  # position in the timeline, never reused
    step_id: int
    at: float
    thread_id: str
    turn_id: str
    kind: str
    status: str = "running"
    duration: float | None = None
    summary: str = ""


@dataclass
class CallRow:
    """One tool call as the calls pane and the decision queue show it."""

    call_id: str
    turn_id: str
    thread_id: str
    tool: str
    args: Any
    status: str
    result: str | None = None
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None


@dataclass
class TurnRow:
    """A turn's lifecycle and its calls, in order."""

    turn_id: str
    thread_id: str
    status: str = "running"
    reason: str | None = None
    started_at: float = 0.0
    text: str = ""
    calls: list[str] = field(default_factory=list)


@dataclass
class ChatEntry:
    """One line of a conversation: operator, agent or tool."""

    role: str
    text: str
    turn_id: str = ""


@dataclass
class ThreadView:
    """A thread's conversation as the chat pane draws it, plus the answer streaming now."""

    thread_id: str
    entries: deque[ChatEntry] = field(default_factory=lambda: deque(maxlen=MAX_CHAT))
    streaming: str = ""
    loaded: bool = False


@dataclass
class Changes:
    """What one fold touched; the screen redraws only these."""

    steps: bool = False
    threads: set[str] = field(default_factory=set)
    turns: set[str] = field(default_factory=set)
    pending: bool = False
    new_pending: int = 0
    notices: list[Notice] = field(default_factory=list)
    decisions: list[DecisionRecorded] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.steps or self.threads or self.turns or self.pending or self.notices)


class DeckState:
    """Everything the panes draw, kept current by `fold`."""

    def __init__(self) -> None:
        self.steps: deque[StepRow] = deque(maxlen=MAX_STEPS)
        self._step_by_id: dict[int, StepRow] = {}
        self._seq = 0
        self.turns: OrderedDict[str, TurnRow] = OrderedDict()
        self.calls: dict[str, CallRow] = {}
        self.pending: dict[str, CallRow] = {}  # suspended calls, oldest first
        self.threads: dict[str, ThreadView] = {}
        self.events_folded = 0

    # -- reading ----------------------------------------------------------------------------

    def thread(self, thread_id: str) -> ThreadView:
        view = self.threads.get(thread_id)
        if view is None:
            view = self.threads[thread_id] = ThreadView(thread_id)
        return view

    def calls_of(self, turn_id: str) -> list[CallRow]:
        turn = self.turns.get(turn_id)
        return [self.calls[c] for c in turn.calls if c in self.calls] if turn else []

    def counts(self) -> tuple[int, int]:
        """Turns running and turns waiting for a decision."""
        running = sum(t.status == "running" for t in self.turns.values())
        waiting = sum(t.status == "waiting" for t in self.turns.values())
        return running, waiting

    def active_turn(self, thread_id: str) -> TurnRow | None:
        """The thread's newest turn that is not done."""
        for turn in reversed(self.turns.values()):
            if turn.thread_id == thread_id and turn.status != "done":
                return turn
        return None

    # -- seeding from history ---------------------------------------------------------------

    def add_step(self, row: StepRow) -> None:
        self._seq += 1
        row.seq = self._seq
        if len(self.steps) == self.steps.maxlen:
            self._step_by_id.pop(self.steps[0].step_id, None)
        self.steps.append(row)
        self._step_by_id[row.step_id] = row

    def add_turn(self, turn: TurnRow) -> None:
        self.turns[turn.turn_id] = turn

    def add_call(self, call: CallRow) -> None:
        self.calls[call.call_id] = call
        turn = self.turns.get(call.turn_id)
        if turn is not None and call.call_id not in turn.calls:
            turn.calls.append(call.call_id)
        if call.status == "suspended":
            self.pending[call.call_id] = call

    # -- folding ----------------------------------------------------------------------------

    def fold(self, events: Iterable[Event]) -> Changes:
        """Apply a batch of events, in order; say what changed."""
        ch = Changes()
        for event in events:
            self.events_folded += 1
            match event:
                case TextDelta():
                    view = self.thread(event.thread_id)
                    view.streaming += event.text
                    ch.threads.add(event.thread_id)
                case MessageAppended():
                    view = self.thread(event.thread_id)
                    view.entries.append(ChatEntry(event.role, event.text, event.turn_id))
                    if event.role == "assistant":
                        view.streaming = ""
                    ch.threads.add(event.thread_id)
                case StepStarted():
                    if event.step_id in self._step_by_id:  # already read from history
                        continue
                    self.add_step(
                        StepRow(0, event.step_id, event.at, event.thread_id, event.turn_id,
                                event.step_kind)
                    )  # fmt: skip
                    ch.steps = True
                case StepFinished():
                    row = self._step_by_id.get(event.step_id)
                    if row is not None:
                        row.status, row.duration = event.status, event.duration
                        row.summary = event.summary
                        ch.steps = True
                case TurnStarted():
                    self.add_turn(
                        TurnRow(event.turn_id, event.thread_id, "running", None, event.at,
                                event.text)
                    )  # fmt: skip
                    ch.turns.add(event.turn_id)
                case TurnChanged():
                    turn = self._turn(event.turn_id, event.thread_id, event.at)
                    turn.status, turn.reason = event.status, event.reason
                    ch.turns.add(event.turn_id)
                    if event.status == "done":
                        self.thread(event.thread_id).streaming = ""
                        ch.threads.add(event.thread_id)
                case CallChanged():
                    self._fold_call(event, ch)
                case DecisionRecorded():
                    ch.decisions.append(event)
                case Notice():
                    ch.notices.append(event)
        if ch.turns:
            self._trim_turns()
        return ch

    def _turn(self, turn_id: str, thread_id: str, at: float) -> TurnRow:
        turn = self.turns.get(turn_id)
        if turn is None:
            turn = self.turns[turn_id] = TurnRow(turn_id, thread_id, started_at=at)
        return turn

    def _fold_call(self, event: CallChanged, ch: Changes) -> None:
        call = self.calls.get(event.call_id)
        if call is None:
            call = CallRow(event.call_id, event.turn_id, event.thread_id, event.tool, event.args,
                           event.status, created_at=event.at)  # fmt: skip
            self.calls[call.call_id] = call
            self._turn(event.turn_id, event.thread_id, event.at).calls.append(call.call_id)
        call.args, call.status, call.updated_at = event.args, event.status, event.at
        call.result, call.error = event.result, event.error
        if event.status in ("succeeded", "failed", "cancelled"):
            call.ended_at = event.at
        ch.turns.add(event.turn_id)
        if event.status == "suspended":
            if call.call_id not in self.pending:
                self.pending[call.call_id] = call
                ch.new_pending += 1
            ch.pending = True
        elif self.pending.pop(call.call_id, None) is not None:
            ch.pending = True

    def _trim_turns(self) -> None:
        """Forget the oldest finished turns (and their calls) beyond MAX_TURNS."""
        excess = len(self.turns) - MAX_TURNS
        if excess <= 0:
            return
        old: list[str] = []
        for turn in self.turns.values():  # oldest first; unfinished turns are kept
            if turn.status == "done":
                old.append(turn.turn_id)
                if len(old) == excess:
                    break
        for turn_id in old:
            for call_id in self.turns.pop(turn_id).calls:
                self.calls.pop(call_id, None)
