"""The process tests/test_mcp.py kills with SIGKILL during an MCP call.

    python tests/mcp_worker.py ROOM TOOL [TOOL...]

It opens a runtime on ROOM with the test MCP server (tests/mcp_server.py, approval
allow), submits a turn per TOOL (each on a thread of its own) whose model calls it (a wire
name, as a model says it), and prints `ready` once every tool has started on the server
(a line each in ROOM/runs.log); then it waits to be killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.runtime import Runtime
from tests.scripted import ScriptedModel
from tests.test_mcp import asked_tool, mcp_config, msg_for
from tests.wait import until


async def main(room: Path, tools: list[str]) -> None:
    runs = room / "runs.log"
    async with Runtime.open(room, kind="run", provider=ScriptedModel(asked_tool),
                            config=mcp_config(runs)) as rt:  # fmt: skip
        for tool in tools:
            await rt.submit(msg_for(tool, thread=tool))
        await until(lambda: runs.exists() and runs.read_text().count("\n"),
                    "every call started on the server", ok=lambda n: n == len(tools))  # fmt: skip
        print("ready", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), sys.argv[2:])
