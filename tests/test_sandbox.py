"""The shell's sandbox (issue 34): an approved command cannot write outside the workspace,
read the operator's home or the room's files, or reach the network; each succeeds only
after an explicit decision to run it outside the sandbox (or, for the network, with it),
which no rule can make and the decisions table records."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from engine.config import Config, RuleSettings, SandboxConfig
from engine.domain.decisions import Decision
from engine.providers.offline import OfflineModel
from engine.shell import sandbox as sandboxes
from engine.tools.builtin import builtin_tools
from tests.helpers import msg, rows, runtime

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


def offline(tmp_path: Path, **kw):  # noqa: ANN201
    return runtime(tmp_path, OfflineModel(), builtin_tools(), **kw)


async def approved(rt, command: str, sandbox: str = "default") -> dict:  # noqa: ANN001
    """Run `command` through the shell tool, approved as `sandbox` says; the call's row."""
    out = await rt.run_turn(msg(f"run `{command}`"))
    [call] = out.pending
    decision = Decision.approve(call["call_id"], seen=call["args"], sandbox=sandbox)
    assert await rt.decide(decision) == "queued"
    await rt.wait_turn(out.turn_id)
    [row] = await rows(rt, "SELECT status, result, error FROM tool_calls WHERE id = ?",
                       call["call_id"])  # fmt: skip
    return {"status": row[0], "result": json.loads(row[1]) if row[1] else None, "error": row[2]}


async def test_a_command_writes_the_workspace_and_nothing_outside_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    async with offline(tmp_path) as rt:
        assert rt.sandbox.on, rt.sandbox.state
        inside = await approved(rt, "echo made > inside.txt && cat inside.txt")
        assert inside["status"] == "succeeded" and inside["result"]["stdout"] == "made\n"
        refused = await approved(rt, f"touch {outside}")
        assert refused["status"] == "failed" and not outside.exists()
        assert "the sandbox may have refused it" in refused["error"]
        assert "Permission denied" in refused["error"]
        done = await approved(rt, f"touch {outside}", sandbox="outside")
        assert done["status"] == "succeeded" and outside.exists()
        audit = await rows(rt, "SELECT sandbox FROM decisions ORDER BY created_at")
    assert audit == [(None,), (None,), ("outside",)]


async def test_the_home_and_the_rooms_files_cannot_be_read_or_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    async with offline(tmp_path) as rt:
        ssh = await approved(rt, "echo key >> ~/.ssh/authorized_keys")
        assert ssh["status"] == "failed" and not (home / ".ssh" / "authorized_keys").exists()
        db = await approved(rt, "head -c 15 ../execution.db")
        ssh_out = await approved(rt, "echo key >> ~/.ssh/authorized_keys", sandbox="outside")
        db_out = await approved(rt, "head -c 15 ../execution.db", sandbox="outside")
    assert ssh_out["status"] == "succeeded" and (home / ".ssh" / "authorized_keys").exists()
    if (tmp_path / "room" / "execution.db").exists():  # (on PostgreSQL the room has none)
        assert db["status"] == "failed" and "Permission denied" in db["error"]
        assert db_out["result"]["stdout"] == "SQLite format 3"


async def test_the_network_is_out_of_reach_unless_a_decision_lets_it(tmp_path: Path) -> None:
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        connect = f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'"
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, lambda stream: stream.aclose())
            async with offline(tmp_path) as rt:
                refused = await approved(rt, connect)
                network = await approved(rt, connect, sandbox="network")
                outside = await approved(rt, connect, sandbox="outside")
            tg.cancel_scope.cancel()
    assert refused["status"] == "failed" and "the sandbox may have refused it" in refused["error"]
    assert network["result"]["stdout"] == "connected\n"
    assert outside["result"]["stdout"] == "connected\n"


async def test_a_rule_runs_a_command_inside_the_sandbox_and_no_rule_runs_one_outside(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "by-rule"
    config = Config(rules=[RuleSettings(tool="shell", effect="allow", pattern="touch *")])
    async with offline(tmp_path, config=config) as rt:
        out = await rt.run_turn(msg(f"run `touch {outside}`"))
        assert out.pending == [] and out.calls[0]["status"] == "failed"  # allowed, confined
        assert not outside.exists()
    with pytest.raises(ValueError, match="never remembered"):
        Decision.approve("c_1", sandbox="outside", remember="thread")
    with pytest.raises(ValueError, match="runs nothing"):
        Decision.cancel("c_1", sandbox="outside")


async def test_where_no_sandbox_can_be_made_every_shell_call_asks_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(sandboxes, "LAUNCHER", tmp_path / "no-such-launcher.py")
    config = Config(rules=[RuleSettings(tool="shell", effect="allow", pattern="echo *")])
    async with offline(tmp_path, config=config) as rt:
        assert rt.sandbox.missing and not rt.sandbox.on
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = out.pending  # the allow rule does not run it unasked
        assert "no sandbox here" in call["reason"]
        assert "unavailable" in rt.sandbox.describe()
    assert "no shell sandbox" in caplog.text  # said at start
    off = Config(sandbox=SandboxConfig(shell="off"))
    async with offline(tmp_path, config=off, first_id=90) as rt:
        assert not rt.sandbox.missing and rt.sandbox.describe() == "off (agentdeck.toml)"


async def test_history_says_which_call_ran_outside_the_sandbox(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.cli import main

    async with offline(tmp_path) as rt:
        await approved(rt, f"touch {tmp_path / 'x'}", sandbox="outside")
        [turn] = await rows(rt, "SELECT id FROM turns")
    room = str(tmp_path / "room")
    assert await anyio.to_thread.run_sync(main, ["--room", room, "history", "--turn", turn[0]]) == 0
    assert "OUTSIDE THE SANDBOX" in capsys.readouterr().out
    argv = ["--room", room, "history", "--turn", turn[0], "--json"]
    assert await anyio.to_thread.run_sync(main, argv) == 0
    [decision] = json.loads(capsys.readouterr().out)["decisions"]
    assert decision["sandbox"] == "outside"


async def test_an_allow_rule_can_give_its_commands_the_network_and_never_more(
    tmp_path: Path,
) -> None:
    from engine.config import ConfigError, load_config

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await stream.receive()
            await stream.send(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        fetch = f"curl -s http://127.0.0.1:{port}/"
        rule = RuleSettings(tool="shell", effect="allow", pattern="curl *", network=True)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, answer)
            async with offline(tmp_path, config=Config(rules=[rule])) as rt:
                out = await rt.run_turn(msg(f"run `{fetch}`"))
                [row] = await rows(rt, "SELECT status, result FROM tool_calls")
                outside = await rt.run_turn(msg(f"run `touch {tmp_path / 'no'}`"))
            tg.cancel_scope.cancel()
    assert out.pending == [] and row[0] == "succeeded" and json.loads(row[1])["stdout"] == "ok"
    assert outside.pending  # not the rule's: it asks
    toml = tmp_path / "agentdeck.toml"
    toml.write_text('[[rules]]\ntool = "read_file"\neffect = "allow"\nnetwork = true\n')
    with pytest.raises(ConfigError, match="network = true is for an allow rule of shell"):
        load_config(toml)
