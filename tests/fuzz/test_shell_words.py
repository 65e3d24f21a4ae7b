"""Shell commands: any text is parsed without an exception, and a shell rule of each effect
decides on it without one; nesting past the bounds is opaque, never a RecursionError."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from engine.domain.rules import Rule
from engine.shell.words import parse

SHELLISH = st.text(st.sampled_from(list(" \t\n;&|()<>'\"\\$`{}[]*?=#!-~,.:/acrm0")), max_size=80)
DEEP = 5000


@given(SHELLISH | st.text())
@example("(" * DEEP)
@example("$(" * DEEP)
@example('"$(' * DEEP)
@example("${" * DEEP)
@example("`" * DEEP)
@example("echo `echo \\`echo \\\\\\`rm x\\\\\\`\\``")
@example("find -exec " * DEEP + "rm")
@example("env -S " * DEEP + "rm")
@example("eval " * DEEP + "rm x")
@example("sh -c " * DEEP + "rm")
@example("$'\\U7fffffff\\u\\x\\c'")
def test_any_text_is_parsed_and_decided_without_an_exception(text: str) -> None:
    parsed = parse(text)
    assert isinstance(parsed.ok, bool)
    for effect in ("allow", "ask", "deny"):
        rule = Rule(tool="shell", effect=effect, pattern="rm *")  # type: ignore[arg-type]
        assert rule.matches({"command": text}) in (True, False)
