"""Managing rules (issue 15): list with uses, add, revoke; in the owner's process, over its
API (the remote client and raw HTTP, errors as problem documents), and from the command
line on a free room and through an owner. A rule of agentdeck.toml refuses a revoke."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.api.client import Conflict, Invalid, NotFound
from engine.api.local import LocalClient
from engine.api.remote import RemoteClient
from engine.api.rule_models import NewRule
from engine.api.sockets import connect_path
from engine.cli import main
from engine.domain.decisions import Decision
from engine.loops.server import serve_api
from engine.providers.offline import OfflineModel
from engine.room import Room
from engine.runtime import Runtime
from tests.helpers import msg, room_rows
from tests.test_processes import ROOT, agentdeck, reap

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

TOML = '[[rules]]\neffect = "ask"\ntool = "read_file"\npattern = "private/**"\n'


def with_toml(tmp_path: Path) -> Path:
    room = tmp_path / "room"
    room.mkdir()
    (room / "agentdeck.toml").write_text(TOML)
    return room


@asynccontextmanager
async def served(room: Path) -> AsyncIterator[Runtime]:
    async with Runtime.open(room, kind="run", provider=OfflineModel(delay=0)) as rt, serve_api(rt):
        yield rt


async def check_manage(client: Any, rt: Runtime) -> None:
    """List, add, use, revoke and the refusals, as any client sees them."""
    [toml] = await client.rules()
    assert (toml.id, toml.source, toml.effect, toml.uses) == ("toml:1", "toml", "ask", 0)
    added = await client.add_rule(NewRule(effect="allow", tool="shell", pattern="echo *",
                                          reason="harmless"))  # fmt: skip
    assert (added.id, added.source, added.scope, added.made_by) == ("1", "db", "room", "operator")
    assert room_rows(rt.room.path, "SELECT id, pattern, reason FROM rules") == [
        (1, "echo *", "harmless")]  # fmt: skip
    # it applies at once: the call runs unasked, and the use is listed
    out = await rt.run_turn(msg("run `echo hi`", thread="m"))
    assert (out.status, out.calls[0]["status"]) == ("done", "succeeded")
    listed = {r.id: r for r in await client.rules()}
    assert (listed["1"].uses, listed["1"].last_used is not None) == (1, True)
    # refusals
    with pytest.raises(Invalid, match="read_file pattern '/etc/\\*': a path glob"):
        await client.add_rule(NewRule(effect="allow", tool="read_file", pattern="/etc/*"))
    with pytest.raises(Invalid, match="unknown tool 'shel'"):
        await client.add_rule(NewRule(effect="deny", tool="shel", pattern="rm *"))
    with pytest.raises(Invalid, match="a thread rule names its thread"):
        await client.add_rule(NewRule(effect="deny", tool="shell", scope="thread"))
    with pytest.raises(Conflict, match="agentdeck.toml's .*change or remove it there"):
        await client.revoke_rule("toml:1", "operator")
    with pytest.raises(NotFound, match="no rule 7"):
        await client.revoke_rule("7", "operator")
    # revoke: kept in execution.db, marked; it decides nothing from then on
    revoked = await client.revoke_rule("1", "tester")
    assert (revoked.rule.id, revoked.revoked_by) == ("1", "tester")
    assert [r.id for r in await client.rules()] == ["toml:1"]
    assert room_rows(rt.room.path, "SELECT revoked_by FROM rules WHERE id=1") == [("tester",)]
    with pytest.raises(Conflict, match="rule 1 is revoked already \\(by tester\\)"):
        await client.revoke_rule("1", "operator")
    again = await rt.run_turn(msg("run `echo hi`", thread="n"))
    assert again.status == "waiting"
    await rt.decide(Decision.cancel(again.pending[0]["call_id"], "done"))
    # a new rule's id goes past the revoked one's
    assert (await client.add_rule(NewRule(effect="deny", tool="shell", pattern="rm *",
                                          scope="thread", thread_id="m"))).id == "2"  # fmt: skip


async def test_manage_rules_in_the_owners_process(tmp_path: Path):
    room = with_toml(tmp_path)
    async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
        await check_manage(LocalClient(rt), rt)


async def test_manage_rules_over_the_api(tmp_path: Path):
    room = with_toml(tmp_path)
    async with served(room) as rt, RemoteClient(Room.at(room)) as client:
        await check_manage(client, rt)


async def test_rule_errors_are_problem_documents(tmp_path: Path):
    room = with_toml(tmp_path)
    transport = httpx.AsyncHTTPTransport(uds=connect_path(room / "agent.sock"))
    async with served(room), httpx.AsyncClient(transport=transport,
                                               base_url="http://agentdeck") as http:  # fmt: skip
        made = await http.post("/v1/rules", json={"effect": "deny", "tool": "shell",
                                                  "pattern": "rm *"})  # fmt: skip
        assert made.status_code == 201 and made.json()["id"] == "1"
        for method, path, body, status, says in [
            ("POST", "/v1/rules", {"effect": "allow", "tool": "http_get", "pattern": "ftp://x"},
             422, "http_get pattern 'ftp://x'"),
            ("POST", "/v1/rules", {"effect": "maybe", "tool": "shell"}, 422, "effect"),
            ("POST", "/v1/rules/toml:1/revoke", None, 409, "agentdeck.toml"),
            ("POST", "/v1/rules/42/revoke", None, 404, "no rule 42"),
            ("POST", "/v1/rules/1/revoke", {"by": "ops"}, 200, ""),
            ("POST", "/v1/rules/1/revoke", None, 409, "revoked already (by ops)"),
        ]:  # fmt: skip
            answer = await http.request(method, path, json=body)
            assert answer.status_code == status, (path, answer.text)
            if status >= 400:
                assert answer.headers["content-type"] == "application/problem+json"
                assert says in answer.json()["detail"]
        assert (await http.get("/v1/rules")).json()[0]["id"] == "toml:1"


def cli(room: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--room", str(room), "rules", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def check_cli(room: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line's output and exit codes, wherever the room is."""
    code, out, _ = cli(room, capsys, "add", "--effect", "allow", "--tool", "shell",
                       "--pattern", "git status*", "--expires", "2h", "--json")  # fmt: skip
    added = json.loads(out)
    assert code == 0 and added["id"] == "1" and added["pattern"] == "git status*"
    assert 7100 < added["expires_at"] - time.time() <= 7200
    code, out, _ = cli(room, capsys, "add", "--effect", "deny", "--tool", "shell", "--pattern",
                       "rm *", "--scope", "thread", "--thread", "chat:main",
                       "--reason", "no")  # fmt: skip
    assert code == 0 and out == "rule 2 added: deny shell 'rm *' on thread chat:main\n"
    code, out, err = cli(room, capsys, "add", "--effect", "allow", "--tool", "read_file",
                         "--pattern", "../x")  # fmt: skip
    assert (code, out) == (2, "") and "read_file pattern '../x'" in err
    code, _, err = cli(room, capsys, "add", "--effect", "allow", "--tool", "shell",
                       "--expires", "soon")  # fmt: skip
    assert code == 2 and "--expires 'soon': give a duration" in err
    code, out, _ = cli(room, capsys, "list", "--json")
    assert code == 0 and [r["id"] for r in json.loads(out)] == ["toml:1", "1", "2"]
    code, out, _ = cli(room, capsys)  # `list` is the default
    head, toml, one, two = out.splitlines()
    assert head.split()[:6] == ["id", "source", "effect", "tool", "pattern", "scope"]
    assert toml.split()[:5] == ["toml:1", "toml", "ask", "read_file", "private/**"]
    assert "thread chat:main" in two and "never" in two and two.split()[-1] == "active"
    code, _, err = cli(room, capsys, "revoke", "toml:1")
    assert code == 1 and "agentdeck.toml" in err
    code, _, err = cli(room, capsys, "revoke", "9")
    assert code == 2 and "no rule 9" in err
    code, out, _ = cli(room, capsys, "revoke", "1", "--json")
    assert code == 0 and json.loads(out)["rule"]["id"] == "1"
    code, _, err = cli(room, capsys, "revoke", "1")
    assert code == 1 and "revoked already" in err
    code, out, _ = cli(room, capsys, "--json")
    assert [r["id"] for r in json.loads(out)] == ["toml:1", "2"]


