"""Rule evaluation (engine/domain/rules.py), with no runtime: patterns per tool, the order deny >
ask > allow, specificity, chained shell commands never matching by accident, expiry,
scopes (once included) and the narrowest pattern a remembered decision gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest

from engine.domain.decisions import Decision
from engine.domain.rules import Rule, RuleBook, RuleError, check_pattern, narrowest, simple_command


def rule(effect: str = "allow", pattern: str | None = None, tool: str = "shell",
         **kw: Any) -> Rule:  # fmt: skip
    return Rule(tool=tool, effect=effect, pattern=pattern, **kw)  # type: ignore[arg-type]


def sh(command: str) -> dict[str, Any]:
    return {"command": command}


def book(*rules: Rule, workspace: Path | None = None) -> RuleBook:
    numbered = [r if r.id else r.model_copy(update={"id": str(n)}) for n, r in enumerate(rules, 1)]
    return RuleBook(numbered, workspace=workspace)


def clock(now: float = 100.0) -> Any:
    return lambda: now


# --- shell ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, command, hit",
    [
        ("git status", "git status", True),
        ("git status", "git status -s", False),  # an exact pattern is that command only
        ("git status*", "git status -s", True),
        ("git status*", "git status", True),
        ("git status*", "git push", False),
        ("pytest *", "pytest tests/test_rules.py -q", True),
        ("pytest *", "pytest", False),
        ("*", "anything at all", True),
        ("ls [*].py", "ls *.py", True),  # an escaped wildcard is itself
        ("ls [*].py", "ls a.py", False),
    ],
)
def test_shell_patterns_are_globs_on_the_whole_command(pattern, command, hit) -> None:
    assert rule(pattern=pattern).matches(sh(command)) is hit


@pytest.mark.parametrize(
    "command",
    [
        "git status; rm -rf ~",
        "git status && rm -rf ~",
        "git status || rm -rf ~",
        "git status | sh",
        "git status & rm -rf ~",
        "git status `rm -rf ~`",
        "git status $(rm -rf ~)",
        "git status\nrm -rf ~",
        "git status > ~/.bashrc",
        "git status < /etc/passwd",
        "git status 'unclosed",
        "git status ';'",  # quoted or not: the rule covers what it says, nothing more
    ],
)
def test_a_chained_or_substituted_command_never_matches_an_allow_prefix(command) -> None:
    assert not simple_command(command)
    assert not rule("allow", "git status*").matches(sh(command))
    assert not rule("allow", "*").matches(sh(command))
    assert rule("allow", None).matches(sh(command))  # no pattern: any arguments, said so


@pytest.mark.parametrize("command", ["ls; rm -rf ~", "echo $(rm -rf ~)", "ls && rm -rf /tmp/x"])
def test_deny_and_ask_rules_match_each_piece_of_a_chain(command) -> None:
    assert rule("deny", "rm -rf *").matches(sh(command))
    assert rule("ask", "rm *").matches(sh(command))
    assert not rule("deny", "git *").matches(sh(command))


def test_a_shell_rule_needs_a_command() -> None:
    assert not rule(pattern="*").matches({"timeout": 3})
    assert not rule(pattern="*").matches("not an object")


# --- files, URLs, other tools ---------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, path, hit",
    [
        ("notes/a.md", "notes/a.md", True),
        ("notes/a.md", "./notes/../notes/a.md", True),  # normalized first
        ("notes/*.md", "notes/a.md", True),
        ("notes/*.md", "notes/deep/a.md", False),  # * stays within a folder
        ("notes/**", "notes/deep/a.md", True),
        ("**/*.md", "a.md", True),
        ("**/*.md", "x/y/a.md", True),
        ("notes/*", "../notes/a.md", False),  # out of the workspace: nothing matches
        ("*", "../secret", False),
        (".", ".", True),
    ],
)
def test_file_patterns_are_path_globs_in_the_workspace(pattern, path, hit) -> None:
    for tool in ("read_file", "write_file", "list_dir"):
        assert rule(pattern=pattern, tool=tool).matches({"path": path}) is hit


def test_an_absolute_path_inside_the_workspace_matches_as_a_relative_one(tmp_path) -> None:
    r = rule("deny", "secret/*", tool="read_file")
    inside = str(tmp_path / "secret" / "key")
    assert book(r, workspace=tmp_path).decide("read_file", {"path": inside}, "t", clock())
    assert not r.matches({"path": "/elsewhere/secret/key"}, tmp_path)
    assert rule(pattern=".", tool="list_dir").matches({})  # list_dir's default path


@pytest.mark.parametrize(
    "pattern, url, hit",
    [
        ("https://api.github.com/repos/a/b", "https://api.github.com/repos/a/b", True),
        ("https://api.github.com/repos/a/b", "https://api.github.com/repos/a/b/issues", False),
        ("https://api.github.com/*", "https://api.github.com/repos/a/b", True),
        ("https://api.github.com/*", "HTTPS://API.GITHUB.COM/repos", True),  # scheme, host
        ("https://api.github.com/*", "https://api.github.com.evil.org/", False),
        ("https://api.github.com/*", "http://api.github.com/", False),
        # the path as the server reads it: no escape from the prefix by dot segments
        ("http://host/public/*", "http://host/public/../admin/secret", False),
        ("http://host/public/*", "http://host/public/%2e%2e/admin", False),
        ("http://host/public/*", "http://host/public%2F..%2Fadmin", False),
        ("http://host/public/*", "http://host/public/a/../b", True),
        ("http://host/public/*", "http://host/publicity", False),
    ],
)
def test_http_get_patterns_are_urls_or_prefixes(pattern, url, hit) -> None:
    assert rule(pattern=pattern, tool="http_get").matches({"url": url}) is hit


def test_other_tools_match_exact_arguments_or_any() -> None:
    exact = rule(pattern='{"expression": "2**10"}', tool="calc")
    assert exact.matches({"expression": "2**10"})
    assert not exact.matches({"expression": "2**11"})
    assert rule(tool="calc").matches({"expression": "anything"})


@pytest.mark.parametrize(
    "tool, pattern",
    [
        ("read_file", "/etc/*"),
        ("write_file", "../outside/*"),
        ("http_get", "api.github.com/*"),
        ("http_get", "https://"),
        ("calc", "2**10"),
        ("calc", "[1, 2]"),
        ("shell", ""),
        ("shell", "a\x00b"),
    ],
)
def test_unusable_patterns_are_refused(tool, pattern) -> None:
    with pytest.raises(RuleError):
        check_pattern(tool, pattern)
    with pytest.raises(pydantic.ValidationError):
        rule(pattern=pattern, tool=tool)


def test_scopes_name_their_thread() -> None:
    with pytest.raises(pydantic.ValidationError, match="names its thread"):
        rule(scope="thread")
    with pytest.raises(pydantic.ValidationError, match="names no thread"):
        rule(scope="room", thread_id="t1")


# --- evaluation -----------------------------------------------------------------------------


def test_deny_then_ask_then_allow_whatever_the_specificity() -> None:
    allow = rule("allow", "git push origin main")  # the most specific of the three
    ask = rule("ask", "git push*")
    deny = rule("deny", "git *")
    call = sh("git push origin main")
    assert book(allow, ask, deny).decide("shell", call, "t", clock()).effect == "deny"
    assert book(allow, ask).decide("shell", call, "t", clock()).effect == "ask"
    assert book(allow).decide("shell", call, "t", clock()).effect == "allow"
    assert book(allow, ask, deny).decide("shell", sh("ls"), "t", clock()) is None


def test_most_specific_first_within_an_effect() -> None:
    anyargs = rule("allow", None, id="1")
    glob = rule("allow", "git *", id="2")
    longer = rule("allow", "git status*", id="3")
    exact = rule("allow", "git status -s", id="4")
    room_exact = rule("allow", "git status -s", id="5", made_at=9.0)
    thread_exact = rule("allow", "git status -s", id="6", scope="thread", thread_id="t")
    call = sh("git status -s")
    assert book(anyargs, glob).decide("shell", call, "t", clock()).id == "2"
    assert book(longer, glob, anyargs).decide("shell", call, "t", clock()).id == "3"
    assert book(glob, exact, longer).decide("shell", call, "t", clock()).id == "4"
    assert book(exact, room_exact).decide("shell", call, "t", clock()).id == "5"  # newer
    assert book(thread_exact, room_exact).decide("shell", call, "t", clock()).id == "6"


def test_thread_rules_reach_their_thread_only() -> None:
    rules = book(rule("allow", "ls", scope="thread", thread_id="a"))
    assert rules.decide("shell", sh("ls"), "a", clock()) is not None
    assert rules.decide("shell", sh("ls"), "b", clock()) is None
    assert rules.decide("calc", {"expression": "1"}, "a", clock()) is None


def test_expired_rules_decide_nothing() -> None:
    rules = book(rule("allow", "ls", expires_at=100.0))
    assert rules.decide("shell", sh("ls"), "t", clock(99.9)) is not None
    assert rules.decide("shell", sh("ls"), "t", clock(100.0)) is None
    assert rules.listed()[0].state(100.0) == "expired"


def test_an_expired_deny_leaves_the_allow_to_decide() -> None:
    rules = book(rule("deny", "ls", expires_at=50.0), rule("allow", "ls"))
    assert rules.decide("shell", sh("ls"), "t", clock(60.0)).effect == "allow"


def test_a_once_rule_decides_one_call_then_is_spent() -> None:
    rules = book(rule("allow", "make deploy", scope="once"), rule("ask", "make *"))
    assert rules.decide("shell", sh("make deploy"), "t", clock()).effect == "ask"  # ask first
    rules = book(rule("allow", "make deploy", scope="once"), rule("allow", "make *", id="9"))
    first = rules.decide("shell", sh("make deploy"), "t", clock(5.0))
    assert (first.id, first.uses, first.last_used) == ("1", 1, 5.0)
    assert rules.decide("shell", sh("make deploy"), "t", clock()).id == "9"
    assert rules.get("1").state(0) == "spent"


def test_uses_are_counted_and_the_clock_read_only_when_a_rule_may_decide() -> None:
    reads: list[int] = []

    def counting() -> float:
        reads.append(1)
        return 7.0

    rules = book(rule("allow", "ls"))
    assert rules.decide("shell", sh("pwd"), "t", counting) is None
    assert rules.decide("calc", {}, "t", counting) is None
    assert reads == []
    rules.decide("shell", sh("ls"), "t", counting)
    used = rules.decide("shell", sh("ls"), "t", counting)
    assert (used.uses, used.last_used, len(reads)) == (2, 7.0, 2)
    assert rules.listed()[0].uses == 2


# --- remembered decisions -------------------------------------------------------------------


@pytest.mark.parametrize(
    "tool, args, pattern",
    [
        ("shell", sh("  touch marker "), "touch marker"),
        ("shell", sh("ls *.py"), "ls [*].py"),
        ("read_file", {"path": "./notes/a.md"}, "notes/a.md"),
        ("list_dir", {}, "."),
        ("http_get", {"url": "https://Example.com/a?b=1"}, "https://example.com/a?b=1"),
        ("calc", {"expression": "2**10"}, '{"expression": "2**10"}'),
    ],
)
def test_the_narrowest_pattern_matches_the_call_and_is_valid(tool, args, pattern) -> None:
    assert narrowest(tool, args) == pattern
    check_pattern(tool, pattern)
    assert rule(pattern=pattern, tool=tool).matches(args)


def test_a_remembered_decision_makes_a_rule_for_its_call_only() -> None:
    rules = book(rule("allow", "pwd", id="4"))
    made = rules.remembered(
        Decision.approve("c1", remember="thread"), "shell", sh("touch marker"), "t", 3.0,
        rules.new_id(),
    )  # fmt: skip
    assert (made.id, made.effect, made.pattern, made.scope, made.thread_id) == (
        "5", "allow", "touch marker", "thread", "t")  # fmt: skip
    assert rules.decide("shell", sh("touch marker"), "t", clock()).id == "5"
    assert rules.decide("shell", sh("touch other"), "t", clock()) is None
    denied = rules.remembered(
        Decision.cancel("c2", remember="room", pattern="rm *"), "shell", sh("rm x"), "t", 4.0,
        rules.new_id(),
    )  # fmt: skip
    assert (denied.effect, denied.pattern, denied.thread_id) == ("deny", "rm *", None)
    bad = rules.remembered(
        Decision.approve("c3", remember="once", pattern="/etc/*"), "read_file", {"path": "a"},
        "t", 5.0, rules.new_id(),
    )  # fmt: skip
    assert (bad.pattern, bad.scope, bad.thread_id) == ("a", "once", "t")  # refused: narrowest
