"""`agentdeck inbox` over rooms other processes own (issue 38): two `agentdeck run`, a
call waiting in each; one killed (SIGKILL) shows `owner gone` at once, its call left out,
and `--prune` forgets it; a file in the registry that is not an entry is said, left
alone, and never fails the command; the command loads no server, console or runtime."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.rooms_registry import folder
from tests.console.test_attached import Owner
from tests.wait import PATIENCE, until_sync

ROOT = Path(__file__).resolve().parent.parent
NEVER = ("fastapi", "starlette", "uvicorn", "textual", "rich", "engine.runtime",
         "engine.api.local", "engine.loops", "engine.turn", "engine.providers")  # fmt: skip


def inbox(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine.cli", "inbox", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=PATIENCE)  # fmt: skip


def listed() -> dict[str, Any]:
    done = inbox("--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.fixture
def owners(tmp_path: Path) -> Iterator[dict[str, Owner]]:
    made = {}
    for name in ("alpha", "beta"):
        (tmp_path / name / "tasks").mkdir(parents=True)
        made[name] = Owner(tmp_path / name)
    try:
        yield made
    finally:
        for owner in made.values():
            owner.stop(signal.SIGKILL)


def test_inbox_over_two_owners_one_killed(owners: dict[str, Owner]) -> None:
    pids = {name: owner.start() for name, owner in owners.items()}
    for name, owner in owners.items():
        (owner.room / "tasks" / "t.md").write_text(f"run `echo {name}`\n")
    seen = until_sync(listed, "a call waiting in each room",
                      ok=lambda v: sorted(c["label"] for c in v["calls"]) == ["alpha", "beta"])  # fmt: skip
    assert {r["label"]: (r["owner"], r["pid"], r["kind"]) for r in seen["rooms"]} == {
        n: ("serving", pid, "run") for n, pid in pids.items()}  # fmt: skip
    text = inbox()
    assert text.returncode == 0 and "2 rooms · 2 serving" in text.stdout, text.stdout
    assert "2 waiting, needs input first" in text.stdout

    beta = owners["beta"]
    assert beta.proc is not None
    beta.proc.send_signal(signal.SIGKILL)
    beta.proc.wait(timeout=PATIENCE)
    now = listed()  # at once: the kernel freed its lock as it died
    rooms = {r["label"]: r for r in now["rooms"]}
    assert rooms["beta"]["owner"] == "owner gone" and rooms["beta"]["decisions"] is None
    assert rooms["alpha"]["owner"] == "serving"
    assert [c["label"] for c in now["calls"]] == ["alpha"]
    assert "owner gone" in inbox().stdout

    (folder() / "junk.json").write_text("{")  # bad input loses nothing, fails nothing
    pruned = inbox("--prune")
    assert pruned.returncode == 0
    assert "pruned 1 room whose owner is gone" in pruned.stderr and "junk.json" in pruned.stderr
    assert [r["label"] for r in listed()["rooms"]] == ["alpha"]
    assert (folder() / "junk.json").read_text() == "{"


def test_inbox_loads_no_server_console_or_runtime(owners: dict[str, Owner]) -> None:
    owners["alpha"].start()
    code = ("import json, sys\nfrom engine.cli import main\ncode = main(['inbox'])\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\nsys.exit(code)\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=PATIENCE)  # fmt: skip
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert "1 room · 1 serving" in done.stdout
    assert [m for m in loaded if m.split(".")[0] in NEVER or m in NEVER
            or any(m.startswith(n + ".") for n in NEVER)] == []  # fmt: skip