def test_the_rules_command_on_a_free_room(tmp_path: Path, capsys) -> None:
    room = with_toml(tmp_path)
    check_cli(room, capsys)
    runs = room_rows(room, "SELECT count(*) FROM runs WHERE kind='rules'")
    # each command that writes opened the room for itself; a listing opens no run
    assert runs == [(7,)]


async def test_the_rules_command_goes_through_the_owner(tmp_path: Path, capsys) -> None:
    room = with_toml(tmp_path)
    async with served(room) as rt:
        await anyio.to_thread.run_sync(check_cli, room, capsys)
        assert [r.id for r in rt.rules.listed()] == ["toml:1", "2"]  # the owner's own book
    assert room_rows(room, "SELECT kind FROM runs") == [("run",)]  # nothing opened the room


def test_the_rules_command_through_an_owner_process(tmp_path: Path) -> None:
    room = with_toml(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "--room", str(room), "run"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("agentdeck run ")
        out = agentdeck(room, "rules", "add", "--effect", "allow", "--tool", "shell",
                        "--pattern", "echo *", "--json")  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["id"] == "1"
        ran = agentdeck(room, "invoke", "--json", "run `echo ok`")  # the owner applies it
        assert ran.returncode == 0 and json.loads(ran.stdout)["calls"][0]["status"] == "succeeded"
        listed = json.loads(agentdeck(room, "rules", "list", "--json").stdout)
        assert [(r["id"], r["uses"]) for r in listed] == [("toml:1", 0), ("1", 1)]
        refused = agentdeck(room, "rules", "revoke", "toml:1")
        assert refused.returncode == 1 and "agentdeck.toml" in refused.stderr
        bad = agentdeck(room, "rules", "add", "--effect", "deny", "--tool", "list_dir",
                        "--pattern", "/abs")  # fmt: skip
        assert bad.returncode == 2 and "list_dir pattern '/abs'" in bad.stderr
        assert agentdeck(room, "rules", "revoke", "1").returncode == 0
        assert agentdeck(room, "rules", "revoke", "1").returncode == 1
        assert agentdeck(room, "rules", "revoke", "5").returncode == 2
    finally:
        reap(proc)
    assert room_rows(room, "SELECT kind FROM runs") == [("run",)]  # every command went through it
    assert room_rows(room, "SELECT id, revoked_by FROM rules") == [(1, "operator")]
