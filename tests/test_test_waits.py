"""The suite waits on state, never on time: one polling helper (tests/wait.py), and every
other sleep in a test is the behaviour under test, with a comment on its line saying so."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
HELPER = TESTS / "wait.py"
# Names a file's own polling helper takes; tests/wait.py's `until` is the one.
POLLER_NAMES = ("until", "eventually", "wait_for", "wait_until", "poll_until", "settle")


def sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py")
                  if p != HELPER and "bench" not in p.relative_to(TESTS).parts)  # fmt: skip


def timed_sleeps(path: Path) -> list[str]:
    """`sleep(x)` and `pause(x)` calls with a delay other than 0 and no comment on their
    line: waiting by time."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
        if name not in ("sleep", "pause"):
            continue
        delay = node.args[0]
        if isinstance(delay, ast.Constant) and delay.value == 0:
            continue  # a yield to the event loop, not a wait
        if "#" not in lines[node.lineno - 1]:
            found.append(
                f"{path.relative_to(TESTS.parent)}:{node.lineno}: {lines[node.lineno - 1].strip()}"
            )
    return found


def own_pollers(path: Path) -> list[str]:
    """Functions named as a poller that loop (a thin wrapper of tests/wait.py's does not)."""
    tree = ast.parse(path.read_text())
    return [f"{path.relative_to(TESTS.parent)}:{node.lineno}: def {node.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.lstrip("_").startswith(POLLER_NAMES)
            and any(isinstance(n, ast.While | ast.For | ast.AsyncFor) for n in ast.walk(node))]  # fmt: skip


def test_no_test_waits_by_time() -> None:
    found = [line for path in sources() for line in timed_sleeps(path)]
    assert not found, ("wait on state with tests/wait.py's until; a sleep that is the behaviour"
                       " under test says so in a comment on its line:\n" + "\n".join(found))  # fmt: skip


def test_no_test_file_defines_its_own_polling_helper() -> None:
    found = [line for path in sources() for line in own_pollers(path)]
    assert not found, "use tests/wait.py's until:\n" + "\n".join(found)
