"""Issue 16, a lean step: the stored JSON of an event is built from its fields where it is
hot (`event_json`), and must be exactly what pydantic writes (`model_dump_json`) for every
kind; a checkpoint's events go in as one multi-row INSERT, in order."""

from __future__ import annotations

import sqlite3
import typing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.domain import events as ev
from engine.domain.events import event_json, parse_event
from engine.store import turns as rows
from engine.store.sqlite import SqliteStore

KINDS = typing.get_args(typing.get_args(ev.Event)[0])

TEXTS = ["", "plain", 'q"uote\\back', "line\nbreak\ttab\r\b\f", "\x00\x01\x1f\x7f", "é ü 中 🙂",
         "\u2028\u2029\x85", "</script>"]  # fmt: skip
FLOATS = [0.0, -0.0, 1.0, 1700000000.01, 3.2e-05, -3.2e-05, 1.5e-05, 1e-05, 9.99e-05, 1e-04,
          1e-06, 1.234567e-07, 5e-324, 1e15, 9.9e15, 1e16, 1.5e16, 1e22, 1.7976931348623157e308,
          float("inf"), float("-inf"), float("nan"), 0.1 + 0.2]  # fmt: skip


def examples() -> list[ev._Event]:
    """Every kind, with every optional field absent and present, tricky text and floats."""
    out: list[ev._Event] = []
    for i, text in enumerate(TEXTS):
        at = FLOATS[i % len(FLOATS)]
        base = {"at": at, "thread_id": text, "turn_id": f"t{i}"}
        out += [
            ev.TurnStarted(**base, origin="chat", sender=text, text=text),
            ev.TurnStarted(**base, origin="chat", sender="op", text=text, group="chat"),
            ev.TurnChanged(**base, status="running"),
            ev.TurnChanged(**base, status="done", reason="error", detail=text, group=text),
            ev.StepStarted(**base, step_id=i, step_kind="inference"),
            ev.StepFinished(
                **base,
                step_id=i,
                step_kind="tool_round",
                status="failed",
                summary=text,
                duration=FLOATS[-i],
                input_tokens=i,
            ),  # fmt: skip
            ev.TextDelta(**base, text=text),
            ev.CallOutput(**base, call_id=text, text=text, skipped=i),
            ev.MessageAppended(**base, role="user", text=text, seq=i),
            ev.CallChanged(**base, call_id=text, tool=text, status="new"),
            ev.CallChanged(
                **base,
                call_id="c",
                tool="t",
                args={"a": [1, 2.5, None, True, text, FLOATS[i]], text: {"n": -3.2e-05}},
                status="succeeded",
                result=text,
                error=text,
            ),  # fmt: skip
            ev.CallChanged(
                **base,
                call_id="c",
                tool="t",
                args=text,
                status="suspended",
                deadline_at=FLOATS[i],
                on_deadline="approve",
            ),  # fmt: skip
            ev.CallChanged(
                **base,
                call_id="c",
                tool="t",
                args=[1, "x"],
                status="suspended",
                deadline_at=FLOATS[i],
            ),  # fmt: skip
            ev.DecisionRecorded(
                **base,
                decision_id="d",
                call_id="c",
                action="resume",
                status="applied",
                reason=text,
                note=text,
            ),  # fmt: skip
            ev.DeliveryChanged(**base, channel=text, key=text, state="pending"),
            ev.DeliveryChanged(
                **base,
                channel="telegram",
                key="t1",
                state="retrying",
                outbox_id=3,
                tries=2,
                next_at=FLOATS[i],
                error=text,
            ),  # fmt: skip
            ev.Notice(**base, level="warning", text=text),
        ]
    return out


def test_every_kind_is_stored_as_pydantic_writes_it():
    found = set()
    for event in examples():
        found.add(type(event))
        assert event_json(event) == event.model_dump_json(), event
    assert found == set(KINDS)


def test_events_read_back_from_a_fast_row_are_equal():
    """(Those with a float that is not finite excepted: pydantic writes it null.)"""
    finite = lambda x: x is None or abs(x) < float("inf")  # noqa: E731
    for event in examples():
        floats = [getattr(event, f) for f in ("at", "duration", "deadline_at") if hasattr(event, f)]
        if all(finite(x) for x in floats):
            assert parse_event(event_json(event)) == event


@settings(max_examples=300, deadline=None)
@given(
    at=st.floats(allow_nan=False),
    deadline=st.none() | st.floats(allow_nan=False),
    text=st.text(st.characters(exclude_categories=["Cs"])),
    args=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=8,
    ),
)
def test_the_hot_kinds_match_pydantic_for_any_value(at, deadline, text, args):
    call = ev.CallChanged(at=at, thread_id=text, call_id=text, tool="t", args=args,
                          status="running", result=text, deadline_at=deadline)  # fmt: skip
    assert event_json(call) == call.model_dump_json()
    turn = ev.TurnChanged(at=at, status="waiting", reason=text, group=text or None)
    assert event_json(turn) == turn.model_dump_json()


@pytest.mark.anyio
async def test_a_checkpoints_events_are_one_insert_in_order(tmp_path: Path):
    many = [ev.Notice(at=float(i), thread_id="th", turn_id="tu", text=f"n{i}") for i in range(1203)]
    ops = rows.events_stored(many, "r1")
    assert len(ops) == 3  # 500 + 500 + 203 rows
    assert len(rows.events_stored(many[:7], "r1")) == 1
    store = await SqliteStore.open(tmp_path / "execution.db")
    try:
        await store.write(ops)
    finally:
        await store.close()
    conn = sqlite3.connect(tmp_path / "execution.db")
    try:
        stored = conn.execute("SELECT at, run_id, kind, body FROM events ORDER BY id").fetchall()
    finally:
        conn.close()
    assert stored == [(e.at, "r1", "notice", e.model_dump_json()) for e in many]
