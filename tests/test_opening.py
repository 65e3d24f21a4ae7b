"""A new turn on a thread this run does not keep reads its conversation and the thread's own
instructions in one read (engine/services/opening.py), and is told and sent exactly what two
reads gave; a thread it keeps reads nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.api.local import LocalClient
from engine.runtime import Runtime
from tests.helpers import msg, runtime
from tests.scripted import Reply, ScriptedModel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


def counting(rt: Runtime) -> list[str]:
    """The names of the statements the runtime's store reads from now on."""
    names: list[str] = []
    fetchall = rt.store.fetchall

    async def counted(sql: str, params: Any = ()) -> list[Any]:
        names.append(sql)
        return await fetchall(sql, params)

    rt.store.fetchall = counted  # type: ignore[method-assign]
    return names


async def test_a_thread_new_to_the_run_is_read_once_with_its_instructions(tmp_path: Path):
    model = ScriptedModel(lambda request: Reply(text="ok"))
    async with runtime(tmp_path, model) as rt:
        await LocalClient(rt).set_instructions("kept", "Answer in French.")
        await rt.run_turn(msg("one", "kept"))
    async with runtime(tmp_path, model, first_id=100) as rt:  # a new run: nothing kept
        read = counting(rt)
        await rt.run_turn(msg("two", "kept"))
        first = [n for n in read if n.startswith("turns.")]
        await rt.run_turn(msg("three", "kept"))
        await rt.run_turn(msg("hello", "new"))
    assert first == ["turns.thread_opening"]  # not message_bodies, then thread_instructions
    assert [n for n in read if n.startswith("turns.")] == first * 2  # "three" read nothing
    before, after = model.requests[0], model.requests[1]
    assert "Answer in French." in (after.system or "") and after.system == before.system
    assert [m.text for m in after.messages] == ["one", "ok", "two"]
    assert [m.text for m in model.requests[-1].messages] == ["hello"]
    assert model.requests[-1].system is None
