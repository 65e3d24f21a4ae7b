"""Decisions bound to what was approved (engine/decisions/binding.py): an approval runs its call only
with the arguments whose hash it carries; an edit after approval, a hash for other
arguments, or (from the room's clients) no hash at all fails closed, and the call waits on.
And the three answers to a call a crash left for review: a result, failed, run again."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.api.local import LocalClient
from engine.decisions.binding import args_digest
from engine.domain.decisions import Decision
from engine.providers.offline import OfflineModel
from engine.tools.builtin import builtin_tools
from tests.helpers import msg, rows, runtime

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


def offline(tmp_path: Path, **kw):
    return runtime(tmp_path, OfflineModel(), builtin_tools(), **kw)


def test_the_digest_is_of_canonical_json() -> None:
    assert args_digest({"b": 1, "a": "é"}) == args_digest({"a": "é", "b": 1})
    assert args_digest({"command": "ls"}) != args_digest({"command": "ls "})


async def test_an_approval_bound_to_the_shown_arguments_runs_them(tmp_path):
    async with offline(tmp_path) as rt:
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = out.pending
        decision = Decision.approve(call["call_id"], seen=call["args"])
        assert decision.args_hash == args_digest({"command": "echo hi"})
        assert await rt.decide(decision) == "queued"
        done = await rt.wait_turn(out.turn_id)
        assert done.calls[0]["status"] == "succeeded"


async def test_an_approval_for_other_arguments_fails_closed_and_the_call_waits(tmp_path):
    async with offline(tmp_path) as rt:
        out = await rt.run_turn(msg("run `touch marker`"))
        [call] = out.pending
        shown = {"command": "echo harmless"}  # what the operator was shown is not what runs
        assert await rt.decide(Decision.approve(call["call_id"], seen=shown)) == "refused"
        # an edit whose hash is of other arguments than the edited ones: refused too
        edited = Decision.approve(call["call_id"], args={"command": "touch marker2"},
                                  args_hash=args_digest(shown))  # fmt: skip
        assert await rt.decide(edited) == "refused"
        assert not (rt.room.workspace / "marker").exists()
        assert not (rt.room.workspace / "marker2").exists()
        [still] = await rt.pending()
        assert still.call_id == call["call_id"]
        notes = await rows(rt, "SELECT status, note FROM decisions ORDER BY created_at")
        assert [s for s, _ in notes] == ["refused", "refused"]
        assert "not the arguments the operator was shown" in notes[0][1]
        # the edited arguments, bound to themselves, run
        good = Decision.approve(call["call_id"], seen=call["args"], args={"command": "echo ok"})
        assert await rt.decide(good) == "queued"
        assert (await rt.wait_turn(out.turn_id)).calls[0]["status"] == "succeeded"


async def test_the_room_client_refuses_an_approval_bound_to_nothing(tmp_path):
    async with offline(tmp_path) as rt:
        client = LocalClient(rt)
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = out.pending
        decided = await client.decide(Decision.approve(call["call_id"]))
        assert decided.status == "refused"
        assert "must name the arguments it approves" in (decided.note or "")
        [pending] = await client.pending()
        ok = await client.decide(Decision.approve(call["call_id"], args_hash=pending.args_hash))
        assert ok.status == "queued"


async def test_review_answers_fit_only_a_reviewed_call(tmp_path):
    async with offline(tmp_path) as rt:
        out = await rt.run_turn(msg("run `echo hi`"))
        [call] = out.pending
        for wrong in (Decision.fail(call["call_id"]), Decision.rerun(call["call_id"])):
            assert await rt.decide(wrong) == "refused"
        with pytest.raises(ValueError):
            Decision(call_id="c", action="fail", args={"x": 1})
        with pytest.raises(ValueError):
            Decision(call_id="c", action="rerun", remember="room")
