"""pulse.json: what the pulse loop has fired, so a restart neither loses nor repeats a fire.

Shape (times are POSIX seconds, revisions sha256 hex of the file):

    {"version": 1,
     "tasks":  {"<name>": {"revision", "file", "fired_at"}},
     "chores": {"<key>": {"schedule", "file", "since", "last", "occurrence", "fired_at"}},
     "will":   {"revision", "fired_at"} | null,
     "intents": {"<thread>": {"key", "mark"}}}

`since` is when the chore (with this schedule) was first seen, `last` the last fired
occurrence (or `since` before the first fire). `intents` holds the idempotency key of each
fire being offered, written before its request is made (see engine.loops.pulse), and
`mark`, the revision, occurrence or will fire the key stands for. A file that does not have this shape is
moved aside, never deleted, and the loop starts from an empty state: re-firing is better
than silently forgetting that something is wrong.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

State = dict[str, Any]


def load_state(path: Path, now: float) -> tuple[State, str | None]:
    """The state in `path`, or an empty one plus the problem to report if it is malformed."""
    try:
        return checked(json.loads(path.read_bytes())), None
    except FileNotFoundError:
        return checked({}), None
    except (OSError, ValueError, TypeError) as exc:
        problem = str(exc) or type(exc).__name__
    bad, n = path.with_name(f"{path.name}.bad-{int(now)}"), 1
    while bad.exists():
        bad, n = path.with_name(f"{path.name}.bad-{int(now)}-{n}"), n + 1
    try:
        os.replace(path, bad)
        kept = f"kept as {bad.name}"
    except OSError as exc:
        kept = f"could not be moved aside: {exc}"
    return checked({}), f"{path}: malformed ({problem}); starting from an empty state, {kept}"


def checked(data: Any) -> State:
    """A state of the expected shape, or ValueError naming what is wrong."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    tasks, chores, will = data.get("tasks", {}), data.get("chores", {}), data.get("will")
    intents = data.get("intents", {})
    if not isinstance(tasks, dict) or not all(
        isinstance(t, dict) and isinstance(t.get("revision"), str) for t in tasks.values()
    ):
        raise ValueError("'tasks' must map each name to an object with a 'revision'")
    if not isinstance(chores, dict) or not all(
        isinstance(c, dict)
        and isinstance(c.get("schedule"), str)
        and _number(c.get("since"))
        and _number(c.get("last"))
        for c in chores.values()
    ):
        raise ValueError("'chores' must map each key to an object with schedule, since, last")
    if will is not None and not (
        isinstance(will, dict)
        and isinstance(will.get("revision"), str)
        and _number(will.get("fired_at"))
    ):
        raise ValueError("'will' must be null or an object with revision and fired_at")
    if not isinstance(intents, dict) or not all(
        isinstance(i, dict) and isinstance(i.get("key"), str) and isinstance(i.get("mark"), str)
        for i in intents.values()
    ):
        raise ValueError("'intents' must map each thread to an object with key and mark")
    return {"version": 1, "tasks": tasks, "chores": chores, "will": will, "intents": intents}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def write_atomic(path: Path, data: str) -> None:
    """Write then rename, so a crash leaves the old file or the new one, never half of one."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
