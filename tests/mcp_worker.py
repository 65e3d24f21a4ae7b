"""The process tests/test_mcp.py kills with SIGKILL during an MCP call.

    python tests/mcp_worker.py ROOM TOOL

It opens a runtime on ROOM with the test MCP server (tests/mcp_server.py, approval
allow), submits one turn whose model calls TOOL (a wire name, as a model says it), and
prints `ready` once the tool has started on the server (its line is in ROOM/runs.log);
then it waits to be killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio

from engine.runtime import Runtime
from tests.scripted import ScriptedModel, first_then
from tests.test_mcp import mcp_config, msg_for
from tests.wait import until


async def main(room: Path, tool: str) -> None:
    runs = room / "runs.log"
    async with Runtime.open(room, kind="run", provider=ScriptedModel(first_then([(tool, {})])),
                            config=mcp_config(runs)) as rt:  # fmt: skip
        await rt.submit(msg_for(tool))
        await until(lambda: runs.exists() and runs.read_text(), "the call started on the server")
        print("ready", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), sys.argv[2])
