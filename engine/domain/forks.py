"""Forks and replays: a thread made from another thread's record (engine/api/forkbook.py).

A fork is the record of a thread up to a step of one of its turns (the entries its
conversation had when that step ended, through the results of the calls the step made),
optionally with a user message or a tool result edited, going on in a group chosen when
it is made. A replay answers a recorded turn's message again in a scratch thread made of
the record before that turn, with the turn's recorded results instead of running tools
(engine/turn/recorded.py), against another model, strategy, instructions or rules.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Forked(BaseModel):
    """A thread made by a fork or a replay, and where it came from."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    thread_id: str
    kind: Literal["fork", "replay"]
    from_thread: str
    from_turn: str
    from_step: int | None = None  # a fork's step (a replay's: None)
    upto: int  # the entries copied: seq 0 .. upto - 1
    edited: dict[int, str] = {}  # the operator's text of entries, by seq
    group: str
    made_by: str = "operator"
    made_at: float = 0.0
    turn_id: str | None = None  # the turn it started (None: it waits for a message)
