"""Tool-runner lifecycle: where an embedding program's `ToolRunner` stands.

ready -> running | stopped
running -> waiting | done | stopped
waiting -> running
done, stopped: final

A runner is `ready` until its first request opens its turn, then `running` while it is
iterated. It ends `done` when nothing is left to do, or `stopped` (max_iterations, a
plugin stopped its turn, or it was closed while it ran), or pauses `waiting` when its
calls wait for decisions; `decide` reopens it. It is closed from `ready` only if opening
its turn failed half-way.
"""

from __future__ import annotations

from enum import StrEnum

from engine.lifecycle.errors import checked


class RunnerStatus(StrEnum):
    READY = "ready"  # made, its turn not yet opened
    RUNNING = "running"  # its turn is open and the runner is being iterated
    WAITING = "waiting"  # its turn waits: a call needs a decision (`decide` goes on)
    DONE = "done"  # terminal: the last message asked for nothing more
    STOPPED = "stopped"  # terminal: max_iterations, a plugin's stop, or closed while it ran


S = RunnerStatus
TRANSITIONS: dict[RunnerStatus, frozenset[RunnerStatus]] = {
    S.READY: frozenset({S.RUNNING, S.STOPPED}),
    S.RUNNING: frozenset({S.WAITING, S.DONE, S.STOPPED}),
    S.WAITING: frozenset({S.RUNNING}),
    S.DONE: frozenset(),
    S.STOPPED: frozenset(),
}


def check(src: RunnerStatus | str, dst: RunnerStatus | str) -> RunnerStatus:
    """Return `dst` if `src -> dst` is legal, else raise IllegalTransition naming both."""
    return checked("tool runner", TRANSITIONS, RunnerStatus, src, dst)
