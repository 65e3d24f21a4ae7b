"""What agentdeck adds to an MCP tool call (issue 34): the same stdio server's `echo` called
N times through the runtime's McpTool (argument check against the server's schema, the
call, the result's text) and through a bare SDK client, side by side in the same run.

    .venv/bin/python -m tests.bench.bench_mcp [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` and `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from engine.config import McpSettings
from engine.tools import ToolContext, ToolRegistry
from engine.tools.mcp import McpServers

SERVER = [sys.executable, str(Path(__file__).resolve().parents[1] / "mcp_server.py"), "stdio"]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        room = Path(tmp)
        (room / "workspace").mkdir()
        registry = ToolRegistry()
        servers = McpServers([McpSettings(name="t", command=SERVER[0], args=SERVER[1:],
                                          approval="allow")], room, room / "workspace",
                             registry, lambda level, text: None)  # fmt: skip
        ctx = ToolContext(room / "workspace", time_limit=30)
        bare: list[float] = []
        ours: list[float] = []
        async with anyio.create_task_group() as tg:
            await servers.start(tg)
            tool = registry.get("t.echo")
            assert tool is not None, servers.servers[0].why
            params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
            with open(room / "bare.log", "w") as errlog:
                async with Client(stdio_client(params, errlog=errlog)) as client:
                    for i in range(n):  # interleaved, so a busy moment falls on both
                        started = time.perf_counter()
                        await client.call_tool("echo", {"text": f"x{i}"})
                        bare.append((time.perf_counter() - started) * 1000)
                        started = time.perf_counter()
                        result = await tool.call(tool.validate({"text": f"x{i}"}), ctx)
                        ours.append((time.perf_counter() - started) * 1000)
                        assert result.status == "success", result
            tg.cancel_scope.cancel()
    print(f"MCP stdio `echo`, {n} calls each (ms)     p50      p95      max")
    for label, v in (("bare SDK client", bare), ("agentdeck McpTool", ours)):
        print(f"  {label:<30} {statistics.median(v):8.2f} {pct(v, 95):8.2f} {max(v):8.2f}")
    print(
        f"\nagentdeck adds {statistics.median(ours) - statistics.median(bare):.2f} ms at p50, "
        f"{pct(ours, 95) - pct(bare, 95):.2f} at p95"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    anyio.run(main, parser.parse_args().calls)
