"""The tools screen's tables: every tool the agent has (where it comes from, how it is
approved and by which rules, what it did this run; what it does and its last error below
the table, for the tool under the cursor), and every MCP server with its state.

Both draw what the room's `tools` operation said (engine/api/tool_models.py); a server's
words (a tool's description, why it failed) are text, never markup, like every cell of a
KeyedTable. A server that failed or restarts says so in the failure colour, its reason too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.content import Content

from console.format import visible
from console.tool_facts import marks
from console.widgets.keyed_table import KeyedTable

if TYPE_CHECKING:
    from engine.api.tool_models import ServerRow, ToolRow

TOOL_COLUMNS = ("tool", "source", "approval", "marks", "calls", "errors", "rules")
SERVER_COLUMNS = ("server", "state", "why", "tools", "restarts", "target")
DOWN = frozenset({"failed", "restarting"})  # a server whose tools fail now


def tool_cells(row: ToolRow) -> tuple[str, ...]:
    """One tool as the table's columns (its description and last error: `tool_detail`)."""
    return (row.name, row.source, row.approval, " · ".join(marks(row)), str(row.calls),
            str(row.errors) if row.errors else "", "; ".join(row.rules) or "—")  # fmt: skip


def tool_detail(row: ToolRow) -> Content:
    """The tool under the cursor, below the table: what it does (its server's words), the
    name the model calls it by, the rules that name it, its last error this run."""
    parts = [Content.styled(visible(row.name), "bold")]
    if row.wire_name != row.name:
        parts.append(Content.styled(f" · the model calls it {visible(row.wire_name)}",
                                    "$foreground-muted"))  # fmt: skip
    parts.append(Content("\n" + visible(row.description or "(no description)")))
    if row.rules:
        parts.append(Content("\nrules: " + visible("; ".join(row.rules))))
    if row.last_error:
        parts.append(Content.styled(f"\nlast error: {visible(row.last_error)}", "$error"))
    return Content("").join(parts)


class ToolsTable(KeyedTable):
    """One row per tool: the built-in ones, then each server's, as the room lists them."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(TOOL_COLUMNS, give_way=("rules",), **kw)

    def show_tools(self, rows: list[ToolRow]) -> None:
        self.show({r.name: tool_cells(r) for r in rows})


class ServersTable(KeyedTable):
    """One row per MCP server: its state, why it is not up, its tools, its restarts, what
    it runs (its command, or its URL)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(SERVER_COLUMNS, state_columns=("state",), give_way=("target", "why"),
                         **kw)  # fmt: skip
        self._down: set[str] = set()

    def show_servers(self, rows: list[ServerRow]) -> None:
        self._down = {s.name for s in rows if s.state in DOWN}
        self.show({s.name: (s.name, s.state, s.why or "", str(s.tools), str(s.restarts),
                            s.target) for s in rows})  # fmt: skip

    def _cell(self, label: str, value: str, key: str | None = None) -> Text:
        cell = super()._cell(label, value, key)
        if label != "why" or key not in self._down:
            return cell
        text = cell.copy()
        text.stylize(self.get_component_rich_style("state--failed", partial=True))
        return text
