"""The poll loop: each channel of channels.toml fetched in turn, its messages made requests.

One task per channel long-polls its service (Telegram's `getUpdates`). Every message of a
batch is made a durable turn request (`admit`, keyed by the update), and only then does
the channel's offset advance, in `poll/<name>.json` (replaced whole). A kill before that
write polls the same updates again, and their keys find the requests already made: no
message is lost, none makes two turns. An update the channel cannot read is skipped (the
offset passes it), or it would be fetched forever.

A failing service is retried with a growing pause (1 s to 60 s, jittered); the channel's
state says `failing` with the last error until a poll goes through.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import anyio

from engine.channels.base import PollChannel
from engine.io.files import replace_file
from engine.loops.inbound import ChannelState, admit
from engine.runtime import Runtime

log = logging.getLogger("agentdeck")
PAUSE_FIRST, PAUSE_MAX = 1.0, 60.0
IDLE_PAUSE = 0.1


class Offsets:
    """`poll/<name>.json`: the offset a channel's next poll starts from."""

    def __init__(self, folder: Path, name: str) -> None:
        self.path = folder / f"{name}.json"

    def read(self) -> int | None:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # a damaged file: polled from the service's own
            log.warning("%s: %s; polling from the service's own offset", self.path, exc)
            return None
        offset = data.get("offset") if isinstance(data, dict) else None
        return offset if isinstance(offset, int) and not isinstance(offset, bool) else None

    def write(self, offset: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(self.path, json.dumps({"offset": offset}).encode())


async def poll_channel(
    rt: Runtime, channel: PollChannel, state: ChannelState, wait: float | None = None
) -> None:
    """Poll `channel` until cancelled, each poll held open up to `wait` seconds (default:
    the channel's own `poll_timeout`)."""
    wait = channel.poll_wait if wait is None else wait
    offsets = Offsets(rt.room.path / "poll", channel.name)
    pause = PAUSE_FIRST
    while True:
        offset = offsets.read()
        try:
            updates, following = await channel.poll(offset, wait)
            for _, inbound in updates:
                if inbound is not None:
                    await admit(rt, inbound, state)
            if following is not None and following != offset:
                await anyio.to_thread.run_sync(offsets.write, following)
        except Exception as exc:  # PollError; a store or disk failure (StoreError, OSError)
            state.fail(str(exc))
            log.warning("%s: poll failed (%s); again in %.0f s", channel.name, exc, pause)
            await anyio.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, PAUSE_MAX)
            continue
        pause = PAUSE_FIRST
        state.ok(rt.clock())
        if not updates:  # a service that answers an empty poll at once is not asked 10x/s
            await anyio.sleep(IDLE_PAUSE)
