"""Tools from MCP servers (issue 34): real servers, started by the runtime: the tests' own
(tests/mcp_server.py, the official SDK's MCPServer, over stdio and streamable HTTP) and a
published one installed from the package index (mcp-server-time). Their tools go through
the same gate as the built-in ones: approvals, rules, time limits, the result cap; a
server that exits is started again; one that cannot start leaves the runtime running; a
SIGKILL during a call puts it up for review unless its server marks it idempotent."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.api.local import LocalClient
from engine.config import Config, McpSettings, RuleSettings, RuntimeConfig
from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.runtime import Runtime
from tests.helpers import rows
from tests.scripted import Reply, ScriptedModel, after_tools, first_then
from tests.wait import until

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
SERVER = [sys.executable, str(HERE / "mcp_server.py")]
TIME = str(Path(sys.executable).parent / "mcp-server-time")


def mcp_config(runs: Path, *, time: bool = False, **kw: Any) -> Config:
    """The tests' server (its tools run unasked) as `test`, and with `time` the published
    time server (asking) as `time`; MCP_TEST_RUNS is the only variable the test server is
    given. (Each server is a Python process that takes about a second to start.)"""
    os.environ["MCP_TEST_RUNS"] = str(runs)
    servers = [
        McpSettings(name="test", command=SERVER[0], args=[*SERVER[1:], "stdio"],
                    env=["MCP_TEST_RUNS"], approval="allow", timeout=kw.pop("timeout", 60.0)),
    ]  # fmt: skip
    if time:
        servers.append(McpSettings(name="time", command=TIME, args=["--local-timezone", "UTC"]))
    return Config(mcp=servers, **kw)


def asked_tool(request: Any) -> Reply:
    """A model that calls the tool its user names (`use TOOL`), labelled for MCP_TEST_RUNS:
    `idem` for the idempotent counter, `plain` for the other."""
    if after_tools(request.messages):
        return Reply(text="done")
    tool = request.messages[-1].text.removeprefix("use ")
    return Reply(calls=[(tool, {"label": "idem" if "idem" in tool else "plain"})])


def msg_for(tool: str, thread: str = "t1") -> Message:
    return Message(origin="invoke", sender="test", thread_id=thread, text=f"use {tool}")


def calls(tool: str, args: dict[str, Any]) -> Any:
    return first_then([(tool, args)])


async def one_call(rt: Runtime, tool: str, thread: str = "t1") -> dict[str, Any]:
    """Run a turn whose model calls `tool`; its call's row (approving it if it waits)."""
    out = await rt.run_turn(msg_for(tool, thread))
    if out.status == "waiting":
        [call] = out.pending
        assert await rt.decide(Decision.approve(call["call_id"], seen=call["args"])) == "queued"
        out = await rt.wait_turn(out.turn_id)
    [row] = await rows(rt, "SELECT tool, status, result, error FROM tool_calls WHERE turn_id = ?",
                       out.turn_id)  # fmt: skip
    return {"tool": row[0], "status": row[1], "result": row[2], "error": row[3], "text": out.text}


async def test_a_servers_tools_run_through_the_gate_and_their_results_reach_the_model(
    tmp_path: Path,
) -> None:
    script_args: dict[str, Any] = {}

    def model(request: Any) -> Reply:
        if after_tools(request.messages):
            return Reply(text="saw: " + after_tools(request.messages)[0].text)
        return Reply(calls=[(script_args["tool"], script_args["args"])])

    config = mcp_config(tmp_path / "runs.log", time=True,
                        runtime=RuntimeConfig(max_result_bytes=16_384),
                        rules=[RuleSettings(tool="test.fail", effect="deny")])  # fmt: skip
    async with Runtime.open(tmp_path / "room", kind="run", provider=ScriptedModel(model),
                            config=config) as rt:  # fmt: skip
        names = {s["name"] for s in rt.tools.schemas()}
        assert {"test__echo", "time__get_current_time"} <= names  # the providers' charset

        async def use(tool: str, **args: Any) -> dict[str, Any]:
            script_args.update(tool=tool, args=args)
            return await one_call(rt, tool)

        echo = await use("test__echo", text="hello")
        assert (echo["tool"], echo["status"], echo["text"]) == (
            "test.echo",
            "succeeded",
            "saw: echo: hello",
        )
        now = await use("time__get_current_time", timezone="UTC")  # asks: approved above
        assert now["status"] == "succeeded" and json.loads(now["result"])["timezone"] == "UTC"
        denied = await use("test__fail", why="no")
        assert denied["status"] == "failed" and "denied by" in denied["error"]
        bad = await use("test__echo", text=5)
        assert bad["status"] == "failed" and "invalid arguments for test.echo" in bad["error"]
        huge = await use("test__huge", size=300_000)
        assert huge["status"] == "succeeded" and len(huge["result"].encode()) <= 16_384
        assert "cut by the runtime" in huge["result"]
        view = await LocalClient(rt).tools()
    by_name = {t.name: t for t in view.tools}
    assert by_name["test.echo"].read_only and by_name["test.echo"].idempotent
    assert (by_name["test.echo"].approval, by_name["time.convert_time"].approval) == (
        "allow",
        "ask",
    )
    assert by_name["test.echo"].calls == 1  # (the call with bad arguments never ran)
    assert by_name["test.fail"].rules == [
        "agentdeck.toml's room rule toml:1 (test.fail: (any arguments))"
    ]
    assert {(s.name, s.state) for s in view.servers} == {("test", "up"), ("time", "up")}


