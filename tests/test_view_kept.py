"""The request a step sends is built from the previous one's (engine/turn/view.py's `View`,
kept by the Conversation): it must be what the view builder makes of the whole log, step
after step, through compaction markers, their undoing, shortened results and entries cut
for the window."""

from __future__ import annotations

import random

import pytest

from engine.domain.messages import ConvMessage, ToolCallPart
from engine.turn.conversation import BASE_BYTES, HUGE, Conversation, entry_bytes
from engine.turn.view import request_messages


def _entry(rng: random.Random, conv: Conversation) -> ConvMessage:
    n = len(conv.messages)
    kind = rng.choice(("user", "assistant", "calls", "tool", "tool", "big", "huge", "marker",
                       "undo"))  # fmt: skip
    if kind == "user":
        return ConvMessage(role="user", text=f"ask {n}", context="2026-11-28 · via chat")
    if kind == "assistant":
        return ConvMessage(role="assistant", text=f"answer {n}")
    if kind == "calls":
        return ConvMessage(role="assistant", tool_calls=[
            ToolCallPart(id=f"c{n}", name="calc", arguments={"expression": "1+1"})])  # fmt: skip
    if kind == "tool":
        return ConvMessage(role="tool", text=f"result {n}", tool_call_id=f"c{n}")
    if kind == "big":  # read shortened once a marker names it
        return ConvMessage(role="tool", text="b" * 5_000, tool_call_id=f"c{n}")
    if kind == "huge":  # past half of a small window: read cut
        return ConvMessage(role="tool", text="h" * 4 * (HUGE + 500), tool_call_id=f"c{n}")
    if kind == "marker" and n > 2:
        covers = rng.randrange(0, n)
        tools = [i for i in range(covers, n) if conv.messages[i].role == "tool"]
        mark = {"kind": "compaction", "covers": covers,
                "shortened": rng.sample(tools, min(len(tools), 2))}  # fmt: skip
        return ConvMessage(role="system", text=f"summary {n}", compaction=mark)
    if kind == "undo" and conv.marker is not None:
        return ConvMessage(role="system", compaction={"kind": "undo", "of": conv.marker[0]})
    return ConvMessage(role="user", text=f"again {n}")


@pytest.mark.parametrize("seed", range(6))
def test_the_view_kept_step_to_step_is_the_view_of_the_whole_log(seed: int) -> None:
    rng = random.Random(seed)
    conv = Conversation("t")
    for _step in range(300):
        for _ in range(rng.randint(1, 3)):
            conv.append(_entry(rng, conv), "turn", 0.0)
        window = rng.choice((None, 1_000_000, 2 * HUGE + 100, 3 * HUGE))
        large = conv.huge if window and window // 2 >= HUGE else None
        kept = conv.view(window, large)
        whole = request_messages(conv.messages, window, conv.marker, large)
        assert kept == whole
        assert request_messages(conv.messages, window) == whole  # (the marker looked for)
        kept.append(ConvMessage(role="user", text="a strategy's own"))  # the list is the caller's
    assert conv.memory == BASE_BYTES + sum(entry_bytes(m) for m in conv.messages)


def test_a_loaded_conversation_views_and_counts_as_the_one_appended_to() -> None:
    rng = random.Random(7)
    grown = Conversation("t")
    for _ in range(200):
        grown.append(_entry(rng, grown), "turn", 0.0)
    loaded = Conversation("t", list(grown.messages))
    assert loaded.view(3 * HUGE, loaded.huge) == grown.view(3 * HUGE, grown.huge)
    assert (loaded.sums, loaded.huge, loaded.marker, loaded.memory) == (
        grown.sums, grown.huge, grown.marker, grown.memory)  # fmt: skip
