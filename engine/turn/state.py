"""A turn as its loop drives it, and the small records of one inference."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from engine.domain.instructions import Instructions
from engine.domain.messages import ConvMessage
from engine.domain.outcome import TurnOutcome
from engine.domain.usage import Usage
from engine.lifecycle import CallStatus, TurnStatus
from engine.providers.base import AssistantAccumulator
from engine.store import Op
from engine.store import turns as rows
from engine.turn.call import CallState
from engine.turn.plugins import StopRequest

SUMMARY_NAMES = 3  # calls a round's step summary names one by one; more are counted


def reply_of(meta: dict[str, Any]) -> dict[str, Any]:
    """Where a channel's answer goes: the request's `meta["reply"]` ({} if it has none)."""
    reply = meta.get("reply") if isinstance(meta, dict) else None
    return reply if isinstance(reply, dict) else {}


@dataclass
class TurnState:
    """One turn as the loop drives it."""

    id: str
    thread_id: str
    status: TurnStatus
    started_at: float
    strategy: str = "react"
    reason: str | None = None
    detail: str | None = None
    rounds: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    final_text: str | None = None
    group: str = "chat"
    cached_tokens: int = 0  # of input_tokens, read from the provider's cache
    cost: float = 0.0  # US dollars of its priced tokens
    unpriced: int = 0  # its tokens whose model has no known price
    last: Usage = field(default_factory=Usage)  # its last inference's (the next costs as much)
    channel: str | None = None  # the request's channel (origin chat)
    reply: dict[str, Any] = field(default_factory=dict)  # its meta["reply"]: where answers go
    record: dict[str, Any] = field(default_factory=dict)  # strategy data, e.g. tool_logs
    instructions: Instructions = field(default_factory=Instructions)  # what it is told
    model: str | None = None  # `provider:model` that answers it (None: the room's)
    calls: dict[str, CallState] = field(default_factory=dict)
    # Calls not yet seen settled, so that suspended() costs the same late in a long turn.
    _open: dict[str, CallState] = field(default_factory=dict, repr=False)
    # its breakpoints' pauses (engine/turn/breaks.py), oldest first: few, looked at often
    pauses: list[CallState] = field(default_factory=list, repr=False)
    written: tuple[Any, ...] | None = field(default=None, repr=False)  # the row as last written

    @classmethod
    def from_row(cls, row: Any, reply: dict[str, Any]) -> TurnState:
        """The turn as its execution.db row has it (its calls are added apart)."""
        return cls(
            row["id"], row["thread_id"], TurnStatus(row["status"]), row["created_at"],
            row["strategy"], row["reason"], row["detail"], row["rounds"], row["input_tokens"],
            row["output_tokens"], row["final_text"], group=row["group_name"],
            record=json.loads(row["record"] or "{}"),  # the strategy's data: tool_logs, …
            channel=row["channel"], reply=reply, model=row["model"],
            cached_tokens=row["cached_tokens"], cost=row["cost"], unpriced=row["unpriced"],
        )  # fmt: skip

    def add_calls(self, calls: list[CallState]) -> None:
        for call in calls:
            self.calls[call.id] = call
            if not call.status.terminal:
                self._open[call.id] = call
            if call.tool == "breakpoint" and "pause" in call.meta:
                self.pauses.append(call)
                self.pauses.sort(key=lambda c: c.idx)

    def suspended(self) -> list[CallState]:
        settled = [i for i, c in self._open.items() if c.status.terminal]
        for call_id in settled:
            del self._open[call_id]
        return [c for c in self._open.values() if c.status is CallStatus.SUSPENDED]

    @property
    def spent(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.cached_tokens, self.cost,
                     self.unpriced, self.rounds)  # fmt: skip

    def count(self, used: Usage) -> None:
        """An inference of the turn spent `used`."""
        self.input_tokens += used.input_tokens
        self.output_tokens += used.output_tokens
        self.cached_tokens += used.cached_tokens
        self.cost += used.cost
        self.unpriced += used.unpriced
        self.last = used

    def outcome(self) -> TurnOutcome | None:
        """Where a done turn stands, as its commits wrote its row and its calls' (what
        `engine.store.outcome.read_outcome` reads back); None when the store must answer:
        not done, its row not written by this loop, a call suspended."""
        if self.written is None or self.written[0] != TurnStatus.DONE.value:
            return None
        written = [(c, c.written) for c in self.calls.values() if c.written is not None]
        if any(w[1] == CallStatus.SUSPENDED.value or c.step_id is None for c, w in written):
            return None
        written.sort(key=lambda cw: (cw[0].step_id, cw[0].idx))  # as the store orders them
        status, reason, detail, _, input_tokens, output_tokens, *_, final_text, _ = self.written
        return TurnOutcome(
            turn_id=self.id, thread_id=self.thread_id, status=status, reason=reason,
            detail=detail, text=final_text or "", pending=[],
            calls=[{"call_id": c.id, "tool": c.tool, "status": w[1]} for c, w in written],
            input_tokens=input_tokens, output_tokens=output_tokens,
        )  # fmt: skip

    def row_update(self, at: float) -> Op | None:
        """The turn's row, when it changed since it was last written (a tool round's
        checkpoint changes nothing in it)."""
        fields = (
            self.status.value, self.reason, self.detail, self.rounds, self.input_tokens,
            self.output_tokens, self.cached_tokens, self.cost, self.unpriced, self.final_text,
            json.dumps(self.record) if self.record else "{}",  # (react's: none, each commit)
        )  # fmt: skip
        if fields == self.written:
            return None
        self.written = fields
        return rows.turn_changed(self.id, fields, at, done=self.status is TurnStatus.DONE)


class TurnStopped(Exception):
    """A plugin's deadline passed while the model was answering: the turn ends as asked."""

    def __init__(self, stop: StopRequest) -> None:
        super().__init__(stop.detail)
        self.stop = stop


@dataclass
class Inference:
    """One model call's outcome, before its answer is committed."""

    acc: AssistantAccumulator
    step_id: int  # the step it opened, which committing the answer ends
    closed_early: bool = False


def as_json(value: Any) -> str:
    return json.dumps(value, default=str)


def calls_summary(calls: list[CallState]) -> str:
    """A round's calls for a one-line step summary: each named while there are few
    ("shell suspended, calc succeeded"), counted by state when there are many."""
    if len(calls) <= SUMMARY_NAMES:
        return ", ".join(f"{c.tool} {c.status.value}" for c in calls)
    counts = Counter(c.status.value for c in calls)
    return f"{len(calls)} calls: " + ", ".join(f"{n} {status}" for status, n in counts.items())


def message_summary(msg: ConvMessage) -> str:
    if msg.tool_calls:
        return "calls " + ", ".join(c.name for c in msg.tool_calls)
    return one_line(msg.text, 80)


def one_line(text: str, limit: int) -> str:
    """`text` on one line, its first `limit` characters and "…" when it is longer."""
    text = " ".join(text.split())
    return text[:limit] + ("…" if len(text) > limit else "")
