"""Scenes of issue 34 in the console: the tools screen (`T`) over a room with the published
MCP time server and a rule, and decision cards that say what the operator must know of a
call's tool: the sandbox a shell call runs in (and the key that runs it outside), or the
MCP server a tool comes from.

The time server is `mcp-server-time` from the venv, named by its command alone (so the
screen shows `mcp-server-time --local-timezone UTC`, the same on every machine): whoever
opens such a room puts the venv's bin first on PATH (`VENV_BIN`).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from console.screens.tools import ToolsScreen
from console.widgets.tool_tables import ServersTable, ToolsTable
from engine.providers.base import ModelRequest
from tests.console.helpers import send, started, until
from tests.console.scenes import steady
from tests.scripted import Reply, ScriptedModel, after_tools

VENV_BIN = Path(sys.executable).parent  # mcp-server-time is installed beside the interpreter
TIME_SERVER = ('[[mcp]]\nname = "time"\ncommand = "mcp-server-time"\n'
               'args = ["--local-timezone", "UTC"]\n')  # fmt: skip
RULES = ('[[rules]]\neffect = "allow"\ntool = "time.convert_time"\n\n'
         '[[rules]]\neffect = "allow"\ntool = "shell"\npattern = "git status*"\n')  # fmt: skip
TIME_CALL = ("time__get_current_time", {"timezone": "UTC"})  # as the model names it
QUOTED = "the time server said: "  # how the scripted model begins its answer


def with_time_server(room: Path, toml: str = TIME_SERVER + RULES) -> None:
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(toml)


def asks_the_time(request: ModelRequest) -> Reply:
    """A model that calls the time server's tool, then quotes what it answered."""
    results = after_tools(request.messages)
    if results:
        return Reply(text=QUOTED + results[0].text)
    return Reply(calls=[TIME_CALL])


async def open_tools(pilot: Pilot) -> ToolsScreen:
    """Press `T` (from the timeline: the chat input would take the letter)."""
    app = pilot.app
    app.main.query_one("#timeline").focus()  # type: ignore[attr-defined]
    await pilot.press("T")
    await until(pilot, lambda: isinstance(app.screen, ToolsScreen), "the tools screen")
    screen = app.screen
    assert isinstance(screen, ToolsScreen)
    await until(pilot, lambda: screen.readings, "the first reading")
    return screen


async def tools(pilot: Pilot) -> None:
    """Every tool (the time server's too) and the server up; the sandbox under them."""
    await started(pilot)
    screen = await open_tools(pilot)
    table, servers = screen.query_one(ToolsTable), screen.query_one(ServersTable)
    await until(pilot, lambda: (table.row_count, servers.row_count), "the rows",
                ok=lambda n: n == (9, 1))  # fmt: skip
    await steady(pilot)


async def card_mcp(pilot: Pilot) -> None:
    """A call of the time server's tool on its card: from which server, read-only."""
    main = await started(pilot)
    await send(pilot, "what time is it?", click=False)
    card = main.query_one("DecisionCard")
    await until(pilot, lambda: card.armed, "the card holds the keyboard, its keys live")
    await steady(pilot)


Scene = tuple[Callable[[Pilot], Awaitable[None]], tuple[int, int], dict[str, Any]]
TOOL_SCENES: dict[str, Scene] = {
    "tools": (tools, (160, 48), {}),
    "card_mcp": (card_mcp, (160, 48), {"provider": ScriptedModel(asks_the_time)}),
}
