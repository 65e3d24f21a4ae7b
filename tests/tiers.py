"""The suite's tiers, as pytest markers (registered in pyproject.toml):

- `engine`: the runtime's tests (everything outside tests/console);
- `console`: the Textual app driven by Pilot, and its snapshots (tests/console);
- `process`: tests that start agentdeck or Python processes (the CLI, a runtime, workers, a
  console on a pseudo-terminal): the modules in PROCESS below;
- `postgres`: tests whose rooms or checks use the throwaway PostgreSQL server;
- `soak`: the crash soak's CI share;
- `fuzz`: hypothesis over malformed input (tests/fuzz).

The fast tier is the runtime in this process on SQLite:
`pytest -n 2 -m "not (console or process or postgres or soak or fuzz)"`.

Markers are given at collection from where a test lives and what it uses, so a new test
lands in its tier by itself. A test that starts a Python process from a module not in
PROCESS fails, naming this table: the fast tier stays free of them.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parent

# Modules whose tests start agentdeck or Python processes (relative to tests/), or single
# tests of a module that otherwise runs in this process ("module::test", parameters apart).
PROCESS = frozenset({
    "test_mcp.py",
    "console/test_attached.py", "console/test_console_process.py", "console/test_machine_processes.py", "console/test_tmux.py", "test_public_face.py",
    "console/test_history_screen.py", "console/test_cluster_live.py",
    "console/test_cluster_scheduler.py", "console/test_review_screen.py",
    "console/test_rules_screen.py", "console/test_tools_screen.py", "test_api.py", "test_channel_crash.py",
    "test_channels_cli.py", "test_cli_imports.py", "test_cli_input.py", "test_cluster_processes.py",
    "test_cluster_races.py", "test_crash.py", "test_crash_found.py", "test_history_cli.py",
    "test_import_hygiene.py", "test_breakpoints_crash.py", "test_inbox_cli.py",
    "test_breakpoints_cli.py::test_a_pause_through_the_owner_as_an_operator_sees_it", "test_kept_rooms.py", "test_process_groups.py",
    "test_processes.py", "test_pulse_crash.py", "test_readme.py", "test_review.py", "test_review_cli.py",
    "test_rules_manage.py", "test_soak.py", "test_stale_decisions.py",
    "test_pulse.py::test_agentdeck_run_stops_cleanly_on_sigterm",
    "test_store_and_config.py::test_owner_in_another_process_is_named",
    "test_store_and_config.py::test_removing_the_owner_file_takes_nothing_from_the_owner",
})  # fmt: skip
SOAK = frozenset({"test_soak.py"})
TIERS = ("engine", "console", "process", "postgres", "soak", "fuzz")


def where(item: pytest.Item) -> str:
    return Path(str(item.path)).resolve().relative_to(TESTS).as_posix()


def mark(items: list[pytest.Item]) -> None:
    """Give each collected test its tier markers."""
    for item in items:
        path = where(item)
        tiers = {"console" if path.startswith("console/") else "engine"}
        if path.startswith("fuzz/"):
            tiers.add("fuzz")
        if path in PROCESS or f"{path}::{item.originalname}" in PROCESS:  # type: ignore[attr-defined]
            tiers.add("process")
        if path in SOAK:
            tiers.add("soak")
        params = getattr(item, "callspec", None)
        on_pg = params is not None and "postgresql" in params.params.values()
        if on_pg or "pg_cluster" in getattr(item, "fixturenames", ()):
            tiers.add("postgres")
        for tier in sorted(tiers):
            item.add_marker(tier)


def _starts_python(args: Any) -> bool:
    """Whether `args` start a Python process. The shell sandbox's launcher does not count:
    every shell command starts through it (engine/shell/sandbox_exec.py, run isolated,
    -I -S, in a few milliseconds); it is the product's, not a test's Python."""
    listed = [] if isinstance(args, str | bytes | os.PathLike) else list(args)
    first = args if not listed and args else (listed or [""])[0]
    name = os.path.basename(os.fsdecode(first)).split()[0] if first else ""
    if len(listed) > 3 and os.fsdecode(listed[3]).endswith("sandbox_exec.py"):
        return False
    return name.startswith("python") or name == "agentdeck"


@pytest.fixture(autouse=True)
def _processes_are_tiered(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that starts a Python process outside the `process` tier."""
    if request.node.get_closest_marker("process") is not None:
        yield
        return
    started: list[str] = []
    real = subprocess.Popen.__init__

    def recording(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
        if _starts_python(args):
            started.append(repr(args)[:200])
        real(self, args, *a, **kw)

    subprocess.Popen.__init__ = recording  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = real  # type: ignore[method-assign]
    if started:
        pytest.fail(f"{where(request.node)} starts Python processes ({started[0]}): add it to"
                    " PROCESS in tests/tiers.py (the fast tier must not)", pytrace=False)  # fmt: skip
