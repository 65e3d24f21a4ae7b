"""The semantic input of one turn (`Message`) and the conversation it grows (`ConvMessage`).

`Message` is what a runtime loop hands the scheduler; `ConvMessage` is one entry of a
thread's conversation as the model sees it, stored append-only in execution.db.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

Origin = Literal["invoke", "chat", "task", "chore", "will"]
SELF_ORIGINS = ("task", "chore", "will")


class InvalidMessage(ValueError):
    """A message broke one of the Message rules; the text names the rule."""


class Message(BaseModel):
    """The input of one turn: who sent what, for which thread, through which channel."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    origin: Origin
    channel: str | None = None
    sender: str
    thread_id: str
    text: str
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _rules(self) -> Message:
        if self.origin == "chat" and not self.channel:
            raise ValueError("rule: origin 'chat' requires a channel")
        if self.origin != "chat" and self.channel is not None:
            raise ValueError(f"rule: origin {self.origin!r} requires channel = None")
        if self.origin in SELF_ORIGINS and self.sender != "self":
            raise ValueError(f"rule: origin {self.origin!r} requires sender = 'self'")
        if not self.thread_id:
            raise ValueError("rule: thread_id must not be empty")
        return self

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Message:
        """Validate `data` into a Message, raising InvalidMessage with the broken rule."""
        from pydantic import ValidationError

        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            reasons = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            )
            raise InvalidMessage(f"invalid message: {reasons}") from None


class ToolCallPart(BaseModel):
    """One tool call the model asked for. `arguments` is raw text when it was not JSON."""

    id: str
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ConvMessage(BaseModel):
    """One entry of a thread's conversation as the model sees it."""

    role: Literal["system", "user", "assistant", "tool"]
    text: str = ""
    tool_calls: list[ToolCallPart] = Field(default_factory=list)
    # For role == "tool": which call this answers, and how it ended.
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = False
    pending: bool = False  # a placeholder for a call still waiting on a decision
    refusal: bool = False  # the model refused (assistant only)
    # A user message's circumstances (its date, channel, sender: engine/domain/instructions
    # `message_context`), which the model reads with it; stored only where there are some.
    context: str | None = None
    # A compaction marker (role system: its text is the summary; engine/turn/compaction.py)
    # or the undoing of one; stored only where there is one.
    compaction: dict[str, Any] | None = None

    @property
    def read_text(self) -> str:
        """The text as a model reads it: a user message with its circumstances first (each
        provider sends this; the offline model and scripted ones read `text` alone)."""
        if self.context is None:
            return self.text
        return f"<context>{self.context}</context>\n\n{self.text}"

    @model_serializer(mode="wrap")
    def _context_if_any(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in ("context", "compaction"):  # (so an entry without one keeps its JSON)
            if data.get(name, 0) is None:
                del data[name]
        return data