async def test_a_hanging_tool_is_stopped_at_its_limit_and_a_failing_one_says_why(
    tmp_path: Path,
) -> None:
    args = {"test__hang": {}, "test__fail": {"why": "the disk is on fire"}}

    def model(request: Any) -> Reply:
        if after_tools(request.messages):
            return Reply(text="done")
        tool = request.messages[-1].text.removeprefix("use ")
        return Reply(calls=[(tool, args[tool])])

    async with Runtime.open(tmp_path / "room", kind="run", provider=ScriptedModel(model),
                            config=mcp_config(tmp_path / "runs.log", timeout=1.0)) as rt:  # fmt: skip
        hung = await one_call(rt, "test__hang")
        failed = await one_call(rt, "test__fail", thread="t2")
    assert hung["status"] == "failed" and "did not finish within 1s" in hung["error"], hung
    assert failed["status"] == "failed" and "the disk is on fire" in failed["error"], failed


async def test_a_server_that_exits_is_started_again_and_one_that_cannot_start_is_reported(
    tmp_path: Path,
) -> None:
    config = mcp_config(tmp_path / "runs.log")
    config.mcp.append(McpSettings(name="ghost", command=str(tmp_path / "no-such-server")))
    tool: dict[str, Any] = {"name": "test__crash"}
    script = lambda request: (  # noqa: E731
        Reply(text="done")
        if after_tools(request.messages)
        else Reply(calls=[(tool["name"], tool.get("args", {}))])
    )
    async with Runtime.open(tmp_path / "room", kind="run", provider=ScriptedModel(script),
                            config=config) as rt:  # fmt: skip
        ghost = next(s for s in rt.mcp.servers if s.name == "ghost")
        assert ghost.state in ("failed", "starting") and "no-such-server" in (ghost.why or "")
        assert not any(t.startswith("ghost.") for t in rt.tools.names())
        crashed = await one_call(rt, "test__crash")
        assert crashed["status"] == "failed"
        test = next(s for s in rt.mcp.servers if s.name == "test")
        await until(lambda: test.restarts, "the server started again", ok=lambda n: n >= 1)
        await until(lambda: test.state, "the server up again", ok=lambda s: s == "up")
        tool["name"] = "test__echo"
        tool["args"] = {"text": "again"}
        assert (await one_call(rt, "test__echo", thread="t2"))["status"] == "succeeded"


