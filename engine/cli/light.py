"""The read commands' quick path: the owner's answer as JSON, straight off its socket.

A command that only reads (`status`, `pending`, `rules list`, `review`, `channels`) asks a
runtime that serves the room's API with a blocking socket (engine/api/uds_http.py,
`request_now`) and prints from the JSON: no event loop, no pydantic, no models are loaded,
so it answers in about the time Python takes to start and read a file. Only when that
owner answers at once and without an error: anything else (nobody owns the room, a
one-off holds it, an owner that is starting, stuck or says no) is `None`, and the command
goes the full way (engine/cli/common.py: `room_reader`), which waits, reads a room nobody
owns, and says what is wrong. Both ways print with the same functions from the same JSON
(the full way dumps its models as the API does).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from engine.room import SERVING, Room, owner_of

ANSWER_WITHIN = 2.0  # seconds; an owner slower than that is the full way's to wait for


def owner_json(room: Room, name: str, **arguments: Any) -> Any | None:
    """The answer of the room's serving owner to the read operation `name` (a method of
    `RoomClient`), as JSON; None when there is none answering now, or it refuses."""
    owner = owner_of(room)
    if owner is None or owner.get("kind") not in SERVING or not room.socket.exists():
        return None
    import engine.api.client  # noqa: F401  (declares the operations)
    from engine.api.operations import OPERATIONS
    from engine.api.sockets import connect_path
    from engine.api.uds_http import TransportError, request_now

    op = OPERATIONS[name]
    assert op.verb == "GET", f"{name} is not a read"
    path = op.path.format(**{n: quote(str(arguments.pop(n)), safe="") for n in op.path_names})
    params = [(k, v) for k, v in arguments.items() if v is not None]
    try:
        answer = request_now(connect_path(room.socket), "GET", path, params=params,
                             timeout=ANSWER_WITHIN)  # fmt: skip
    except TransportError:
        return None
    if answer.status != 200:
        return None
    try:
        return answer.json()
    except ValueError:
        return None
