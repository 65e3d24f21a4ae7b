"""One tool call's state: its lifecycle moves, its row, and what the model reads of it.

The call's lifecycle is enforced by `engine.lifecycle.call`; every change is recorded as
a `CallChanged` event and the call's row is written at the next checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.domain.events import CallChanged
from engine.domain.messages import ConvMessage
from engine.lifecycle import CallStatus
from engine.lifecycle import call as call_lifecycle
from engine.lifecycle.call import Awaiting
from engine.shell.sandbox import Choice
from engine.store import Op, json_or_text
from engine.store import turns as rows
from engine.tools import ToolResult

NO_MESSAGE, PLACEHOLDER, ANSWERED = 0, 1, 2


@dataclass
class CallState:
    """A tool call as the runtime tracks it."""

    id: str
    model_call_id: str
    turn_id: str
    thread_id: str
    step_id: int
    idx: int
    tool: str
    args: Any
    status: CallStatus = CallStatus.NEW
    result: str | None = None
    error: str | None = None
    suspend_reason: str | None = None
    awaiting: Awaiting | None = None  # suspended: what for (engine.lifecycle.call)
    decision_id: str | None = None
    has_message: int = NO_MESSAGE
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    ended_at: float | None = None
    events: list[CallChanged] = field(default_factory=list)
    written: tuple[Any, ...] | None = None  # the row's changeable fields as last written
    # How the decision that resumed it runs it under the shell's sandbox (read from the
    # decision each time it is carried out, so not stored with the call)
    sandbox: Choice = "default"

    def move(self, dst: CallStatus, at: float, **fields: Any) -> None:
        """Take one legal lifecycle step and record it as an event. A call suspends for a
        `decision` unless `awaiting` says otherwise."""
        self.status = call_lifecycle.check(self.status, dst)
        suspended = self.status is CallStatus.SUSPENDED
        self.awaiting = fields.pop("awaiting", "decision") if suspended else None
        for name, value in fields.items():
            setattr(self, name, value)
        self.updated_at = at
        if self.status.terminal:
            self.ended_at = at
        self.say(at)

    def say(self, at: float) -> None:
        """Record where the call stands as an event (each move does; a call held `new` at a
        breakpoint says so, or no pane would show it until it moves)."""
        self.events.append(
            CallChanged(
                at=at,
                thread_id=self.thread_id,
                turn_id=self.turn_id,
                call_id=self.id,
                tool=self.tool,
                args=self.args,
                status=self.status.value,
                result=self.result,
                error=self.error
                if self.status is not CallStatus.SUSPENDED
                else self.suspend_reason,
                awaiting=self.awaiting,
            )
        )

    def finish(self, result: ToolResult, at: float, clean: Callable[[str], str] = str) -> None:
        """Apply a tool's result: success/warning succeed, error fails, pending suspends.
        `clean` makes its text fit to keep (cut to the cap) before the call holds it."""
        match result.status:
            case "success" | "warning":
                self.move(CallStatus.SUCCEEDED, at, result=clean(result.text()), error=None)
            case "error":
                self.move(CallStatus.FAILED, at, result=None, error=clean(result.message))
            case "pending":
                self.move(CallStatus.SUSPENDED, at, suspend_reason=clean(result.message))

    def fail(self, error: str, at: float) -> None:
        """End the call failed from `new`, `running` or `resuming`: a call the gate refuses
        fails where it stands, so no event says it ran."""
        self.move(CallStatus.FAILED, at, error=error)

    def model_text(self) -> str:
        """The call's outcome as the model reads it."""
        if self.status is CallStatus.SUCCEEDED:
            return self.result or ""
        if self.status is CallStatus.SUSPENDED:
            return f"pending: waiting for an operator decision ({self.suspend_reason})"
        return f"error: {self.error}"

    def message(self) -> ConvMessage:
        return ConvMessage(
            role="tool",
            text=self.model_text(),
            tool_call_id=self.model_call_id,
            tool_name=self.tool,
            is_error=self.status in (CallStatus.FAILED, CallStatus.CANCELLED),
            pending=self.status is CallStatus.SUSPENDED,
        )

    def _fields(self) -> tuple[Any, ...]:
        """What a call's row can change, as it is written."""
        args = json.dumps(self.args)  # the model's text, when not usable, as a JSON string
        return (args, self.status.value, self.result, self.error, self.suspend_reason,
                self.awaiting, self.decision_id, self.has_message, self.updated_at,
                self.ended_at)  # fmt: skip

    def row(self) -> Op | None:
        """The call's row, if it changed since it was written: an INSERT the first time,
        then an UPDATE of what a call can change."""
        fields = self._fields()
        if fields == self.written:
            return None
        insert, self.written = self.written is None, fields
        if not insert:
            return rows.call_changed(self.id, fields)
        return rows.call_inserted((self.id, self.model_call_id, self.turn_id, self.thread_id,
                                   self.step_id, self.idx, self.tool, json.dumps(self.meta),
                                   self.created_at), fields)  # fmt: skip

    @classmethod
    def made(cls, assistant: ConvMessage, turn_id: str, thread_id: str, step_id: int,
             new_id: Callable[[str], str], canonical: Callable[[str], str],
             metas: list[dict[str, Any]] | None, now: float) -> list[CallState]:  # fmt: skip
        """The calls the model made in `assistant` (its step `step_id`), `new`."""
        return [
            cls(id=new_id("c"), model_call_id=tc.id or f"call_{i}", turn_id=turn_id,
                thread_id=thread_id, step_id=step_id, idx=i, tool=canonical(tc.name),
                args=tc.arguments, meta=metas[i] if metas else {}, created_at=now, updated_at=now)
            for i, tc in enumerate(assistant.tool_calls)
        ]  # fmt: skip

    @classmethod
    def from_row(cls, row: Any) -> CallState:
        args = json_or_text(row["args"])
        call = cls(
            id=row["id"], model_call_id=row["model_call_id"], turn_id=row["turn_id"],
            thread_id=row["thread_id"], step_id=row["step_id"], idx=row["idx"],
            tool=row["tool"], args=args, status=CallStatus(row["status"]),
            result=row["result"], error=row["error"], suspend_reason=row["suspend_reason"],
            awaiting=row["awaiting"], decision_id=row["decision_id"], has_message=row["has_message"],
            meta=json.loads(row["meta"] or "{}"),
            created_at=row["created_at"], updated_at=row["updated_at"], ended_at=row["ended_at"],
        )  # fmt: skip
        call.written = call._fields()  # as read: unchanged until it moves
        return call
