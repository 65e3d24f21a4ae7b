"""What the console knows of the agent's tools and of the shell's sandbox, read from the
room's `tools` operation (engine/api/tool_models.py) with the room's state (console/seed.py,
when the console attaches) and again by the tools screen.

A decision card says from it where a call's tool comes from (`from SERVER`, and whether
its server marks it read-only or idempotent) and, for a shell call, the sandbox it will run
in, and offers to approve it outside the sandbox (or with the network) only where there is
a sandbox to leave; the status bar warns when the kernel cannot make one. A call of a tool
not listed yet (a server that came up since) has the room read again, once per name.

The room says its sandbox in words (engine/shell/sandbox.py, `Sandbox.describe`):
"unavailable: WHY" where the kernel cannot make one, "off (agentdeck.toml)" where the
operator turned it off, else "MODE, no network (DETAILS)" or "MODE, network on (DETAILS)".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from engine.api.tool_models import ToolRow, ToolsView

SHELL = "shell"  # the one tool the sandbox confines
# The decision actions that run a shell call another way than the room's sandbox says
# (engine.domain.decisions.Decision.sandbox): keys O and N on a card and in the queue.
SANDBOX_ACTIONS = ("outside", "network")
Sandbox = Literal["unknown", "on", "off", "missing"]
Level = Literal["", "warning", "error"]  # how a card's line about the tool is coloured
WHOLE_ACCOUNT = "runs with your whole account"


class ToolFacts:
    """The last `tools` reading: each tool by name, and the sandbox."""

    def __init__(self) -> None:
        self.view: ToolsView | None = None
        self._rows: dict[str, ToolRow] = {}
        self._asked: set[str] = set()  # names found missing: the room is read again once each
        self.reread: Callable[[], None] | None = None  # the bridge's: read the room again

    def load(self, view: ToolsView) -> None:
        self.view = view
        self._rows = {t.name: t for t in view.tools}

    def row(self, name: str) -> ToolRow | None:
        """The tool `name` as last read; one not listed has the room read again (once)."""
        row = self._rows.get(name)
        if row is None and self.view is not None and name not in self._asked:
            self._asked.add(name)
            if self.reread is not None:
                self.reread()
        return row

    @property
    def sandbox(self) -> str | None:
        """The shell's sandbox in the room's words (None: not read yet)."""
        return self.view.sandbox if self.view is not None else None

    def sandbox_state(self) -> Sandbox:
        said = self.sandbox
        if said is None:
            return "unknown"
        if said.startswith("unavailable:"):
            return "missing"
        return "off" if said.startswith("off") else "on"

    def sandbox_short(self) -> str:
        """The sandbox without its details: `workspace-write, no network`."""
        return (self.sandbox or "").split(" (", 1)[0]

    def offers(self, tool: str, choice: str) -> bool:
        """Whether a call of `tool` may be approved `choice` ("outside" the sandbox, or
        with the "network"): a shell call, where a sandbox confines it (and, for the
        network, keeps it offline)."""
        if tool != SHELL or self.sandbox_state() != "on" or choice not in SANDBOX_ACTIONS:
            return False
        return choice == "outside" or "no network" in self.sandbox_short()

    def warning(self) -> str:
        """The status bar's warning: "no sandbox" where the kernel cannot make one."""
        return "no sandbox" if self.sandbox_state() == "missing" else ""

    def about(self, tool: str) -> tuple[str, Level] | None:
        """A decision card's line about `tool`: the sandbox a shell call runs in, where an
        MCP tool comes from; None when there is nothing to say (or nothing read yet)."""
        if tool == SHELL:
            state = self.sandbox_state()
            if state == "on":
                return f"sandbox: {self.sandbox_short()}", ""
            if state == "missing":
                return f"⚠ no sandbox: {WHOLE_ACCOUNT}", "error"
            if state == "off":
                return f"sandbox off (agentdeck.toml): {WHOLE_ACCOUNT}", "warning"
            return None
        row = self.row(tool)
        if row is None or row.source == "built-in":
            return None
        return " · ".join([f"from {row.source}", *marks(row)]), ""


def marks(row: ToolRow) -> list[str]:
    """What a tool's server says of it: read-only, idempotent (may run again after a crash)."""
    return [m for m, on in (("read-only", row.read_only), ("idempotent", row.idempotent)) if on]
