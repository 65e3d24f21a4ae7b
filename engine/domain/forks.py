"""Forks and replays: a thread made from another thread's record (engine/api/forkbook.py).

A fork is the record of a thread up to a step of one of its turns (the entries its
conversation had when that step ended, through the results of the calls the step made),
optionally with a user message or a tool result edited, going on in a group chosen when
it is made. A replay answers a recorded turn's message again in a scratch thread made of
the record before that turn, with the turn's recorded results instead of running tools
(engine/turn/recorded.py), against another model, strategy, instructions or rules.
"""

from __future__ import annotations

from collections.abc import Sequence
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

    def origin(self) -> str:
        """Where it came from, in words (`origin_text`)."""
        return origin_text(self.kind, self.from_thread, self.from_turn, self.from_step)


def origin_text(kind: str, from_thread: str, from_turn: str, from_step: int | None) -> str:
    """How a thread made from another says where it came from, the same in the CLI and the
    console: `fork of t1 at step 12 (turn t7)`, `replay of turn t7`."""
    if kind == "replay":
        return f"replay of turn {from_turn}"
    at = f" at step {from_step}" if from_step is not None else ""
    return f"fork of {from_thread}{at} (turn {from_turn})"


def cut(roles: Sequence[str], upto: int) -> int:
    """Where a fork of a step that ended with `upto` entries cuts: past the results of the
    calls the step made (the tool entries right after the assistant entry that made them),
    as engine/api/forkbook.py cuts it; `roles[i]` is entry i's role."""
    if not 0 < upto < len(roles) or roles[upto] != "tool":
        return upto
    back = upto - 1
    while back >= 0 and roles[back] == "tool":
        back -= 1
    if back < 0 or roles[back] != "assistant":
        return upto
    while upto < len(roles) and roles[upto] == "tool":
        upto += 1
    return upto


def branches(depths: Sequence[int]) -> list[str]:
    """The tree's drawing before each of a list of threads in depth-first order, by their
    depths (0: a root): `├─ ` or `└─ ` before a fork, `│  ` or three spaces for each level
    above it, as text (the CLI and the console draw the same)."""
    out = [""] * len(depths)
    more: list[bool] = [False] * (max(depths, default=0) + 1)  # a later sibling at each depth
    for i in range(len(depths) - 1, -1, -1):
        d = depths[i]
        if d > 0:
            out[i] = "".join("│  " if more[k] else "   " for k in range(1, d)) + (
                "├─ " if more[d] else "└─ "
            )
        more[d] = True
        for k in range(d + 1, len(more)):
            more[k] = False
    return out
