"""An MCP server for the tests, written with the official SDK's `MCPServer`: tools that
succeed, fail, hang, report progress, return a huge result, count their runs, and crash
the server.

    python tests/mcp_server.py stdio
    python tests/mcp_server.py http PORT     (streamable HTTP on 127.0.0.1:PORT/mcp)

`MCP_TEST_RUNS` names a file each run of `count` appends a line to (so a test knows how
often it ran); `MCP_TEST_SECRET` is echoed by `secret` (the environment a server gets).
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

server = MCPServer("agentdeck-test")
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True)


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def fail(why: str = "it failed") -> str:
    """Always fails, as a tool does: an error result the model reads."""
    raise ToolError(why)


@server.tool()
async def hang() -> str:
    """Never answers; says in MCP_TEST_RUNS when it started and when it was cancelled."""
    runs = os.environ.get("MCP_TEST_RUNS")
    if runs:
        with open(runs, "a") as f:
            f.write("hang started\n")
    try:
        await anyio.sleep_forever()
    finally:
        if runs:
            with open(runs, "a") as f:
                f.write("hang cancelled\n")
    return ""


@server.tool(annotations=READ_ONLY)
def huge(size: int = 300_000) -> str:
    """A result of `size` characters."""
    return "x" * size


@server.tool()
def count(label: str = "run") -> str:
    """Appends a line to MCP_TEST_RUNS: how often it ran is how many lines it has."""
    with open(os.environ["MCP_TEST_RUNS"], "a") as f:
        f.write(label + "\n")
    return f"counted {label}"


@server.tool()
async def slow_count(label: str = "run") -> str:
    """Counts, then takes a long time (a runtime may die meanwhile)."""
    with open(os.environ["MCP_TEST_RUNS"], "a") as f:
        f.write(label + "\n")
    await anyio.sleep_forever()  # still running when the kill lands
    return f"counted {label}"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True))
async def idem_slow_count(label: str = "run") -> str:
    """As slow_count, annotated idempotent: after a crash it may simply run again."""
    with open(os.environ["MCP_TEST_RUNS"], "a") as f:
        f.write(label + "\n")
    await anyio.sleep_forever()  # still running when the kill lands
    return f"counted {label}"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Reports progress `steps` times, then answers."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"did {steps} steps"


@server.tool()
def secret() -> str:
    """The value of MCP_TEST_SECRET in the server's environment ('unset' without it)."""
    return os.environ.get("MCP_TEST_SECRET", "unset")


@server.tool()
def crash() -> str:
    """The server process exits at once."""
    os._exit(3)


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
