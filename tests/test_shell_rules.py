"""Shell rules bound what runs, not how it is spelled (issue 25 item 6): a deny rule beside
an allow `*` holds against quoting, paths, tabs, subshells, wrappers and nested shells; a
wildcard allow never covers a program that runs others (`git -c`, `find -exec`, ...) nor
a command that sets variables or goes through sudo; the exact command still allows."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.domain.rules import Rule, RuleBook, narrowest, simple_command
from engine.shell.words import parse


def rule(effect: str, pattern: str | None) -> Rule:
    return Rule(tool="shell", effect=effect, pattern=pattern)  # type: ignore[arg-type]


def decided(command: str, *rules: Rule) -> str | None:
    """The effect of the rule that decides `command`, or None (the operator is asked)."""
    numbered = [r.model_copy(update={"id": str(n)}) for n, r in enumerate(rules, 1)]
    found = RuleBook(numbered).decide("shell", {"command": command}, "t", lambda: 1.0)
    return None if found is None else found.effect


def deny_rm(command: str) -> str | None:
    return decided(command, rule("deny", "rm *"), rule("allow", "*"))


# --- deny wins over any spelling -----------------------------------------------------------

ISSUE_SPELLINGS = [
    "/bin/rm -rf notes",
    "rm\t-rf notes",
    "(rm -rf notes)",
    "'rm' -rf notes",
    "\\rm -rf notes",
    "r''m -rf notes",
    "command rm -rf notes",
    "env rm -rf notes",
    "nice rm -rf notes",
]
MORE_SPELLINGS = [
    '"rm" -rf notes',
    'r""m -rf notes',
    "$'rm' -rf notes",
    "$'\\x72m' -rf notes",  # ANSI-C quoting, decoded
    "r\\\nm -rf notes",  # a line continuation inside the word
    "./rm -rf notes",
    "A=1 rm -rf notes",
    "A=1 B=2 /usr/bin/rm -rf notes",
    "nice -n 5 rm -rf notes",
    "env -i A=1 rm -rf notes",
    "env -u HOME -- rm -rf notes",
    "env -S 'rm -rf notes'",
    "/usr/bin/env rm -rf notes",
    "command -p rm -rf notes",
    "builtin rm -rf notes",
    "exec rm -rf notes",
    "sudo rm -rf notes",
    "sudo -u root -E rm -rf notes",
    "doas -u root rm -rf notes",
    "xargs rm < list",
    "xargs -0 -n 1 rm",
    "timeout 5 rm -rf notes",
    "timeout -s KILL -k 3 5 rm -rf notes",
    "nohup rm -rf notes",
    "stdbuf -oL rm -rf notes",
    "time -p rm -rf notes",
    "ionice -c 3 rm -rf notes",
    "chrt -b 0 rm -rf notes",
    "setsid -f rm -rf notes",
    "busybox rm -rf notes",
    "sudo env nice -n 2 timeout 5 rm -rf notes",
    "sh -c 'rm -rf notes'",
    'bash -lc "rm -rf notes"',
    "bash -o pipefail -c 'ls | rm -rf notes'",
    "sh -c \"sh -c 'rm -rf notes'\"",
    "eval rm -rf notes",
    "eval 'ls; rm -rf notes'",
    "echo $(rm -rf notes)",
    'echo "$(rm -rf notes)"',
    "echo `rm -rf notes`",
    "echo ${x:-$(rm -rf notes)}",
    "ls; rm -rf notes",
    "ls&&rm -rf notes",
    "ls|rm -rf notes",
    "ls\nrm -rf notes",
    "(cd x && (rm -rf notes))",
    "{ rm -rf notes; }",
    "if true; then rm -rf notes; fi",
    "for f in a; do rm -rf $f; done",
    "! rm -rf notes",
    "find . -exec rm -rf {} +",
    "find . -name x -execdir /bin/rm {} \\;",
    "git -c alias.x='!rm -rf notes' x",
    "{rm,-rf,notes}",  # brace expansion: the program cannot be known
    "$cmd -rf notes",  # a variable: nor here
    "/bin/r? -rf notes",  # a glob: nor here
    "ls; 'rm' -rf notes; echo \"unclosed",  # unparseable, yet its pieces are read
]


@pytest.mark.parametrize("command", ISSUE_SPELLINGS + MORE_SPELLINGS)
def test_a_deny_beside_an_allow_star_holds_against_every_spelling(command: str) -> None:
    assert deny_rm(command) == "deny"
    assert decided(command, rule("ask", "rm *"), rule("allow", "*")) == "ask"


@pytest.mark.parametrize("command", ["ls -la", "git rm notes", "echo rm -rf notes", "grep rm x"])
def test_a_deny_rule_is_about_the_program_not_a_word_anywhere(command: str) -> None:
    assert deny_rm(command) == "allow"


def test_deny_rules_name_wrappers_too() -> None:
    assert decided("sudo -u root ls", rule("deny", "sudo *"), rule("allow", "*")) == "deny"
    assert decided("nice git push", rule("deny", "git push*"), rule("allow", "*")) == "deny"
    assert decided("/usr/bin/git push", rule("deny", "git push*")) == "deny"
    for command in ("rm -rf x", "\\rm -rf x", "sh -c 'rm -rf x'", "/usr/bin/rm -rf x"):
        assert decided(command, rule("deny", "/bin/rm *"), rule("allow", "*")) == "deny"
    assert decided("ls x", rule("deny", "/bin/* *"), rule("allow", "*")) == "allow"


def test_shells_nested_past_the_bound_match_every_deny_rule() -> None:
    command = "rm -rf notes"
    for _ in range(12):
        escaped = "".join("\\" + c if c in '\\"$`' else c for c in command)
        command = f'sh -c "{escaped}"'
    assert deny_rm(command) == "deny"


# --- an allow with a wildcard never covers a program that runs others ----------------------

RUNNERS = [
    ("git *", "git -c alias.x='!touch x' x"),
    ("git *", "git -c core.pager='touch x' log"),
    ("git *", "git --config-env=alias.x=CMD x"),
    ("git *", "git config alias.x '!touch x'"),  # then `git x` would run it
    ("git *", "git x"),  # not one of git's commands: an alias may run anything
    ("git *", "git submodule foreach 'touch x'"),
    ("git *", "git rebase -x 'touch x' HEAD~2"),
    ("git *", "git fetch --upload-pack='touch x' origin"),
    ("git *", "git -C ../other status"),
    ("git *", "git clone --template=./hooks repo x"),  # its hooks run on checkout
    ("git *", "git *"),  # a glob in a runner's words: files named -c, alias.x=!touch, ...
    ("git *", "git $opts status"),
    ("git *", "./git status"),  # another program named git
    ("git *", "PATH=. git status"),  # a variable set for the program
    ("git *", "env git status"),
    ("git *", "sudo git status"),
    ("find *", "find . -exec rm {} ;"),
    ("find *", "find . -exec rm {} \\;"),
    ("find *", "find . -execdir touch x \\;"),
    ("find *", "find . -ok rm {} \\;"),
    ("find *", "find . -name '*.pyc' -delete"),
    ("awk *", "awk 'BEGIN { system(\"touch x\") }'"),
    ("awk *", "gawk '{ print | \"sh\" }' f"),
    ("awk *", "awk -f prog.awk f"),
    ("sed *", "sed -n '1e touch x' f"),
    ("sed *", "sed 's/a/b/w /etc/x' f"),
    ("sed *", "sed -f script.sed f"),
    ("python3 *", "python3 -c 'import os'"),
    ("python *", "python -Sc 'import os'"),
    ("perl *", "perl -ne 'system 1' f"),
    ("ruby *", "ruby -e 'system 1'"),
    ("node *", "node -e 'require(1)'"),
    ("tar *", "tar -xf a.tar --to-command='touch x'"),
    ("tar *", "tar -I 'touch x' -xf a.tar"),
    ("tar *", "tar --checkpoint-action=exec='touch x' -cf a.tar ."),
    ("rsync *", "rsync -avze 'sh -c x' a b:"),
    ("rsync *", "rsync --rsh='sh -c x' a b:"),
    ("ssh *", "ssh host touch x"),
    ("xargs *", "xargs touch"),
    ("env *", "env touch x"),
    ("sudo *", "sudo ls"),
    ("bash *", "bash -c ls"),
    ("bash *", "bash script.sh"),
    ("vim *", "vim -c '!touch x' f"),
    ("make *", "make SHELL=/tmp/x all"),
    ("eval *", "eval ls"),
    ("*", "git -c alias.x='!touch x' x"),
    ("*", "find . -exec touch {} +"),
    ("*", "timeout 5 sh -c 'touch x'"),
]


@pytest.mark.parametrize("pattern, command", RUNNERS)
def test_a_wildcard_allow_never_covers_a_program_that_runs_others(pattern, command) -> None:
    assert decided(command, rule("allow", pattern)) is None  # no rule decides: it asks


@pytest.mark.parametrize("_, command", RUNNERS)
def test_the_exact_command_still_allows_a_runner(_, command) -> None:
    if simple_command(command):
        assert decided(command, rule("allow", narrowest("shell", {"command": command})))
        assert not decided(command + " y", rule("allow", narrowest("shell", {"command": command})))


def test_a_runner_named_exactly_by_its_words_is_allowed() -> None:
    exact = rule("allow", "git -c 'alias.x=!touch x' x")
    assert decided("git -c alias.x='!touch x' x", exact) == "allow"
    assert decided("git -c 'alias.x=!touch x' x", exact) == "allow"
    assert decided("git -c alias.x='!touch y' x", exact) is None
    assert decided("find . -delete", rule("allow", "find . -delete")) == "allow"
    assert decided("find  .\t-delete", rule("allow", "find . -delete")) == "allow"
    assert decided("sudo git status", rule("allow", "git status")) is None


# --- what works today keeps working --------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, command",
    [
        ("git status", "git status"),
        ("git status", "git  status"),  # the words, not the spaces between them
        ("git status", "'git' status"),
        ("git status*", "git status\t-s"),
        ("git *", "git log --oneline"),
        ("git *", "git push -u origin main"),
        ("git *", "nice git diff"),  # a wrapper that runs it as it is: looked through
        ("git *", "timeout 30 git fetch"),
        ("pytest *", "pytest tests/test_rules.py -q"),
        (".venv/bin/pytest *", ".venv/bin/pytest -q"),
        ("ls *", "ls *.py"),  # globs in words of a program that runs nothing else
        ("ls [*].py", "ls *.py"),
        ("sed *", "sed -n 1,5p f"),
        ("awk *", "awk '{ print $1 }' f"),
        ("python3 *", "python3 -m pytest"),
        ("find *", "find . -name '*.py'"),
        ("tar *", "tar -xzf a.tar.gz"),
        ("rsync *", "rsync -avz a b:"),
    ],
)
def test_an_allow_covers_the_command_it_names(pattern, command) -> None:
    assert decided(command, rule("allow", pattern)) == "allow"


@pytest.mark.parametrize(
    "command",
    ["git status; rm -rf notes", "git status > x", "(git status)", "git status $(rm x)",
     "git status 'unclosed", "git status ';'", "echo \"a\nb\"", ""],
)  # fmt: skip
def test_an_allow_never_covers_more_than_one_simple_command(command) -> None:
    assert decided(command, rule("allow", "*")) is None
    assert decided(command, rule("allow", "git status*")) is None


# --- properties ----------------------------------------------------------------------------

RM = ["rm", "'rm'", '"rm"', "\\rm", "r''m", 'r""m', "r\\m", "/bin/rm", "/usr/bin/rm", "./rm",
      "$'rm'", "$'\\x72\\x6d'", "$'\\162m'", "'r'm", "r\\\nm"]  # fmt: skip
WRAPPERS = ["env", "env -i", "env A=1 B=2", "env -u X", "nice", "nice -n 5", "command",
            "command -p", "builtin", "exec", "sudo", "sudo -u root", "doas", "xargs",
            "xargs -0 -n 1", "timeout 5", "timeout -s KILL 5", "nohup", "stdbuf -oL", "time",
            "time -p", "ionice -c 3", "chrt -b 0", "setsid", "busybox", "A=1", "/usr/bin/env",
            "sudo -E"]  # fmt: skip
spaces = st.sampled_from([" ", "\t", "  ", " \t "])


@st.composite
def rm_commands(draw: st.DrawFn) -> str:
    """`rm -rf notes`, its program quoted some way, behind up to four wrappers, maybe in a
    chain, a subshell or `sh -c`."""
    words = [*draw(st.lists(st.sampled_from(WRAPPERS), max_size=4)), draw(st.sampled_from(RM)),
             "-rf", "notes"]  # fmt: skip
    command = "".join(w + draw(spaces) for w in words).strip(" \t")
    shape = draw(st.sampled_from(["{}", "({})", "ls; {}", "{} && ls", "sh -c {q}", "bash -c {q}",
                                  "echo $({})", "ls | {}", "eval {q}"]))  # fmt: skip
    return shape.format(command, q=shlex.quote(command))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(rm_commands())
def test_any_spelling_of_rm_behind_any_wrappers_is_denied(command: str) -> None:
    assert deny_rm(command) == "deny", command


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.text(st.characters(exclude_characters="\x00"), max_size=12), max_size=6))
def test_an_exact_allow_covers_its_command_and_only_that(words: list[Any]) -> None:
    command = shlex.join(["ls", *words])
    exact = rule("allow", narrowest("shell", {"command": command}))
    assert decided(command, exact) == ("allow" if simple_command(command) else None)
    assert decided(shlex.join(["ls", *words, "x"]), exact) is None


# --- the parse itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, words, canonical, plain",
    [
        ("git status", ("git", "status"), "git status", True),
        ("'git'\t\"st\"a''tus", ("git", "status"), "git status", True),
        ("$'\\x67it' log", ("git", "log"), "git log", True),
        ("/usr/bin/git log 2>&1 >/dev/null", ("/usr/bin/git", "log"), "git log", True),
        ("A=1 nice -n 5 git log", ("A=1", "nice", "-n", "5", "git", "log"), "git log", False),
        (
            "sudo -u root env -i X=1 git log",
            ("sudo", "-u", "root", "env", "-i", "X=1", "git", "log"),
            "git log",
            False,
        ),
        (
            "timeout -s KILL 5 git log",
            ("timeout", "-s", "KILL", "5", "git", "log"),
            "git log",
            True,
        ),
        ("xargs -n 1 rm", ("xargs", "-n", "1", "rm"), "rm {}", False),
        ("command -v rm", ("command", "-v", "rm"), "command -v rm", True),  # runs nothing
    ],
)
def test_a_simple_command_is_its_words_and_its_program(command, words, canonical, plain) -> None:
    parsed = parse(command)
    assert parsed.ok and len(parsed.commands) == 1
    (one,) = parsed.commands
    assert (one.words, one.canonical, one.plain) == (words, canonical, plain)


def test_a_command_is_cut_into_its_simple_commands() -> None:
    parsed = parse("a 'b;c' && (d | e) ; f $(g `h`) > out\n i # j ; k")
    assert parsed.ok and parsed.compound and not parsed.single
    assert sorted(c.canonical for c in parsed.commands) == [
        "a b;c", "d", "e", "f $(g `h`)", "g `h`", "h", "i"]  # fmt: skip


@pytest.mark.parametrize("command", ["echo 'a", 'echo "a', "echo $(a", "echo `a", "(a", "a ${b"])
def test_an_unclosed_quote_paren_or_substitution_is_unparseable(command) -> None:
    assert not parse(command).ok
    assert not simple_command(command)


def test_the_strings_of_shells_and_git_aliases_and_find_exec_are_read() -> None:
    parsed = parse("bash -c 'nice rm x; ls' && git -c alias.y='!touch z' y && find -exec cp {} +")
    inner = sorted(c.canonical for c in parsed.commands if c.inner)
    assert inner == ["cp {}", "ls", "rm x", "touch z"]


# --- long commands -------------------------------------------------------------------------


def test_a_command_too_long_to_read_is_never_allowed_and_matches_every_deny() -> None:
    """Reading costs CPU on the event loop: past MAX_READ a command is not read, and what
    it runs is unknown (a 128 KiB command took 5 s to read before the bound)."""
    from engine.shell.words import MAX_READ

    short = "echo " + "a " * 100 + "z"
    huge = "echo " + "a " * MAX_READ + "z"
    assert deny_rm(short) == "allow"
    assert deny_rm(huge) == "deny"  # it may be what the deny rule names
    assert decided(huge, rule("allow", "*")) is None  # asked, never allowed by a glob


def test_a_long_command_is_read_off_the_event_loop_before_it_is_matched() -> None:
    """`prepare` (run on a worker thread by the gate) leaves the command read, so the
    match on the event loop reads nothing."""
    from engine.domain import rules

    command = "echo " + "word " * 400  # past LONG_COMMAND
    assert rules.read_ahead("shell", {"command": command})
    assert not rules.read_ahead("shell", {"command": "ls"})
    rules.prepare("shell", {"command": command})
    before = rules._parse.cache_info()
    RuleBook([rule("allow", "*").model_copy(update={"id": "1"})]).decide(
        "shell", {"command": command}, "t", lambda: 1.0
    )
    after = rules._parse.cache_info()
    assert after.misses == before.misses and after.hits > before.hits
