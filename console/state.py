"""The console's view state, folded from runtime events; no Textual here.

The bridge folds a frame's worth of events at once and learns from the returned `Changes`
which panes need redrawing. Everything held is bounded (the timeline keeps the newest
`MAX_STEPS` steps, finished turns beyond `MAX_TURNS` are forgotten with their calls, a
conversation is kept only for the `MAX_LOADED_THREADS` threads last opened), so the
console's memory does not grow with the runtime's age.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import assert_never

from console.call_output import CALLS, OutputTail
from console.rows import CallRow, Changes, TurnRow
from console.spend import TodaySpend
from console.steps import StepLog, StepRow
from console.threads import ChatEntry, ThreadView, turn_note, via
from console.tool_facts import ToolFacts
from engine.api import watch
from engine.domain.events import (
    CallChanged,
    CallOutput,
    DecisionRecorded,
    DeliveryChanged,
    Event,
    MessageAppended,
    Notice,
    StepFinished,
    StepStarted,
    TextDelta,
    TurnChanged,
    TurnStarted,
)
from engine.lifecycle import CallStatus, DecisionStatus, StepStatus, TurnStatus

MAX_STEPS = 5_000
MAX_TURNS = 2_000
WATCHED = (watch.QUEUE, watch.COUNTS, watch.NOTICES, watch.ACTIVITY)  # and the shown threads
MAX_LOADED_THREADS = 16  # threads whose conversation is kept in memory


class DeckState:
    """Everything the panes draw, kept current by `fold`."""

    def __init__(self) -> None:
        self.steps = StepLog(MAX_STEPS)
        self.tools = ToolFacts()  # (read with the room's state, and kept: the panes hold it)
        self.events_folded = 0
        self.clear()

    def clear(self) -> None:
        """Forget everything (events were missed: the state is read again from the room).
        The step log stays the same object: the timeline draws from it."""
        self.steps.clear()
        self._step_by_id: dict[int, int] = {}  # step id -> seq of its row
        self._seq = 0
        self.turns: OrderedDict[str, TurnRow] = OrderedDict()
        self._by_status: dict[TurnStatus, int] = {}  # turns per status, so `counts` is O(1)
        # the turns not done, in the order of `turns`: what runs is found without a scan
        # of the thousands that are done (the spinner and the status bar ask every frame)
        self._open: dict[str, TurnRow] = {}
        self.calls: dict[str, CallRow] = {}
        # each thread's context: its newest inference's input tokens, the window, the model
        self.context: dict[str, tuple[int, int | None, str | None]] = {}
        # what running calls printed (the last lines of each), until they end
        self.output: OrderedDict[str, OutputTail] = OrderedDict()
        self.pending: dict[str, CallRow] = {}  # suspended calls, oldest first
        # calls a decision was recorded for (its action), not yet applied: the turn is busy
        self.decided: dict[str, str] = {}
        self.threads: dict[str, ThreadView] = {}
        self._shown: OrderedDict[str, None] = OrderedDict()  # loaded threads, least recent first
        self._recent: OrderedDict[str, None] = OrderedDict()  # every thread, most recent first
        self.spend = TodaySpend()  # the room's spend today, and what its budgets hold

    # -- reading ----------------------------------------------------------------------------

    def thread(self, thread_id: str) -> ThreadView:
        view = self.threads.get(thread_id)
        if view is None:
            view = self.threads[thread_id] = ThreadView(thread_id)
        return view

    @property
    def recent_threads(self) -> list[str]:
        """Every thread known, most recently used first (the room's, and those opened here)."""
        return list(self._recent)

    def note_thread(self, thread_id: str) -> None:
        """`thread_id` was used now (a turn started on it, the operator opened it): it goes
        first in `recent_threads`, as the room orders its threads."""
        self._recent[thread_id] = None
        self._recent.move_to_end(thread_id, last=False)

    def show_thread(self, thread_id: str) -> ThreadView:
        """The view of a thread the operator opens; the least recently opened beyond
        `MAX_LOADED_THREADS` drop their entries (they are re-read if opened again)."""
        view = self.thread(thread_id)
        self._shown[thread_id] = None
        self._shown.move_to_end(thread_id)
        while len(self._shown) > MAX_LOADED_THREADS:
            old, _ = self._shown.popitem(last=False)
            if (stale := self.threads.get(old)) is not None:
                stale.loaded = False
                stale.replace(())
                if not stale.streaming:
                    del self.threads[old]
        return view

    def lanes(self) -> list[str]:
        """What the console watches of the runtime's events (engine/api/watch.py): the
        queue, the counts, notices, every thread's steps and calls (the timeline and the
        calls pane), and all of the threads whose chat it keeps (their messages and the
        answer as it streams). A thread whose id no lane can name (empty, or longer than
        a lane takes) makes it watch everything instead: correct, if costlier."""
        threads = [watch.thread(t) for t in self._shown]
        if any(watch.lane_problem(name) for name in threads):
            return [watch.ALL]
        return [*WATCHED, *threads]

    def calls_of(self, turn_id: str) -> list[CallRow]:
        turn = self.turns.get(turn_id)
        return [self.calls[c] for c in turn.calls if c in self.calls] if turn else []

    def counts(self) -> tuple[int, int]:
        """Turns running and turns waiting for a decision."""
        by_status = self._by_status
        return by_status.get(TurnStatus.RUNNING, 0), by_status.get(TurnStatus.WAITING, 0)

    def active_turn(self, thread_id: str) -> TurnRow | None:
        """The thread's newest turn that is not done."""
        for turn in reversed(self._open.values()):
            if turn.thread_id == thread_id:
                return turn
        return None

    def oldest_running(self) -> TurnRow | None:
        """The turn that has run longest of those running now."""
        return next((t for t in self._open.values() if t.status == TurnStatus.RUNNING), None)

    def sizes(self) -> dict[str, int]:
        """How much is held, for the benchmark and for tests of the bounds."""
        return {
            "steps": len(self.steps),
            "step index": len(self._step_by_id),  # bounded with the steps it finds
            "turns": len(self.turns),
            "calls": len(self.calls),
            "pending": len(self.pending),
            "decided": len(self.decided),
            "threads": len(self.threads),
            "chat entries": sum(len(v.entries) for v in self.threads.values()),
            "output lines": sum(len(t.lines) for t in self.output.values()),
        }

    # -- seeding from history ---------------------------------------------------------------

    def add_step(self, row: StepRow) -> None:
        self._seq += 1
        steps = self.steps
        if len(steps) == steps.maxlen:
            self._step_by_id.pop(steps[0].step_id, None)
        steps.append(row._replace(seq=self._seq))
        self._step_by_id[row.step_id] = self._seq

    def _finish_step(self, seq: int, status: str, duration: float, summary: str) -> None:
        # Rows are numbered without gaps, so a row's place follows from its seq; counting
        # from the right end finds recent steps (the ones that finish) at once.
        steps = self.steps
        at = seq - self._seq - 1
        if -len(steps) <= at < 0:
            steps[at] = steps[at]._replace(status=status, duration=duration, summary=summary)

    def _running(self, seq: int) -> bool:
        """Whether the step of row `seq` is still running here (or its row is gone)."""
        steps, at = self.steps, seq - self._seq - 1
        return not -len(steps) <= at < 0 or steps[at].status == StepStatus.RUNNING

    def add_turn(self, turn: TurnRow) -> None:
        by_status = self._by_status
        old = self.turns.get(turn.turn_id)
        if old is not None:
            by_status[old.status] -= 1
        self.turns[turn.turn_id] = turn
        by_status[turn.status] = by_status.get(turn.status, 0) + 1
        if turn.status == TurnStatus.DONE:
            self._open.pop(turn.turn_id, None)
        elif old is None or turn.turn_id in self._open:
            self._open[turn.turn_id] = turn  # (at the end, as in `turns`; or where it was)
        else:  # a done turn read as open again (a read older than an event): in order
            self._reopen()

    def _reopen(self) -> None:
        self._open = {k: t for k, t in self.turns.items() if t.status != TurnStatus.DONE}

    def add_call(self, call: CallRow) -> None:
        """A call read from the room; one an event folded since the read is newer, and
        stays (found by CI: a call put up for review showed `running` in the state)."""
        known = self.calls.get(call.call_id)
        if known is not None and known.updated_at > call.updated_at:
            return
        self.calls[call.call_id] = call
        if call.status != CallStatus.SUSPENDED:
            self.pending.pop(call.call_id, None)
        turn = self.turns.get(call.turn_id)
        if turn is not None and call.call_id not in turn.calls:
            turn.calls.append(call.call_id)
        if call.status == CallStatus.SUSPENDED:
            self.pending[call.call_id] = call

    # -- folding ----------------------------------------------------------------------------

    def fold(self, events: Iterable[Event], ch: Changes | None = None) -> Changes:
        """Apply a batch of events, in order; say what changed (added to `ch` if given)."""
        ch = Changes() if ch is None else ch
        threads, changed_threads, changed_turns = self.threads, ch.threads, ch.turns
        step_by_id = self._step_by_id
        folded = 0
        for event in events:
            folded += 1
            match event:
                case TextDelta():
                    view = threads.get(event.thread_id) or self.thread(event.thread_id)
                    view._parts.append(event.text)
                    changed_threads.add(event.thread_id)
                case StepStarted():
                    if event.step_id in step_by_id:  # already read from history
                        continue
                    of_turn = self.turns.get(event.turn_id)
                    self.add_step(
                        StepRow(0, event.step_id, event.at, event.thread_id, event.turn_id,
                                event.step_kind, group=of_turn.group if of_turn else None,
                                channel=of_turn.channel if of_turn else None)
                    )  # fmt: skip
                    ch.steps = True
                case StepFinished():
                    seq = step_by_id.get(event.step_id)
                    # (one the room's read showed finished is in today's spend as read)
                    if (event.input_tokens or event.output_tokens) and (
                        seq is None or self._running(seq)
                    ):
                        ch.spend = self.spend.step(event) or ch.spend
                    if seq is not None:
                        # the plain word: the step ring holds tuples the GC does not track
                        status = event.status.value
                        self._finish_step(seq, status, event.duration, event.summary)
                        ch.steps = True
                    if event.input_tokens or event.output_tokens:
                        turn = self._turn(event.turn_id, event.thread_id, event.at)
                        turn.input_tokens += event.input_tokens
                        turn.output_tokens += event.output_tokens
                        ch.turns.add(event.turn_id)
                        if event.step_kind == "inference" and event.input_tokens:
                            self.context.pop(event.thread_id, None)  # (newest last)
                            self.context[event.thread_id] = (event.input_tokens, turn.window,
                                                             turn.model)  # fmt: skip
                            if len(self.context) > MAX_TURNS:
                                del self.context[next(iter(self.context))]
                case MessageAppended():
                    view = threads.get(event.thread_id) or self.thread(event.thread_id)
                    if view.loaded:  # otherwise it is read from history when opened
                        view.append(ChatEntry(event.role, event.text, event.turn_id,
                                              self._via(event.role, event.turn_id),
                                              event.seq))  # fmt: skip
                    if event.role == "assistant":
                        view.streaming = ""
                    changed_threads.add(event.thread_id)
                case CallChanged():
                    self._fold_call(event, ch)
                case CallOutput():  # drawn with the spinner, which runs while a turn does
                    tail = self.output.get(event.call_id)
                    if tail is None:
                        tail = self.output[event.call_id] = OutputTail()
                        if len(self.output) > CALLS:
                            self.output.popitem(last=False)
                    tail.add(event.stream, event.text, event.skipped)
                case TurnStarted():
                    self.note_thread(event.thread_id)
                    self.add_turn(
                        TurnRow(event.turn_id, event.thread_id, TurnStatus.RUNNING, None, event.at,
                                event.text, group=event.group, channel=event.channel,
                                sender=event.sender, model=event.model, window=event.window)
                    )  # fmt: skip
                    changed_turns.add(event.turn_id)
                case TurnChanged():
                    turn = self._turn(event.turn_id, event.thread_id, event.at)
                    self._set_status(turn, event.status)
                    turn.reason = event.reason
                    if event.group is not None:
                        turn.group = event.group
                    changed_turns.add(event.turn_id)
                    if event.status == TurnStatus.DONE:
                        self._turn_done(event.thread_id, event.turn_id,
                                        turn_note(event.reason, event.detail))  # fmt: skip
                        changed_threads.add(event.thread_id)
                case DecisionRecorded():
                    ch.decisions.append(event)
                    self._fold_decision(event, ch)
                case Notice():
                    ch.notices.append(event)
                    ch.spend = self.spend.notice(event) or ch.spend
                case DeliveryChanged():  # the channels screen reads the outbox (issue 17)
                    ch.deliveries += 1
                case _:  # a kind the engine added and the console does not fold yet
                    assert_never(event)
        self.events_folded += folded
        ch.events += folded
        if len(self.turns) > MAX_TURNS:
            self._trim_turns()
        return ch

    def _via(self, role: str, turn_id: str) -> str:
        """Who sent a channel turn's message, and through which channel ("" otherwise, and
        for the console's own: "you")."""
        turn = self.turns.get(turn_id) if role == "user" else None
        return "" if turn is None else via(turn.channel, turn.sender)

    def _turn_done(self, thread_id: str, turn_id: str, note: str | None) -> None:
        view = self.threads.get(thread_id)
        if view is not None:
            view.streaming = ""
            if not view.loaded:  # nothing left to show for a thread nobody opened
                del self.threads[thread_id]
            elif note is not None:
                view.append(ChatEntry("system", note, turn_id))

    def _set_status(self, turn: TurnRow, status: TurnStatus) -> None:
        if status != turn.status:
            by_status = self._by_status
            by_status[turn.status] -= 1
            by_status[status] = by_status.get(status, 0) + 1
            was_done, turn.status = turn.status == TurnStatus.DONE, status
            if status == TurnStatus.DONE:
                self._open.pop(turn.turn_id, None)
            elif was_done:
                self._reopen()

    def _turn(self, turn_id: str, thread_id: str, at: float) -> TurnRow:
        turn = self.turns.get(turn_id)
        if turn is None:
            turn = TurnRow(turn_id, thread_id, started_at=at)
            self.add_turn(turn)
        return turn

    def _fold_call(self, event: CallChanged, ch: Changes) -> None:
        call = self.calls.get(event.call_id)
        if call is None:
            call = CallRow(event.call_id, event.turn_id, event.thread_id, event.tool, event.args,
                           event.status, created_at=event.at)  # fmt: skip
            self.calls[call.call_id] = call
            self._turn(event.turn_id, event.thread_id, event.at).calls.append(call.call_id)
        call.args, call.status, call.updated_at = event.args, event.status, event.at
        call.deadline_at, call.on_deadline = event.deadline_at, event.on_deadline
        call.result, call.error, call.awaiting = event.result, event.error, event.awaiting
        if event.status.terminal:
            call.ended_at = event.at
            self.output.pop(call.call_id, None)  # its result is the record now
        ch.turns.add(event.turn_id)
        if event.status.terminal or event.status == CallStatus.RESUMING:
            self.decided.pop(call.call_id, None)  # its decision is applied (or it ended)
        if event.status == CallStatus.SUSPENDED:
            if call.call_id not in self.pending:
                self.pending[call.call_id] = call
                ch.new_pending += 1
                ch.new_pending_threads.append(call.thread_id)
            ch.pending = True
        elif self.pending.pop(call.call_id, None) is not None:
            ch.pending = True

    def mark_decided(self, call_id: str, action: str) -> None:
        """A decision on `call_id` is on its way (this console sent it): the call takes no
        other until it is applied or refused."""
        self.decided[call_id] = action

    def _fold_decision(self, event: DecisionRecorded, ch: Changes) -> None:
        if event.status == DecisionStatus.QUEUED:
            self.decided[event.call_id] = event.action
        elif event.status in (DecisionStatus.APPLIED, DecisionStatus.REFUSED):
            self.decided.pop(event.call_id, None)  # refused: the call takes a decision again
        else:  # a duplicate leaves the mark of the decision that won; superseded, the newer's
            return
        ch.pending = ch.pending or event.call_id in self.pending

    def _trim_turns(self) -> None:
        """Forget the oldest finished turns (and their calls) beyond MAX_TURNS."""
        excess = len(self.turns) - MAX_TURNS
        if excess <= 0:
            return
        old: list[str] = []
        for turn in self.turns.values():  # oldest first; unfinished turns are kept
            if turn.status == TurnStatus.DONE:
                old.append(turn.turn_id)
                if len(old) == excess:
                    break
        for turn_id in old:
            turn = self.turns.pop(turn_id)
            self._by_status[turn.status] -= 1
            for call_id in turn.calls:
                self.calls.pop(call_id, None)
