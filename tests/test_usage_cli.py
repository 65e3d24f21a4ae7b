"""`agentdeck usage` and `agentdeck budget` (issue 33): what turns spent, read without
opening a run; budgets set, raised and cleared, and bad input refused with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from tests.helpers import room_rows

pytestmark = pytest.mark.usefixtures("store_backend")

PRICED = "[model]\nprice = { input = 1.0, output = 2.0 }  # dollars per million tokens\n"


def a_room_with_turns(room: Path, toml: str = "") -> None:
    room.mkdir(parents=True, exist_ok=True)
    (room / "agentdeck.toml").write_text(toml)
    for thread in ("a", "a", "b"):
        assert main(["--room", str(room), "invoke", "--thread", thread, "hello there"]) == 0


def test_usage_reads_totals_per_thread_without_opening_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    a_room_with_turns(room, PRICED)
    runs = room_rows(room, "SELECT count(*) FROM runs")
    capsys.readouterr()
    assert main(["--room", str(room), "usage", "--by", "thread", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["key"]: r for r in report["rows"]}
    assert sorted(rows) == ["a", "b"] and rows["a"]["steps"] == 2 * rows["b"]["steps"]
    total = report["total"]
    assert total["input_tokens"] == sum(r["input_tokens"] for r in rows.values()) > 0
    expected = (total["input_tokens"] * 1.0 + total["output_tokens"] * 2.0) / 1e6
    assert total["cost"] == pytest.approx(expected) and total["unpriced"] == 0
    assert room_rows(room, "SELECT count(*) FROM runs") == runs  # read, not run
    assert main(["--room", str(room), "usage", "--by", "thread"]) == 0
    out = capsys.readouterr().out
    assert "(UTC): $0.0003 · 172 tokens (3 inferences)" in out and "\n  b  <$0.0001 · " in out


def test_the_offline_model_is_free_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    a_room_with_turns(room)
    capsys.readouterr()
    assert main(["--room", str(room), "usage", "--json"]) == 0
    total = json.loads(capsys.readouterr().out)["total"]
    assert total["input_tokens"] > 0 and (total["cost"], total["unpriced"]) == (0.0, 0)


def test_a_budget_is_set_listed_and_cleared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    room = tmp_path / "room"
    a_room_with_turns(room, PRICED + "[budget]\nturn = { tokens = 50000 }\n")
    capsys.readouterr()
    assert main(["--room", str(room), "budget", "group:task", "--cost", "2.5", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert [(b["scope"], b["cost"], b["source"], b["set_by"]) for b in view["budgets"]] == [
        ("group:task", 2.5, "set", "cli")
    ]
    assert main(["--room", str(room), "budget", "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert [(b["scope"], b["source"]) for b in view["budgets"]] == [
        ("group:task", "set"),
        ("turn", "toml"),
    ]
    assert main(["--room", str(room), "budget", "turn", "--none"]) == 0  # none, over the toml's
    assert main(["--room", str(room), "budget", "group:task", "--clear"]) == 0
    capsys.readouterr()
    assert main(["--room", str(room), "budget"]) == 0
    captured = capsys.readouterr()
    assert "today (" in captured.out and "no budgets" in captured.err


@pytest.mark.parametrize("args", [
    ["budget", "day", "--cost", "1"], ["budget", "--cost", "1"],
    ["budget", "room", "--tokens", "-5"], ["budget", "room", "--none", "--cost", "1"],
    ["budget", "room", "--cost", "nan"], ["usage", "--since", "yesterday"],
    ["usage", "--days", "0"], ["usage", "--days", "2", "--since", "2026-01-01"],
])  # fmt: skip
def test_bad_input_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    assert main(["--room", str(tmp_path / "room"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentdeck: ") and "Traceback" not in err


def test_a_budget_for_a_group_the_room_lacks_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--room", str(tmp_path / "room"), "budget", "group:nosuch", "--cost", "1"])
    assert code != 0
    assert "no thread group 'nosuch'" in capsys.readouterr().err
