"""The conversation as the model reads it: one view of a thread's append-only log.

Every request a turn sends is built here from the thread's entries, so the turn, a turn
resumed after a crash, and anything that reloads a thread send the same thing. (A user
message's circumstances, its date, channel and sender, travel with it as
`ConvMessage.context`; each provider puts them before its text: `read_text`.)
"""

from __future__ import annotations

from engine.domain.messages import ConvMessage


def request_messages(messages: list[ConvMessage]) -> list[ConvMessage]:
    """The entries of a thread as one request sends them."""
    return list(messages)
