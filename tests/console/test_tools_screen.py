"""The tools screen (`T`, issue 34): every tool the agent has, built in or from which MCP
server, with its approval, marks, rules and use this run; each server's state (the failure
colour when it cannot run); the shell's sandbox. And a call of an MCP server's tool waits
for the operator like any other: its card says which server it comes from, and once
approved in the console its result reaches the model.

The servers are real processes (the published `mcp-server-time`, started by the room's
owner), so this module is in the process tier.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text

from console.screens.tools import ToolsScreen
from console.widgets.decision_card import DecisionCard
from console.widgets.tool_tables import ServersTable, ToolsTable
from engine.api.tool_models import ServerRow, ToolRow, ToolsView
from engine.shell import sandbox as sandboxes
from tests.console.conftest import build
from tests.console.helpers import SIZE, decisions_sent, send, started, until
from tests.console.test_decision_card import card_text
from tests.console.test_hostile_text import drawn_clean, raw_controls
from tests.console.tool_scenes import (
    QUOTED,
    TIME_SERVER,
    TOOL_SCENES,
    VENV_BIN,
    asks_the_time,
    open_tools,
    with_time_server,
)
from tests.scripted import ScriptedModel

pytestmark = [pytest.mark.anyio, pytest.mark.console]


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`mcp-server-time` is found by its name, as the README's example names it."""
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    yield


def cells(table: ToolsTable | ServersTable, key: str) -> dict[str, str]:
    return {label: str(table.get_cell(key, label)) for label in table.labels}


async def test_the_screen_lists_every_tool_each_server_and_the_sandbox(room: Path) -> None:
    with_time_server(room)
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        screen = await open_tools(pilot)
        table, servers = screen.query_one(ToolsTable), screen.query_one(ServersTable)
        await until(pilot, lambda: table.row_count, "every tool", ok=lambda n: n == 9)
        shell = cells(table, "shell")
        assert (shell["source"], shell["approval"]) == ("built-in", "ask")
        assert "git status*" in shell["rules"]  # the toml's rule that names it
        now = cells(table, "time.get_current_time")
        assert (now["source"], now["approval"], now["marks"], now["calls"]) == (
            "time", "ask", "read-only · idempotent", "0",
        )  # fmt: skip
        assert cells(servers, "time") == {"server": "time", "state": "● up", "why": "",
                                          "tools": "2", "restarts": "0",
                                          "target": "mcp-server-time --local-timezone UTC"}  # fmt: skip
        sandbox = str(screen.query_one("#tools-sandbox").render())
        assert "shell sandbox: workspace-write, no network" in sandbox
        table.focus()
        await pilot.press("j", "j", "j", "j", "j", "j", "j")  # to time.get_current_time
        detail = str(screen.query_one("#tool-detail").render())
        assert "the model calls it time__get_current_time" in detail
        assert "Get current time in a specific timezone" in detail
        readings = screen.readings
        await pilot.press("r")
        await until(pilot, lambda: screen.readings, "read again", ok=lambda n: n > readings)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ToolsScreen), "closed")
        await app.shutdown()


async def test_a_server_that_cannot_start_says_why_in_the_failure_colour(room: Path) -> None:
    with_time_server(room, '[[mcp]]\nname = "notes"\ncommand = "agentdeck-no-such-server"\n')
    app = build(room)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        screen = await open_tools(pilot)
        servers = screen.query_one(ServersTable)

        async def read() -> str:  # (it is tried again with a backoff: starting, failed, ...)
            before = screen.readings
            screen.action_read()
            await until(pilot, lambda: screen.readings, "read", ok=lambda n: n > before)
            return cells(servers, "notes")["state"]

        await until(pilot, read, "the server failed", ok=lambda state: state == "✖ failed")
        why = servers.get_cell("notes", "why")
        assert isinstance(why, Text) and "agentdeck-no-such-server" in why.plain
        failed = servers.get_component_rich_style("state--failed", partial=True)
        assert failed.color is not None and any(s.style == failed for s in why.spans)
        assert "1 MCP server: 0 up, 1 down" in str(screen.query_one("#tools-summary").render())
        await app.shutdown()


async def test_an_mcp_call_approved_in_the_console_reaches_the_model(room: Path) -> None:
    """The model calls `time__get_current_time`; it waits (the server asks), its card says
    it is the time server's and read-only, `a` approves it, and the model quotes the
    server's answer."""
    with_time_server(room, TIME_SERVER)
    app = build(room, provider=ScriptedModel(asks_the_time))
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        sent = decisions_sent(main)
        await send(pilot, "what time is it?", click=False)
        card = main.query_one(DecisionCard)
        await until(pilot, lambda: card.armed and card.call, "the call waits on its card")
        assert card.call is not None and card.call.tool == "time.get_current_time"
        shown = card_text(card)
        assert "from time · read-only · idempotent" in shown
        assert "outside" not in card.key_line()  # only a shell call runs in the sandbox
        await pilot.press("a")
        answer = await until(pilot, lambda: [e.text for e in main.state.thread("chat:main").entries
                                             if e.role == "assistant" and QUOTED in e.text],
                             "the model quotes the result")  # fmt: skip
        assert '"timezone": "UTC"' in answer[0] and '"datetime"' in answer[0]
        assert [(d.action, d.sandbox) for d in sent] == [("resume", "default")]
        screen = await open_tools(pilot)
        table = screen.query_one(ToolsTable)
        await until(pilot, lambda: cells(table, "time.get_current_time")["calls"], "its use",
                    ok=lambda n: n == "1")  # fmt: skip
        await app.shutdown()


@pytest.mark.parametrize("scene", list(TOOL_SCENES))
def test_tools_snapshot(scene: str, snap_compare, room: Path, monkeypatch) -> None:
    """The sandbox line names the kernel's Landlock ABI: the snapshots see ABI 4's."""
    monkeypatch.setattr(sandboxes, "probe_abi", lambda: 4)
    with_time_server(room)
    run_before, size, kw = TOOL_SCENES[scene]
    kw = {"provider": ScriptedModel(asks_the_time)} if "provider" in kw else kw
    assert snap_compare(build(room, **kw), terminal_size=size, run_before=run_before)


async def test_what_a_server_says_is_shown_as_text(deck_app) -> None:
    """A server's words (a tool's description, why it failed, its command) may hold markup
    or terminal escapes: the screen draws them as the characters they are."""
    hostile = "[bold]loud[/] \x1b[31mred [/]"
    view = ToolsView(
        tools=[ToolRow(name="evil.tool", wire_name="evil__tool", source="evil", approval="ask",
                       description=hostile, rules=[], errors=1, last_error=hostile)],
        servers=[ServerRow(name="evil", target=f"evil-server {hostile}", state="failed",
                           why=hostile)],
        sandbox=f"unavailable: {hostile}",
    )  # fmt: skip
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        screen = await open_tools(pilot)
        screen.show(view)
        await pilot.pause()
        text = await drawn_clean(pilot, "the tools screen")
        assert "[bold]loud[/] \\x1b[31mred [/]" in text  # description, in the detail
        assert "⚠ no shell sandbox ([bold]loud[/]" in text
        assert not raw_controls(text)
        await app.shutdown()
