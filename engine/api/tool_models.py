"""The body of the `tools` operation: every tool the agent has, where it comes from (built
in, or which MCP server), how it is approved and by which rules, what it did this run,
and each MCP server's state; and the shell's sandbox."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from engine.api.models import _Body

if TYPE_CHECKING:
    from engine.config import McpSettings
    from engine.domain.rules import Rule
    from engine.tools import ToolRegistry
    from engine.tools.mcp import McpServers


class ToolRow(_Body):
    name: str  # SERVER.TOOL for an MCP server's
    wire_name: str  # as the model sees it
    source: str  # "built-in", or the MCP server's name
    description: str
    approval: Literal["ask", "allow", "by arguments"]
    read_only: bool = False  # so annotated by its server
    idempotent: bool = False  # may run again after a crash without a review
    rules: list[str]  # the rules that name it, described
    calls: int = 0  # this run
    errors: int = 0
    last_error: str | None = None


class ServerRow(_Body):
    name: str
    target: str  # its command, or its URL
    state: str  # starting | up | restarting | failed | stopped | not running
    why: str | None = None
    tools: int = 0
    restarts: int = 0


class ToolsView(_Body):
    tools: list[ToolRow]
    servers: list[ServerRow]
    sandbox: str  # the shell's, in words


def view(registry: ToolRegistry, servers: McpServers | None, rules: list[Rule],
         sandbox: str, configured: list[McpSettings] | None = None) -> ToolsView:  # fmt: skip
    """What `registry` holds now; `configured` servers not running (a room nobody owns)."""
    from engine.tools import wire_name

    wires = {registry.canonical(s["name"]): s["name"] for s in registry.schemas()}
    rows = []
    for tool in registry.tools():
        use = registry.use.get(tool.name)
        source = str(tool.meta.get("source", "built-in"))
        approval = ("allow" if tool.approval == "never" else
                    "ask" if tool.approval == "always" else "by arguments")  # fmt: skip
        rows.append(ToolRow(
            name=tool.name, wire_name=wires.get(tool.name, wire_name(tool.name)), source=source,
            description=(tool.description or "").strip().split("\n")[0][:300],
            approval=approval, read_only=bool(getattr(tool, "read_only", False)),  # type: ignore[arg-type]
            idempotent=tool.idempotent, rules=[r.describe() for r in rules if r.tool == tool.name],
            calls=use.calls if use else 0, errors=use.errors if use else 0,
            last_error=use.last_error if use else None,
        ))  # fmt: skip
    listed = []
    for s in servers.servers if servers is not None else ():
        listed.append(ServerRow(name=s.name, target=s.describe(), state=s.state, why=s.why,
                                tools=len(s.tools), restarts=s.restarts))  # fmt: skip
    for m in configured or ():
        target = m.url or " ".join([m.command or "", *m.args]).strip()
        listed.append(ServerRow(name=m.name, target=target, state="not running",
                                why="nobody owns the room: its owner starts the servers"))  # fmt: skip
    return ToolsView(tools=rows, servers=listed, sandbox=sandbox)
