"""The tools screen: every tool the agent has, built in or from which MCP server, how it is
approved and by which rules, its calls and errors this run; each MCP server's state (and
why it is not up); and the shell's sandbox, which the operator must know before approving
a command.

It reads the room's `tools` operation through the bridge (the runtime's client: this
process's or the owner's) when opened and when `r` asks; not on a timer: what it shows
changes with calls and with servers going down, which `r` reads at once. The reading is
the bridge's too, so the decision card and the status bar say the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable

from console.bridge import Bridge
from console.format import counted, set_title, visible
from console.tool_facts import WHOLE_ACCOUNT
from console.widgets.key_bar import KeyBar
from console.widgets.text import Static
from console.widgets.tool_tables import DOWN, ServersTable, ToolsTable, tool_detail

if TYPE_CHECKING:
    from engine.api.tool_models import ToolsView

HINT = ("A tool asks (each call waits for you), is allowed (it runs unasked) or goes by its "
        "arguments (the rules decide). r reads again; an MCP server is configured with "
        "[[mcp]] in agentdeck.toml.")  # fmt: skip


class ToolsScreen(Screen[None]):
    """Opened by `T` (or the palette's "Tools"); Esc or q closes it."""

    BINDINGS = [
        Binding("escape,q", "close", "Close"),
        Binding("r", "read", "Read again"),
    ]

    def __init__(self, bridge: Bridge) -> None:
        super().__init__()
        self.bridge = bridge
        self.readings = 0  # how many times the screen read the tools (tests look)
        self.view: ToolsView | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="tools-summary")
        with Vertical(id="tools-pane", classes="pane"):
            yield ToolsTable(id="tools")
            yield Static(id="tool-detail")
        with Vertical(id="servers-pane", classes="pane"):
            yield ServersTable(id="servers")
        yield Static(id="tools-sandbox")
        yield Static(HINT, classes="hint", id="tools-hint")
        yield KeyBar()

    def on_mount(self) -> None:
        set_title(self.query_one("#tools-pane"), "Tools")
        set_title(self.query_one("#servers-pane"), "MCP servers")
        self.action_read()
        self.query_one(ToolsTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_read(self) -> None:
        """Read the tools (in a worker: an attached console asks the owner) and redraw."""
        self.run_worker(self._read, group="tools", exclusive=True)  # type: ignore[arg-type]

    async def _read(self) -> None:
        summary = self.query_one("#tools-summary", Static)
        try:
            view = await self.bridge.read_tools()
        except Exception as exc:  # no runtime, an owner gone: said on the screen
            summary.update(f" tools: {exc}")
            return
        self.readings += 1
        self.show(view)

    def show(self, view: ToolsView) -> None:
        self.view = view
        builtin = sum(t.source == "built-in" for t in view.tools)
        up = sum(s.state == "up" for s in view.servers)
        down = sum(s.state in DOWN for s in view.servers)
        servers = (f"{counted(len(view.servers), 'MCP server')}: {up} up"
                   + (f", {down} down" if down else "")) if view.servers else "no MCP servers"  # fmt: skip
        self.query_one("#tools-summary", Static).update(
            f" {counted(len(view.tools), 'tool')}: {builtin} built in, "
            f"{len(view.tools) - builtin} from MCP servers · {servers}"
        )
        self.query_one(ToolsTable).show_tools(view.tools)
        self.query_one(ServersTable).show_servers(view.servers)
        set_title(self.query_one("#tools-pane"), f"Tools ({len(view.tools)})")
        set_title(self.query_one("#servers-pane"), f"MCP servers ({len(view.servers)})")
        self.query_one("#tools-sandbox", Static).update(sandbox_line(view.sandbox))
        self._detail()

    @on(DataTable.RowHighlighted, "#tools")
    def _detail(self) -> None:
        """What the tool under the cursor does, and its rules and last error, in full."""
        key = self.query_one(ToolsTable).current_key()
        row = next((t for t in self.view.tools if t.name == key), None) if self.view else None
        self.query_one("#tool-detail", Static).update(tool_detail(row) if row else "")


def sandbox_line(sandbox: str) -> Content:
    """The shell's sandbox as the screen says it: in the warning colour when it is off, in
    the failure colour when the kernel cannot make one."""
    said = visible(sandbox)  # (the room's words: text, never markup)
    if said.startswith("unavailable:"):
        why = said.removeprefix("unavailable:").strip()
        return Content.styled(f" ⚠ no shell sandbox ({why}): every shell call asks, and "
                              f"one approved {WHOLE_ACCOUNT}", "bold $error")  # fmt: skip
    if said.startswith("off"):
        return Content.styled(f" shell sandbox: {said}: an approved shell call "
                              f"{WHOLE_ACCOUNT}", "bold $warning")  # fmt: skip
    return Content.assemble((" shell sandbox: ", "$foreground-muted"), said)
