"""agentdeck's runtime: durable agent turns over an SQLite (or PostgreSQL) truth layer.

The public embedding API is what `__all__` names, imported from `engine` itself:

    from engine import Message, Runtime

    async with Runtime.open("./room", kind="embed") as rt:
        handle = await rt.submit(Message(origin="invoke", sender="me", thread_id="t1",
                                         text="run `uname -a`"))

Everything else is the runtime's inside, and may change between releases. The names load
on first use (PEP 562), so `import engine` costs a command nothing it does not use.

The engine never imports the console (or textual, or rich); a test enforces it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    # opening a room and running turns
    "Runtime": "engine.runtime.runtime",
    "Message": "engine.domain.messages",
    "ConvMessage": "engine.domain.messages",
    "TurnOutcome": "engine.domain.outcome",
    # deciding suspended calls
    "Decision": "engine.domain.decisions",
    "PendingCall": "engine.domain.decisions",
    # the agent's tools
    "Tool": "engine.tools",
    "tool": "engine.tools",
    # steering a room another process owns
    "RoomClient": "engine.api.client",
    "connect": "engine.api.connect",
    # what happens, as subscribers and clients see it
    "TurnStatus": "engine.lifecycle",
    "CallStatus": "engine.lifecycle",
    "TurnStarted": "engine.domain.events",
    "TurnChanged": "engine.domain.events",
    "StepStarted": "engine.domain.events",
    "StepFinished": "engine.domain.events",
    "TextDelta": "engine.domain.events",
    "MessageAppended": "engine.domain.events",
    "CallChanged": "engine.domain.events",
    "DecisionRecorded": "engine.domain.events",
    "DeliveryChanged": "engine.domain.events",
    "Notice": "engine.domain.events",
}

__all__ = [
    "CallChanged",
    "CallStatus",
    "ConvMessage",
    "Decision",
    "DecisionRecorded",
    "DeliveryChanged",
    "Message",
    "MessageAppended",
    "Notice",
    "PendingCall",
    "RoomClient",
    "Runtime",
    "StepFinished",
    "StepStarted",
    "TextDelta",
    "Tool",
    "TurnChanged",
    "TurnOutcome",
    "TurnStarted",
    "TurnStatus",
    "connect",
    "tool",
]

if TYPE_CHECKING:
    from engine.api.client import RoomClient
    from engine.api.connect import connect
    from engine.domain.decisions import Decision, PendingCall
    from engine.domain.events import (
        CallChanged,
        DecisionRecorded,
        DeliveryChanged,
        MessageAppended,
        Notice,
        StepFinished,
        StepStarted,
        TextDelta,
        TurnChanged,
        TurnStarted,
    )
    from engine.domain.messages import ConvMessage, Message
    from engine.domain.outcome import TurnOutcome
    from engine.lifecycle import CallStatus, TurnStatus
    from engine.runtime import Runtime
    from engine.tools import Tool, tool


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next use is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
