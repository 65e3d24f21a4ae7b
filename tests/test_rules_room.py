"""Rules in a running room: a remembered approval allows that call's arguments only (the
issue's `touch marker` now asks), agentdeck.toml's `[[rules]]` (and a malformed one), the
rule recorded with the call it decided, uses that survive a restart, and scopes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import ConfigError, load_config
from engine.domain.decisions import Decision
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from engine.tools.builtin import builtin_tools
from tests.helpers import msg, room_rows, rows, runtime

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


def offline(tmp_path: Path, **kw):
    """A room on the offline model with the built-in tools."""
    return runtime(tmp_path, OfflineModel(), builtin_tools(), **kw)


def toml(tmp_path: Path, text: str) -> None:
    room = tmp_path / "room"
    room.mkdir(exist_ok=True)
    (room / "agentdeck.toml").write_text(text)


async def test_a_remembered_shell_approval_allows_that_exact_command_only(tmp_path):
    async with offline(tmp_path) as rt:
        out = await rt.run_turn(msg("run `echo hi`", thread="a"))
        [call] = out.pending
        await rt.decide(Decision.approve(call["call_id"], remember="thread"))
        await rt.wait_turn(out.turn_id)
        [made] = rt.rules.listed()
        assert (made.effect, made.pattern, made.scope, made.thread_id) == (
            "allow", "echo hi", "thread", "a")  # fmt: skip
        again = await rt.run_turn(msg("run `echo hi`", thread="a"))
        assert (again.status, again.calls[0]["status"]) == ("done", "succeeded")
        other = await rt.run_turn(msg("run `touch marker`", thread="a"))
        assert other.status == "waiting"  # the case: it ran unasked before
        assert not (rt.room.workspace / "marker").exists()
        chained = await rt.run_turn(msg("run `echo hi; touch marker`", thread="b"))
        assert chained.status == "waiting"
        # the rule that decided is recorded with the call, and counted
        assert await rows(rt, "SELECT call_id, rule, effect FROM rule_calls") == [
            (again.calls[0]["call_id"], "db:1", "allow")]  # fmt: skip
        assert rt.rules.get("1").uses == 1


async def test_a_remembered_cancel_denies_that_command_room_wide(tmp_path):
    async with offline(tmp_path) as rt:
        out = await rt.run_turn(msg("run `rm -rf notes`", thread="a"))
        await rt.decide(Decision.cancel(out.pending[0]["call_id"], "no", remember="room"))
        await rt.wait_turn(out.turn_id)
        again = await rt.run_turn(msg("run `rm -rf notes`", thread="b"))
        assert again.calls[0]["status"] == "failed"
        assert "denied by a remembered room rule 1 (shell: rm -rf notes)" in again.text


async def test_an_edited_pattern_is_what_is_remembered(tmp_path):
    async with offline(tmp_path) as rt:
        out = await rt.run_turn(msg("run `echo one`"))
        decision = Decision.approve(out.pending[0]["call_id"], remember="room", pattern="echo *")
        await rt.decide(decision)
        await rt.wait_turn(out.turn_id)
        assert (await rt.run_turn(msg("run `echo two`", thread="x"))).status == "done"
        assert (await rt.run_turn(msg("run `ls`", thread="x"))).status == "waiting"
        assert await rows(rt, "SELECT pattern, remember FROM decisions") == [("echo *", "room")]


async def test_a_once_rule_is_spent_by_one_call_even_after_a_restart(tmp_path):
    async with offline(tmp_path) as rt:
        out = await rt.run_turn(msg("run `echo hi`"))
        await rt.decide(Decision.approve(out.pending[0]["call_id"], remember="once"))
        await rt.wait_turn(out.turn_id)
    async with offline(tmp_path, first_id=100) as rt:
        assert rt.rules.get("1").uses == 0
        first = await rt.run_turn(msg("run `echo hi`"))
        assert first.status == "done"
    async with offline(tmp_path, first_id=200) as rt:
        assert rt.rules.get("1").state(0) == "spent"
        second = await rt.run_turn(msg("run `echo hi`"))
        assert second.status == "waiting"


async def test_toml_rules_allow_ask_and_deny(tmp_path):
    toml(tmp_path, """
[[rules]]
effect = "allow"
tool = "shell"
pattern = "echo *"

[[rules]]
effect = "deny"
tool = "shell"
pattern = "echo secret*"
reason = "never print it"

[[rules]]
effect = "ask"
tool = "read_file"
pattern = "private/**"
""")  # fmt: skip
    (tmp_path / "room" / "workspace" / "private").mkdir(parents=True)
    (tmp_path / "room" / "workspace" / "private" / "k.txt").write_text("k")
    async with offline(tmp_path) as rt:
        assert [r.id for r in rt.rules.listed()] == ["toml:1", "toml:2", "toml:3"]
        allowed = await rt.run_turn(msg("run `echo hi`"))
        assert (allowed.status, allowed.calls[0]["status"]) == ("done", "succeeded")
        denied = await rt.run_turn(msg("run `echo secret stuff`"))
        assert "denied by agentdeck.toml's room rule toml:2" in denied.text
        asked = await rt.run_turn(msg("read private/k.txt"))
        assert asked.status == "waiting"  # read_file runs unasked, but this rule asks
        [pending] = await rt.pending()
        assert "agentdeck.toml's room rule toml:3 (read_file: private/**) asks" in pending.reason
        uses = await rows(rt, "SELECT rule, effect FROM rule_calls ORDER BY at")
        assert [effect for _, effect in uses] == ["allow", "deny", "ask"]
        assert all(key.startswith("toml:") for key, _ in uses)
    async with offline(tmp_path, first_id=100) as rt:  # counted under the rule's content
        assert [r.uses for r in rt.rules.listed()] == [1, 1, 1]


@pytest.mark.one_store("no store: the config alone")
@pytest.mark.parametrize(
    "text, error",
    [
        ('[[rules]]\neffect = "allow"\ntool = "shell"\npattern = ""\n',
         "[rules.1] a pattern is 1 to 4096 characters"),
        ('[[rules]]\neffect = "permit"\ntool = "shell"\n', "[rules.1.effect] Input should be"),
        ('[[rules]]\neffect = "allow"\ntool = "read_file"\npattern = "/etc/*"\n',
         "[rules.1] read_file pattern '/etc/*': a path glob inside the workspace"),
        ('[[rules]]\neffect = "allow"\ntool = "shell"\nscope = "thread"\n',
         "[rules.1] a thread rule names its thread"),
        ('[[rules]]\neffect = "deny"\ntool = "shel"\npattern = "rm *"\n',
         "(globs are for shell, the file tools and http_get)"),
        ('[[rules]]\neffect = "allow"\ntool = "shell"\n\n[[rules]]\neffect = "deny"\n'
         'tool = "shell"\npatern = "rm *"\n', "[rules.2.patern] Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_a_malformed_toml_rule_is_a_clear_one_line_error(tmp_path, text, error) -> None:
    (tmp_path / "agentdeck.toml").write_text(text)
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path / "agentdeck.toml")
    assert error in str(raised.value) and "\n" not in str(raised.value)


async def test_a_toml_rule_for_an_unknown_tool_stops_the_start_before_any_write(tmp_path):
    toml(tmp_path, '[[rules]]\neffect = "deny"\ntool = "shel"\n')
    with pytest.raises(ConfigError, match=r"\[rules.1\] unknown tool 'shel' \(tools: "):
        async with Runtime.open(tmp_path / "room", provider=OfflineModel()):
            pass
    assert room_rows(tmp_path / "room", "SELECT count(*) FROM runs") == [(0,)]
