"""A console started as `agentdeck` starts it, in a fresh interpreter, that says which heavy
modules were loaded when: after its imports, when its first full screen (the attached
run) was drawn, and once the room's API is served. `test_console_process.py` runs it:

    python -m tests.console.start_child ROOM   # prints one JSON object
"""

from __future__ import annotations

import asyncio
import json
import sys

from console.app import make_app
from console.host import console_provider
from engine.room import Room
from tests.wait import until

# What the first screen does not need: the API server and its web stack, the channel
# loops, MCP's SDK, the prices table.
HEAVY = ("fastapi", "uvicorn", "starlette", "engine.api.app", "engine.loops.server",
         "engine.loops.channels", "engine.loops.hook", "mcp", "genai_prices")  # fmt: skip


def loaded() -> list[str]:
    return [name for name in HEAVY if name in sys.modules]


async def main(room: Room) -> dict[str, object]:
    seen: dict[str, object] = {"imported": loaded()}
    app = make_app(room, provider=console_provider(room))  # as run_console makes it

    def drawn() -> None:
        if "first screen" not in seen and app.main.query_one("StatusBar").run_id.startswith("r_"):
            seen["first screen"] = loaded()

    app.post_display_hook = drawn  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        seen["mounted"] = loaded()
        await until(lambda: "first screen" in seen and room.socket.exists(),
                    "the first screen drawn and the room's API served", tick=pilot.pause)  # fmt: skip
        seen["served"] = loaded()
        await app.shutdown()
    return seen


if __name__ == "__main__":
    room = Room.at(sys.argv[1])
    room.path.mkdir(parents=True, exist_ok=True)
    print(json.dumps(asyncio.run(main(room))))  # noqa: T201
