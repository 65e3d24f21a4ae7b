"""Finding the room's owner and connecting to its API.

The owner is whoever holds the room's lock (`engine.room.owner_of`); its API is the
socket in the room. A runtime that is starting serves within a moment of taking the
lock, so a client waits for the socket a few seconds; a one-off (`invoke`, `decide`,
`cancel`, `pending`, an embedding program) serves no API and holds the room only for its
own turn, so a client waits for it to let go.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

from engine.api.client import OwnerGone
from engine.api.remote import RemoteClient
from engine.room import SERVING, Room, describe, owner_of

SOCKET_WAIT = 10.0  # seconds a serving owner may take to answer on its socket
ONE_OFF_WAIT = 60.0  # seconds to wait for a one-off owner to let go of the room


async def connect(
    room: Room, *, wait: float | None = None, say: Callable[[str], None] | None = None
) -> RemoteClient | None:
    """A client of the room's owner, ready (it answered `info`), or None when nobody owns
    the room. Raises `OwnerGone` when the owner does not answer in time; `say` hears once
    that it waits for a one-off to finish."""
    start, told = time.monotonic(), False
    while True:
        owner = owner_of(room)
        if owner is None:
            return None
        serving = owner.get("kind") in SERVING
        if room.socket.exists():
            client = RemoteClient(room)
            try:
                await client.info()
                return client
            except OwnerGone:
                await client.aclose()  # a socket a dead owner left, or not yet served
        limit = wait if wait is not None else (SOCKET_WAIT if serving else ONE_OFF_WAIT)
        if time.monotonic() - start >= limit:
            what = "does not answer on" if serving else "serves no API on"
            raise OwnerGone(f"room {room.path} is owned by {describe(owner)}, which {what} "
                            f"{room.socket}")  # fmt: skip
        if say is not None and not serving and not told and time.monotonic() - start > 1.0:
            told = True
            say(f"waiting for {describe(owner)} to finish with the room")
        await anyio.sleep(0.05)
