"""Decisions: any `--args`, `--result` or `--reason` is applied or refused in one line, the
call waiting on and the room intact; any body the API takes is a Decision or refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from pydantic import ValidationError

from engine.domain.decisions import Decision, storable
from tests.fuzz.rooms import ROOMY, cli, integrity, one_line, rows, scratch
from tests.fuzz.values import dumps, json_texts, json_values, texts
from tests.test_cli_input import waiting_call


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A room whose shell call (`ls`, from the offline model) waits; copied per example."""
    room = tmp_path_factory.mktemp("decide") / "room"
    return room, waiting_call(room)


def runs_a_command(text: str) -> bool:
    """Whether `text` approves the shell call with a command of its own (never run here)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and "command" in value


decisions = st.one_of(
    st.tuples(st.just("approve"), st.just("--args"), json_texts),
    st.tuples(st.just("approve"), st.just("--result"), json_texts),
    # argv holds undecodable bytes as lone surrogates ("\udcff"): a reason may too
    st.tuples(
        st.just("cancel"),
        st.just("--reason"),
        texts | st.text() | st.sampled_from(["\udcff", "why\ud800"]),
    ),
    st.tuples(st.just("cancel"), st.sampled_from(["--args", "--result"]), json_texts),
)
remember = st.sampled_from([[], ["--remember", "thread"], ["--remember", "room"]])


@ROOMY
@given(decisions, remember)
@example(("approve", "--args", "[" * 5000 + "]" * 5000), [])
@example(("approve", "--result", '{"n": ' + "9" * 5000 + "}"), [])
@example(("approve", "--args", '{"a": ' + "[" * 900 + "]" * 900 + "}"), [])
@example(("approve", "--args", '{"a": "\\ud800"}'), [])  # found here: the turn ended in error
@example(("approve", "--result", '["\\udc00"]'), [])
def test_decide_is_applied_or_refused_in_one_line(
    template: tuple[Path, str], decision: tuple[str, str, str], remember: list[str]
) -> None:
    action, flag, value = decision
    assume(not (flag == "--args" and runs_a_command(value)))
    source, call_id = template
    with scratch(source) as room:
        db = room / "execution.db"
        code, out, err = cli("--room", str(room), "decide", call_id, action, f"{flag}={value}",
                             *remember, "--json")  # fmt: skip
        assert code in (0, 2, 3), (code, err)
        if code == 2:
            one_line(err)
            assert rows(db, "SELECT status FROM tool_calls WHERE id=?", call_id) == [
                ("suspended",)]  # fmt: skip
            assert rows(db, "SELECT count(*) FROM decisions") == [(0,)]
        else:
            assert err == "" and json.loads(out)["status"] in ("done", "waiting")
            assert rows(db, "SELECT status FROM decisions WHERE call_id=?", call_id) == [
                ("applied",)]  # fmt: skip
        assert integrity(db) == "ok"


def maybe(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


bodies = maybe(
    call_id=texts | json_values, action=st.sampled_from(["resume", "cancel"]) | json_values,
    id=texts | json_values, args=json_values, result=json_values,
    use_result=st.booleans() | json_values, reason=texts | json_values,
    remember=st.sampled_from(["thread", "room"]) | json_values, decided_by=texts | json_values,
) | st.dictionaries(texts, json_values, max_size=3)  # fmt: skip


@given(bodies)
def test_a_decision_body_is_a_decision_or_a_validation_error(body: dict[str, Any]) -> None:
    """As the API takes it: the object FastAPI decoded, and the JSON text itself."""
    for parse, value in ((Decision.model_validate, body),
                         (Decision.model_validate_json, dumps(body))):  # fmt: skip
        try:
            decision = parse(value)
        except ValidationError:
            continue
        storable(decision.args, "args")  # what execution.db will hold
        storable(decision.result, "result")
        storable(decision.reason, "reason")


@given(json_texts)
def test_any_json_text_as_decided_arguments_is_a_decision_or_a_validation_error(
    text: str,
) -> None:
    body = '{"call_id": "c1", "action": "resume", "args": ' + text + "}"
    for raw in (text, body):
        try:
            Decision.model_validate_json(raw)
        except ValidationError:
            pass
