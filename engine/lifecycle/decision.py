"""Decision statuses: what became of an operator's (or a policy's) decision.

queued -> applied | duplicate | superseded | refused
applied -> refused

A decision is recorded `queued`, or `duplicate` at once when its call was already
decided; it is applied to its call once, or gives way to another decision. One whose
arguments are not those it approved (engine/decisions/binding.py) is `refused`, at once or when its
call takes it (`applied -> refused`: replayed after a crash); its call goes on waiting.
The status lives in execution.db (engine/store/decisions.py names each move) and in the
`DecisionRecorded` event that says it.
"""

from __future__ import annotations

from enum import StrEnum


class DecisionStatus(StrEnum):
    QUEUED = "queued"  # recorded and durable, not yet applied to its call
    APPLIED = "applied"  # taken by its call's turn: the call is resuming with it
    DUPLICATE = "duplicate"  # not applied: the call was decided (or ended) first
    SUPERSEDED = "superseded"  # not applied: a newer decision replaced one a dead run left
    REFUSED = "refused"  # not applied: not bound to the arguments it would run (note: why)