async def test_a_server_gets_only_the_variables_the_toml_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_SECRET", "s3cret-of-the-room")
    config = mcp_config(tmp_path / "runs.log")
    async with Runtime.open(tmp_path / "room", kind="run",
                            provider=ScriptedModel(calls("test__secret", {})), config=config) as rt:  # fmt: skip
        row = await one_call(rt, "test__secret")
    assert row["result"] == "unset"  # not named: not given
    config.mcp[0] = config.mcp[0].model_copy(update={"env": ["MCP_TEST_RUNS", "MCP_TEST_SECRET"]})
    async with Runtime.open(tmp_path / "room", kind="run",
                            provider=ScriptedModel(calls("test__secret", {})), config=config) as rt:  # fmt: skip
        row = await one_call(rt, "test__secret", thread="t2")
    assert "s3cret-of-the-room" not in (row["result"] or "")  # given, but masked in the result
    assert row["status"] == "succeeded"


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_streamable_http_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("MCP_TEST_RUNS", str(tmp_path / "runs.log"))
    monkeypatch.setenv("MCP_TEST_TOKEN", "Bearer t0ken")
    server = subprocess.Popen([*SERVER, "http", str(port)], stderr=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        config = Config(mcp=[McpSettings(name="web", url=f"http://127.0.0.1:{port}/mcp",
                                         headers={"Authorization": "MCP_TEST_TOKEN"},
                                         approval="allow", start_timeout=5)])  # fmt: skip
        await until(lambda: listening(port), "the HTTP server listening")
        async with Runtime.open(tmp_path / "room", kind="run", config=config,
                                provider=ScriptedModel(calls("web__echo", {"text": "over http"}))) as rt:  # fmt: skip
            assert rt.mcp is not None and rt.mcp.servers[0].state == "up", rt.mcp.servers[0].why
            row = await one_call(rt, "web__echo")
        assert (row["tool"], row["result"]) == ("web.echo", "echo: over http")
    finally:
        server.kill()
        server.wait()


async def test_a_kill_during_calls_puts_them_up_for_review_unless_idempotent(
    tmp_path: Path,
) -> None:
    """Two calls running on the server when the runtime is SIGKILLed (one worker, two
    threads): the plain one waits for a review and never runs again; the one its server
    annotates idempotent runs again by itself."""
    room, runs = tmp_path / "room", tmp_path / "room" / "runs.log"
    room.mkdir()
    tools = ["test__slow_count", "test__idem_slow_count"]
    worker = subprocess.Popen([sys.executable, str(HERE / "mcp_worker.py"), str(room), *tools],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        assert worker.stdout is not None
        line = await anyio.to_thread.run_sync(worker.stdout.readline)
        assert line.strip() == b"ready"
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        if worker.stdout is not None:
            worker.stdout.close()
    async with Runtime.open(room, kind="run", provider=ScriptedModel(asked_tool),
                            config=mcp_config(runs)) as rt:  # fmt: skip
        await until(lambda: runs.read_text().splitlines(), "the idempotent call ran again",
                    ok=lambda lines: sorted(lines) == ["idem", "idem", "plain"])  # fmt: skip
        [call] = await until(rt.pending, "the plain call up for review", ok=bool)
        assert (call.tool, call.awaiting) == ("test.slow_count", "review")
    assert sorted(runs.read_text().splitlines()) == ["idem", "idem", "plain"]  # once more only


async def test_a_servers_progress_shows_as_the_calls_output(tmp_path: Path) -> None:
    from engine.domain.events import CallOutput

    seen: list[str] = []
    config = mcp_config(tmp_path / "runs.log")
    async with Runtime.open(tmp_path / "room", kind="run", config=config,
                            provider=ScriptedModel(calls("test__progress", {"steps": 3}))) as rt:  # fmt: skip
        rt.subscribe(lambda e: seen.append(e.text) if isinstance(e, CallOutput) else None)
        row = await one_call(rt, "test__progress")
    assert row["result"] == "did 3 steps"
    assert "progress 1/3: step 1\n" in "".join(seen)


async def test_a_cancelled_turn_cancels_its_call_on_the_server(tmp_path: Path) -> None:
    runs = tmp_path / "runs.log"
    config = mcp_config(runs)
    async with Runtime.open(tmp_path / "room", kind="run", config=config,
                            provider=ScriptedModel(calls("test__hang", {}))) as rt:  # fmt: skip
        handle = await rt.submit(msg_for("test__hang"))
        await until(lambda: runs.exists() and "hang started" in runs.read_text(),
                    "the call running on the server")  # fmt: skip
        await rt.cancel_turn(handle.turn_id, "enough")
        outcome = await rt.wait_turn(handle.turn_id)
        assert (outcome.status, outcome.reason) == ("done", "cancelled")
        await until(lambda: "hang cancelled" in runs.read_text(),
                    "the server told to cancel the call (the SDK's notification)")  # fmt: skip


async def test_servers_that_are_up_stay_up_whatever_protocol_era_they_speak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found trying the console: a liveness `ping` is gone from the 2026-07-28 protocol
    (mcp-server-time answered it 'method not found' and was started again every five
    seconds); the look is a listing of the tools now, and servers that answer stay up."""
    from engine.tools import mcp

    monkeypatch.setattr(mcp, "PING_EVERY", 0.05)
    looks = {"n": 0}
    real = mcp.McpServer._watch

    async def counted(self: Any, client: Any) -> None:
        listing = client.list_tools

        async def look(**kw: Any) -> Any:
            looks["n"] += 1
            return await listing(**kw)

        client.list_tools = look
        await real(self, client)

    monkeypatch.setattr(mcp.McpServer, "_watch", counted)
    async with Runtime.open(tmp_path / "room", kind="run", config=mcp_config(tmp_path / "r", time=True),
                            provider=ScriptedModel(calls("time__get_current_time", {}))) as rt:  # fmt: skip
        await until(lambda: looks["n"], "several looks", ok=lambda n: n >= 10)
        assert [(s.name, s.state, s.restarts) for s in rt.mcp.servers] == [
            ("test", "up", 0),
            ("time", "up", 0),
        ]
