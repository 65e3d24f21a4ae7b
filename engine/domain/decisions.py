"""Decisions: an operator's (or a policy's) answer to a suspended tool call.

Suspension is data: a pending call and a decision are plain records with ids. A decision
is matched to its call by call id; one that matches nothing yet stays queued until it can
be applied; applying the same decision twice changes nothing. `remember` turns a decision
into a rule (engine.domain.rules) that later gates apply without asking.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, model_validator

from engine.domain.messages import InvalidMessage
from engine.lifecycle.call import Awaiting

_UNSEEN: Any = object()  # `approve` was not told what the operator saw


def args_digest(args: Any) -> str:
    """The SHA-256 (hex) of `args` as canonical JSON: what a decision binds to
    (engine/decisions/binding.py)."""
    text = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Decision(BaseModel):
    """Resume (approve; maybe with edited args, or a result to use instead) or cancel; for
    a call whose outcome a crash left unknown (engine.decisions.review), `fail` (it failed, for the
    reason given) or `rerun` (run it again, knowing it may then have run twice); for a
    breakpoint's pause (engine/domain/breakpoints.py), `resume` goes on, `step` goes one
    inference or tool round and pauses again (either with edited `args`: what it paused
    on), `cancel` ends the turn."""

    # (built when defined, unlike the other models: an API route's body, and FastAPI
    # refuses a deferred model's schema under the parameter's alias)
    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    action: Literal["resume", "cancel", "fail", "rerun", "step"]
    id: str = Field(default_factory=lambda: f"d_{uuid.uuid4().hex[:12]}")
    args: dict[str, Any] | None = None  # resume with edited arguments
    result: Any = None  # resume with this result instead of running the tool
    use_result: bool = False
    reason: str = ""  # cancel: the model sees it as the tool's error
    # Make a rule of this decision (engine.domain.rules): allow (resume) or deny (cancel) the
    # calls of this tool whose arguments match `pattern`, for the next one, the thread or
    # the room. No pattern: the narrowest one that matches this call (for shell, its
    # exact command); never the whole tool.
    remember: Literal["once", "thread", "room"] | None = None
    pattern: str | None = None
    decided_by: str = "operator"
    # The SHA-256 of the arguments approved (engine.decisions.binding): the call runs only with
    # arguments of this hash. None: bound to nothing (a deadline's, or recorded before).
    args_hash: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    # How a resumed shell call runs under the room's sandbox (engine/shell/sandbox.py): as
    # the room says, in it with the network, or outside it. Decided call by call: a
    # remembered rule never carries it.
    sandbox: Literal["default", "network", "outside"] = "default"

    @model_validator(mode="after")
    def _rules(self) -> Decision:
        if self.action not in ("resume", "step") and (self.args is not None or self.use_result):
            raise ValueError(f"a {self.action} decision takes no arguments or result")
        if self.action == "step" and self.use_result:
            raise ValueError("a step goes on from a breakpoint: it takes no result")
        if self.remember is not None and self.action in ("fail", "rerun", "step"):
            raise ValueError(f"a {self.action} decision makes no rule")
        if self.args is not None and self.use_result:
            raise ValueError("resume with edited arguments or with a result, not both")
        if self.pattern is not None and self.remember is None:
            raise ValueError("a pattern is what a remembered decision allows: set remember")
        if self.sandbox != "default" and self.action not in ("resume", "rerun"):
            raise ValueError(f"a {self.action} decision runs nothing: it takes no sandbox")
        if self.sandbox != "default" and self.remember is not None:
            raise ValueError(
                "running outside the sandbox (or with the network) is decided "
                "call by call: it is never remembered"
            )
        if self.sandbox != "default" and self.use_result:
            raise ValueError("a decision with a result runs nothing: it takes no sandbox")
        storable(self.args, "args")  # refused now, not after it reached the waiting call
        storable(self.result, "result")
        for name in ("call_id", "id", "reason", "decided_by", "pattern"):  # a lone surrogate
            storable(getattr(self, name), name)
        return self

    @classmethod
    def approve(cls, call_id: str, *, seen: Any = _UNSEEN, **kw: Any) -> Decision:
        """Resume `call_id`. Given `seen`, the arguments the operator was shown, the
        decision is bound to them (to the edited `args` instead, when given)."""
        if seen is not _UNSEEN and kw.get("args_hash") is None:
            edited = kw.get("args")
            kw["args_hash"] = args_digest(seen if edited is None else edited)
        return cls(call_id=call_id, action="resume", **kw)

    @classmethod
    def cancel(cls, call_id: str, reason: str = "", **kw: Any) -> Decision:
        return cls(call_id=call_id, action="cancel", reason=reason, **kw)

    @classmethod
    def fail(cls, call_id: str, reason: str = "", **kw: Any) -> Decision:
        """A call a crash left with its outcome unknown failed (the model reads `reason`)."""
        return cls(call_id=call_id, action="fail", reason=reason, **kw)

    @classmethod
    def rerun(cls, call_id: str, *, seen: Any = _UNSEEN, **kw: Any) -> Decision:
        """Run again a call a crash left with its outcome unknown (bound to `seen`)."""
        if seen is not _UNSEEN and kw.get("args_hash") is None:
            kw["args_hash"] = args_digest(seen)
        return cls(call_id=call_id, action="rerun", **kw)

    @classmethod
    def step(cls, call_id: str, *, seen: Any = _UNSEEN, **kw: Any) -> Decision:
        """Go one inference or tool round on from a breakpoint's pause, then pause again
        (bound to `seen`, its arguments as shown, or to the edited `args`)."""
        if seen is not _UNSEEN and kw.get("args_hash") is None:
            edited = kw.get("args")
            kw["args_hash"] = args_digest(seen if edited is None else edited)
        return cls(call_id=call_id, action="step", **kw)

    @classmethod
    def with_result(cls, call_id: str, result: Any, **kw: Any) -> Decision:
        return cls(call_id=call_id, action="resume", result=result, use_result=True, **kw)

    def denial_text(self) -> str:
        """What the model reads when this decision cancels a call."""
        who = "operator" if self.decided_by == "operator" else self.decided_by
        return f"denied by {who}" + (f": {self.reason}" if self.reason else "")

    def failure_text(self) -> str:
        """What the model reads when this decision marks a call failed after a crash."""
        why = f": {self.reason}" if self.reason else ""
        return (
            f"outcome unknown (agentdeck stopped while this call was running); "
            f"{self.decided_by} marked it failed{why}"
        )


MAX_DEPTH = 64  # nesting of decided arguments and results


def storable(value: Any, what: str) -> None:
    """Raise ValueError unless `value` is JSON that execution.db and a tool can take:
    nested at most MAX_DEPTH deep, every number printable (Python refuses integers of more
    than 4,300 digits), every string UTF-8 text (JSON's "\\ud800" is a lone surrogate, which
    the conversation and SQLite cannot encode)."""
    if value is None or value == {} or (type(value) is str and value.isascii()):
        return  # (a message's fields, at each offer: nothing nested, nothing but UTF-8)
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise ValueError(f"{what} is nested more than {MAX_DEPTH} deep")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError) as exc:  # UnicodeEncodeError is a ValueError
        raise ValueError(f"{what} cannot be stored: {exc}") from None


def storable_message(message: Any) -> None:
    """Raise InvalidMessage unless a message's fields are what execution.db takes (a lone
    surrogate: a task file named with a byte that is not UTF-8)."""
    for name in ("thread_id", "text", "sender", "channel", "meta"):
        try:
            storable(getattr(message, name), name)
        except ValueError as exc:
            raise InvalidMessage(f"invalid message: {exc}") from None


class WaitingCall(BaseModel):
    """A call that waits for an operator: which, of which turn, and what it would run."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    call_id: str
    turn_id: str
    thread_id: str
    tool: str
    args: Any


class PendingCall(WaitingCall):
    """A suspended call as an operator sees it."""

    reason: str = ""
    since: float = 0.0  # when it started waiting
    group: str | None = None  # its thread's group
    # when its deadline decides it (engine.services.deadlines); None: it waits as long as it takes
    deadline_at: float | None = None
    on_deadline: Literal["cancel", "approve"] | None = None  # what the deadline decides
    # a `decision` (approve or cancel) or a `review` (its outcome a crash left unknown)
    awaiting: Awaiting = "decision"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def args_hash(self) -> str:
        """What an approval of these arguments names as its `args_hash`."""
        return args_digest(self.args)
