"""A context that never overflows (issue 32): requests are measured against the model's
window and the conversation compacted before one would pass it; the log stays whole."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.config import Config, ModelConfig
from engine.domain.messages import Message
from engine.providers.base import (
    ContextTooLong,
    ModelEvent,
    ModelRequest,
    StopEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from engine.providers.windows import estimate_tokens
from engine.turn.view import SUMMARY_NOTE
from tests.helpers import rows, runtime

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

WORDS = "the build of the release candidate went on through the night with many checks "


class CountingModel:
    """A provider that counts a request's tokens its own way (`scale` times the runtime's
    estimate of what it is sent), refuses one over `window` as providers do (HTTP 400,
    context_length_exceeded), and calls `add` on every second user message."""

    name, model = "counting", "counting-1"

    def __init__(self, window: int, scale: float = 1.5) -> None:
        self.window, self.scale = window, scale
        self.sent: list[tuple[ModelRequest, int]] = []  # accepted requests and their count
        self.refused = 0

    def count(self, request: ModelRequest) -> int:
        text = (request.system or "") + json.dumps(request.tools)
        text += "".join(m.read_text + json.dumps([c.arguments for c in m.tool_calls])
                        for m in request.messages)  # fmt: skip
        return int(estimate_tokens(text) * self.scale) + 4 * len(request.messages)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        size = self.count(request)
        if size > self.window:
            self.refused += 1
            raise ContextTooLong(f"This model's maximum context length is {self.window} tokens")
        self.sent.append((request, size))
        if request.purpose == "summary":
            yield TextDelta(text=f"Summary: a long night of builds ({len(request.messages)}).")
        elif request.messages[-1].role == "user" and len(self.sent) % 2 == 0:
            yield ToolCallDelta(index=0, id=f"m{len(self.sent)}", name="add",
                                arguments='{"a": 1, "b": 2}')  # fmt: skip
        else:
            yield TextDelta(text="Noted: " + WORDS * 3)
        yield UsageEvent(input_tokens=size, output_tokens=20)
        yield StopEvent(reason="end_turn")


def chat(text: str, thread: str = "chat:long") -> Message:
    return Message(origin="chat", channel="console", sender="ann", thread_id=thread, text=text)


async def operator(rt: Any, strategy: str) -> Any:
    """An operator's compaction of chat:long now (or its undoing), as the CLI asks for it."""
    message = Message(origin="invoke", sender="op", thread_id="chat:long", text=strategy)
    handle = await rt.submit(message, strategy=strategy)
    return await rt.wait_turn(handle.turn_id)


def window(tokens: int) -> Config:
    return Config(model=ModelConfig(context_window=tokens))


async def test_two_hundred_turns_never_send_a_request_over_the_window(tmp_path: Any) -> None:
    model = CountingModel(window=3000)
    async with runtime(tmp_path, model, config=window(3000)) as rt:
        for n in range(200):
            outcome = await rt.run_turn(chat(f"turn {n}: {WORDS * 4}"))
            assert (outcome.status, outcome.reason) == ("done", "natural"), outcome
        stored = await rows(rt, "SELECT count(*) FROM messages WHERE role = 'user'")
        marks = await rows(rt, "SELECT body FROM messages WHERE role = 'system'")
        steps = await rows(rt, "SELECT count(*) FROM steps WHERE kind = 'compaction'")
    assert max(size for _, size in model.sent) <= 3000
    assert stored == [(200,)]  # the log keeps every message: the view is what shrinks
    assert len(marks) >= 10 and steps[0][0] >= 10
    assert all(json.loads(b)["compaction"]["after"] < json.loads(b)["compaction"]["before"]
               for (b,) in marks)  # fmt: skip
    last = model.sent[-1][0].messages
    asked = [m.text for m in last if m.role == "user"]
    assert asked[0].startswith(SUMMARY_NOTE) and asked[-1].startswith("turn 199")


async def test_a_context_length_error_compacts_and_retries_once(tmp_path: Any) -> None:
    """The runtime's estimate says it fits (its window is set far too large); the provider
    counts otherwise and refuses: the turn compacts and sends it again, and goes on."""
    model = CountingModel(window=2500, scale=1.0)
    async with runtime(tmp_path, model, config=window(1_000_000)) as rt:
        outcomes = [await rt.run_turn(chat(f"turn {n}: {WORDS * 6}")) for n in range(30)]
        failed = await rows(rt, "SELECT summary FROM steps WHERE status = 'failed'")
    assert {o.status for o in outcomes} == {"done"} and model.refused >= 1
    assert any("maximum context length" in s for (s,) in failed)


async def test_undo_restores_the_whole_conversation_and_compact_now_summarises(tmp_path):
    model = CountingModel(window=10**9)
    async with runtime(tmp_path, model, config=window(100_000)) as rt:
        for n in range(6):
            await rt.run_turn(chat(f"turn {n}: {WORDS}"))
        now = await operator(rt, "compact")
        assert now.text == "compacted"
        await rt.run_turn(chat("after the compaction"))
        compacted = model.sent[-1][0].messages
        undone = await operator(rt, "uncompact")
        assert undone.text == "the last compaction undone"
        await rt.run_turn(chat("after the undo"))
        whole = model.sent[-1][0].messages
    assert compacted[0].text.startswith(SUMMARY_NOTE)
    assert whole[0].text.startswith("turn 0") and len(whole) > len(compacted)
    assert not any(m.role == "system" for m in whole)  # markers are never sent


async def test_a_message_larger_than_the_window_is_cut_with_a_note(tmp_path: Any) -> None:
    model = CountingModel(window=10**9)
    async with runtime(tmp_path, model, config=window(2000)) as rt:
        outcome = await rt.run_turn(chat("x" * 50_000))
    sent = model.sent[0][0].messages[-1].text
    assert outcome.status == "done" and len(sent) < 10_000
    assert "left out: this entry is larger than the model's context window allows" in sent


def test_the_cli_compacts_a_thread_and_undoes_it(tmp_path: Any, capsys: Any) -> None:
    from engine.cli import main

    room = str(tmp_path / "room")
    for n in range(4):
        assert main(["--room", room, "invoke", "--thread", "chat:cli", f"calc {n}+1"]) == 0
    capsys.readouterr()
    assert main(["--room", room, "compact", "chat:cli"]) == 0
    assert "compacted" in capsys.readouterr().out
    assert main(["--room", room, "compact", "chat:cli", "--undo"]) == 0
    assert "the last compaction undone" in capsys.readouterr().out
    assert main(["--room", room, "compact", "chat:cli", "--undo"]) == 0
    assert "no compaction to undo" in capsys.readouterr().out
    assert main(["--room", room, "compact", "x" * 600]) == 2  # one line, no traceback
    assert capsys.readouterr().err.startswith("agentdeck: THREAD: String should have at most")


async def test_a_huge_message_is_cut_in_a_large_window_too(tmp_path: Any) -> None:
    """(The view looks only at the entries the conversation knows are large, when the
    window is large enough for that.)"""
    model = CountingModel(window=10**9)
    async with runtime(tmp_path, model, config=window(20_000)) as rt:
        await rt.run_turn(chat("small first"))
        await rt.run_turn(chat("y" * 200_000))
    sent = [m.text for m in model.sent[-1][0].messages if m.role == "user"]
    assert sent[0] == "small first" and len(sent[-1]) < 40_000
    assert "larger than the model's context window allows" in sent[-1]
