"""Conversations of idle threads leave memory past [runtime] conversation_cache_bytes and
are read again when a turn needs one (engine/services/conversations.py); one whose thread
has a turn waiting for a decision stays; the runtime's own request maps stay bounded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine.config import Config, RuntimeConfig
from engine.domain.decisions import Decision
from engine.providers.base import ModelEvent, ModelRequest
from engine.providers.offline import OfflineModel
from engine.runtime.recent import RecentRequests
from engine.tools import tool
from tests.helpers import msg, runtime
from tests.scripted import shell

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

NOW = 1_780_000_000.0  # a fixed clock: the two rooms' messages carry the same dates


class Recording(OfflineModel):
    """The offline model, keeping every request it is sent (as JSON)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.seen.append(json.dumps([m.model_dump(mode="json") for m in request.messages]))
        async for event in super().stream(request):
            yield event


@tool(name="calc")
async def calc(expression: str) -> str:
    """Adds."""
    left, _, right = expression.partition("+")
    return str(int(left) + int(right))


def config(cache: int) -> Config:
    return Config(runtime=RuntimeConfig(conversation_cache_bytes=cache))


async def _rounds(tmp_path: Path, cache: int) -> tuple[list[str], list[str], Any]:
    model = Recording()
    texts = []
    async with runtime(tmp_path, model, [calc], config=config(cache), clock=lambda: NOW) as rt:
        for r in range(3):  # every thread's turn r after every other thread's turn r - 1
            for t in range(6):
                out = await rt.run_turn(msg(f"calc {r}+{t}, then the date", f"chat:t{t}"))
                texts.append(out.text)
        stats = rt.supervisor.conversations.statistics()
    return model.seen, texts, stats


async def test_an_evicted_threads_next_turn_reads_its_whole_conversation(tmp_path: Path) -> None:
    """With room for no idle conversation, every turn reads its thread from the store
    again: the model is sent what a runtime that kept them all sends, request by request,
    and answers alike."""
    kept_seen, kept_texts, kept = await _rounds(tmp_path / "kept", 1 << 30)
    gone_seen, gone_texts, gone = await _rounds(tmp_path / "gone", 0)
    assert (kept.dropped, kept.loaded, kept.kept) == (0, 6, 6)
    assert gone.dropped == gone.loaded == 18 and gone.kept == 0  # read again for each turn
    assert gone_seen == kept_seen
    assert gone_texts == kept_texts
    last = json.loads(gone_seen[-1])  # the last request reads the thread's three turns
    assert [m["text"] for m in last if m["role"] == "user"] == [
        f"calc {r}+5, then the date" for r in range(3)]  # fmt: skip


async def test_a_bound_of_n_conversations_holds(tmp_path: Path) -> None:
    async with runtime(tmp_path, OfflineModel(), [calc], config=config(1 << 30)) as rt:
        await rt.run_turn(msg("calc 1+1", "chat:first"))
        one = rt.supervisor.conversations.statistics().memory  # (the first thread's)
        rt.supervisor.conversations.limit = 5 * one + one // 2  # room for five like it
        for t in range(40):
            await rt.run_turn(msg("calc 1+1", f"chat:{t:02}"))
            stats = rt.supervisor.conversations.statistics()
            assert stats.kept <= 5 and stats.memory <= stats.limit, (t, stats)
        assert stats.kept == 5 and stats.dropped == 36
        # the most recently used are those kept: asking for them reads nothing
        for t in range(35, 40):
            await rt.conversation(f"chat:{t:02}")
        assert rt.supervisor.conversations.statistics().loaded == stats.loaded
        await rt.conversation("chat:34")
        assert rt.supervisor.conversations.statistics().loaded == stats.loaded + 1


async def test_a_waiting_turns_conversation_stays_until_the_turn_ends(tmp_path: Path) -> None:
    async with runtime(tmp_path, OfflineModel(), [shell, calc], config=config(0)) as rt:
        out = await rt.run_turn(msg("run `ls`", "chat:waits"))
        assert out.status == "waiting"
        conv = await rt.conversation("chat:waits")
        for t in range(5):  # other threads come and go; the waiting one is in use
            await rt.run_turn(msg("calc 1+1", f"chat:{t}"))
        assert await rt.conversation("chat:waits") is conv
        await rt.decide(Decision.approve(out.pending[0]["call_id"], seen=out.pending[0]["args"]))
        done = await rt.wait_turn(out.turn_id)
        assert done.status == "done", done
        await rt.run_turn(msg("calc 1+1", "chat:other"))  # (a settle that trims)
        assert "chat:waits" not in rt.supervisor.conversations._kept
        again = await rt.conversation("chat:waits")  # read again: all of it
        assert [m.model_dump() for m in again.messages] == [m.model_dump() for m in conv.messages]


def test_recent_requests_keep_the_queued_and_live_and_forget_the_oldest_others() -> None:
    from engine.domain.messages import Message
    from engine.domain.requests import Request
    from engine.lifecycle import RequestStatus

    live: dict[str, object] = {}
    kept = RecentRequests(live, limit=10)
    made = []
    for i in range(60):
        req = Request(f"t{i}", Message(origin="invoke", sender="s", thread_id="x", text="hi"),
                      "chat", 0.0)  # fmt: skip
        if i % 7 == 0:
            req.move(RequestStatus.ADMITTED)
            live[req.id] = object()  # its turn runs
        elif i % 5 != 0:
            req.move(RequestStatus.ADMITTED)  # (queued: every fifth)
        kept[req.id] = req
        made.append(req)
        assert len(kept) <= 20 + 60 // 7 + 60 // 5 + 2
    for req in made:
        if req.id in live or req.status is RequestStatus.QUEUED:
            assert kept.get(req.id) is req
    assert list(kept)[-1] == "t59" and len(kept) < 60


async def test_budgets_keep_the_spend_of_threads_a_budget_applies_to(tmp_path: Path) -> None:
    """Today's spend per thread is kept only for threads with a budget (a room sees more
    threads a day than it need hold); one set later reads the thread's spend so far."""
    from engine.domain.usage import Limit, Scope

    async with runtime(tmp_path, OfflineModel(), [calc]) as rt:
        for t in range(5):
            await rt.run_turn(msg("calc 1+1", f"chat:{t}"))
        assert rt.budgets.threads == {}
        await rt.set_budget(Scope("thread", "chat:3"), Limit(tokens=1_000_000), "test")
        spent = rt.budgets.threads["chat:3"]
        assert list(rt.budgets.threads) == ["chat:3"] and spent.input_tokens > 0
        await rt.run_turn(msg("calc 2+2", "chat:3"))
        await rt.run_turn(msg("calc 2+2", "chat:4"))
        assert list(rt.budgets.threads) == ["chat:3"]
        assert rt.budgets.threads["chat:3"].input_tokens > spent.input_tokens
