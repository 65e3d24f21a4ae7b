"""What is known of a call whose outcome a crash left unknown, as the operator is shown it:
the records `reviews` (engine/decisions/review.py) gathers and the words for them. Apart
from how they are gathered, so a client that only shows them (`agentdeck review` through
an owner, the console) loads neither the store nor the tools."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from engine.domain.decisions import WaitingCall

# what ending a surviving process group did (engine/tools/orphans.py)
Ended = Literal["gone", "terminated", "killed", "survived"]


class ProcessFacts(BaseModel):
    """The process group a call's tool recorded, and whether it is alive now."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    pgid: int
    command: str = ""
    started_at: float = 0.0
    alive: bool = False
    killed: str | None = None  # what an operator's kill did: terminated, killed, ...


class FileFacts(BaseModel):
    """A file the call was writing, as it is now."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    path: str
    exists: bool
    size: int | None = None
    matches: bool | None = None  # holds exactly what the call was to write (None: unknown)
    note: str = ""  # why it could not be read


class Review(WaitingCall):
    """A call waiting for a review, with what is known of it."""

    started_at: float  # when it was committed `running`
    since: float  # when it was put up for review
    process: ProcessFacts | None = None
    files: list[FileFacts] = []


class Killed(BaseModel):
    """What ending a call's surviving process group did."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    call_id: str
    pgid: int
    result: Ended  # gone (nothing was alive), terminated, killed, survived


def process_text(process: ProcessFacts) -> str:
    """What is known of a call's process group, in words (the CLI's and the console's)."""
    state = (f"killed by an operator ({process.killed})" if process.killed and not process.alive
             else "still running" if process.alive else "gone")  # fmt: skip
    return f"process group {process.pgid} `{process.command}`: {state}"


def file_text(found: FileFacts) -> str:
    """What is known of a file a call was writing, in words."""
    if not found.exists:
        return f"{found.path}: missing"
    if found.size is None:
        return f"{found.path}: exists ({found.note or 'unreadable'})"
    what = {True: "holds what the call was to write", False: "differs from what the call "
            "was to write", None: "its content was not to be known"}[found.matches]  # fmt: skip
    return f"{found.path}: {found.size:,} bytes, {what}"
