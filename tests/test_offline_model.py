"""The offline model: triggers, answers after tool results, fallback, streaming shape."""

from __future__ import annotations

import json

import anyio
import pytest

from engine.domain.messages import ConvMessage, ToolCallPart
from engine.providers.base import (
    AssistantAccumulator,
    ModelRequest,
    StopEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from engine.providers.offline import FALLBACK, OfflineModel

ALL_TOOLS = [
    {"name": n}
    for n in ("shell", "clock", "list_dir", "read_file", "write_file", "calc", "http_get")
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def user(text: str) -> ConvMessage:
    return ConvMessage(role="user", text=text)


async def collect(request: ModelRequest, model: OfflineModel | None = None) -> list:
    return [e async for e in (model or OfflineModel()).stream(request)]


async def reply(text: str, tools: list[dict] | None = None) -> ConvMessage:
    acc = AssistantAccumulator()
    for event in await collect(ModelRequest([user(text)], ALL_TOOLS if tools is None else tools)):
        acc.add(event)
    return acc.message()


async def calls(text: str) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in (await reply(text)).tool_calls]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("please run `ls -la`", [("shell", {"command": "ls -la"})]),
        ("What TIME is it?", [("clock", {})]),
        ("what's the date today", [("clock", {})]),
        ("list files", [("list_dir", {"path": "."})]),
        ("list files in src/engine.", [("list_dir", {"path": "src/engine"})]),
        ("read notes.txt", [("read_file", {"path": "notes.txt"})]),
        (
            'write "hello world" to out.txt',
            [("write_file", {"text": "hello world", "path": "out.txt"})],
        ),
        ("write 'hi' to a.md", [("write_file", {"text": "hi", "path": "a.md"})]),
        ("write hi there to a.md", [("write_file", {"text": "hi there", "path": "a.md"})]),
        ("calc 2 * (3 + 4)", [("calc", {"expression": "2 * (3 + 4)"})]),
        ("what is 1.5 * 12?", [("calc", {"expression": "1.5 * 12"})]),
        ("fetch https://example.com/a?b=1", [("http_get", {"url": "https://example.com/a?b=1"})]),
    ],
)
async def test_each_trigger(text: str, expected: list) -> None:
    assert await calls(text) == expected


@pytest.mark.anyio
async def test_several_triggers_become_calls_in_text_order() -> None:
    text = "read a.txt, then `pwd`. What is 6*7? Also fetch http://x.org and tell me the time"
    assert await calls(text) == [
        ("read_file", {"path": "a.txt"}),
        ("shell", {"command": "pwd"}),
        ("calc", {"expression": "6*7"}),
        ("http_get", {"url": "http://x.org"}),
        ("clock", {}),
    ]
    msg = await reply(text)
    assert msg.text == "Running 5 tools."
    assert len({c.id for c in msg.tool_calls}) == 5


@pytest.mark.anyio
async def test_backticks_do_not_double_trigger() -> None:
    assert await calls("run `date` and `read x`") == [
        ("shell", {"command": "date"}),
        ("shell", {"command": "read x"}),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("text", ["update the docs", "timestamps are off", "it's already done"])
async def test_no_false_positives(text: str) -> None:
    msg = await reply(text)
    assert msg.tool_calls == [] and msg.text == FALLBACK


@pytest.mark.anyio
async def test_rules_claim_their_span() -> None:
    assert await calls("write the date to log.txt") == [
        ("write_file", {"text": "the date", "path": "log.txt"})
    ]
    assert await calls("what is the date and time?") == [("clock", {})]


@pytest.mark.anyio
async def test_unavailable_tool_is_mentioned_not_called() -> None:
    msg = await reply("fetch http://x.org and `ls`", tools=[{"name": "shell"}])
    assert [c.name for c in msg.tool_calls] == ["shell"]
    assert msg.text.startswith("Running 1 tool.")
    assert "`http_get` tool is not available" in msg.text

    events = await collect(ModelRequest([user("what time is it")], [{"name": "shell"}]))
    assert not any(isinstance(e, ToolCallDelta) for e in events)
    assert events[-1] == StopEvent(reason="end_turn")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "The `clock` tool is not available here, so I can't tell the time."
    )


@pytest.mark.anyio
async def test_fallback_reply_is_honest() -> None:
    msg = await reply("Hello there!")
    assert msg.tool_calls == []
    assert "offline model" in msg.text and "no LLM is configured" in msg.text
    assert (await reply("")).text == FALLBACK


@pytest.mark.anyio
async def test_answer_quotes_results_in_call_order() -> None:
    assistant = ConvMessage(
        role="assistant",
        text="Running 3 tools.",
        tool_calls=[
            ToolCallPart(id="c1", name="shell", arguments={"command": "ls"}),
            ToolCallPart(id="c2", name="shell", arguments={"command": "rm -rf /"}),
            ToolCallPart(id="c3", name="http_get", arguments={"url": "http://x"}),
        ],
    )
    results = [
        ConvMessage(role="tool", tool_call_id="c3", tool_name="http_get", text="?", pending=True),
        ConvMessage(role="tool", tool_call_id="c1", tool_name="shell", text="a.txt\nb.txt"),
        ConvMessage(
            role="tool",
            tool_call_id="c2",
            tool_name="shell",
            text="error: denied by operator: not now",
            is_error=True,
        ),
    ]
    events = await collect(ModelRequest([user("go"), assistant, *results], ALL_TOOLS))
    acc = AssistantAccumulator()
    for e in events:
        acc.add(e)
    msg = acc.message()
    assert msg.tool_calls == [] and acc.stop_reason == "end_turn"
    assert msg.text.splitlines() == [
        "`shell` returned: a.txt",
        "b.txt",
        "`shell` failed: denied by operator: not now",
        "`http_get` is still waiting for an operator decision.",
    ]


@pytest.mark.anyio
async def test_answer_only_quotes_results_since_last_calls_and_truncates() -> None:
    old = ConvMessage(role="assistant", tool_calls=[ToolCallPart(id="a", name="clock")])
    new = ConvMessage(role="assistant", tool_calls=[ToolCallPart(id="b", name="shell")])
    msgs = [
        user("time?"),
        old,
        ConvMessage(role="tool", tool_call_id="a", tool_name="clock", text="noon"),
        user("`yes`"),
        new,
        ConvMessage(role="tool", tool_call_id="b", tool_name="shell", text="y" * 1000),
    ]
    acc = AssistantAccumulator()
    for e in await collect(ModelRequest(msgs, ALL_TOOLS)):
        acc.add(e)
    text = acc.message().text
    assert "clock" not in text
    assert text.startswith("`shell` returned: yyy") and text.endswith("…")
    assert len(text) < 450


@pytest.mark.anyio
async def test_events_fold_into_expected_message() -> None:
    events = await collect(ModelRequest([user('write "a b" to x.txt and `ls`')], ALL_TOOLS))
    assert isinstance(events[-2], UsageEvent) and events[-2].output_tokens > 0
    assert events[-1] == StopEvent(reason="tool_use")
    acc = AssistantAccumulator()
    for e in events:
        acc.add(e)
    msg = acc.message()
    assert msg.role == "assistant" and msg.text == "Running 2 tools."
    assert [(c.name, c.arguments) for c in msg.tool_calls] == [
        ("write_file", {"text": "a b", "path": "x.txt"}),
        ("shell", {"command": "ls"}),
    ]
    assert all(isinstance(c.arguments, dict) for c in msg.tool_calls)
    assert msg.tool_calls[0].id.startswith("call_") and msg.tool_calls[0].id.endswith("_1_0")


@pytest.mark.anyio
async def test_arguments_are_split_over_several_deltas() -> None:
    events = await collect(ModelRequest([user("`echo hi` and the time")], ALL_TOOLS))
    for index in (0, 1):
        pieces = [e for e in events if isinstance(e, ToolCallDelta) and e.index == index]
        assert 2 <= len(pieces) <= 3
        assert pieces[0].id and pieces[0].name and pieces[0].arguments
        assert all(p.id is None and p.name is None and p.arguments for p in pieces[1:])


@pytest.mark.anyio
async def test_text_is_chunked_on_word_boundaries() -> None:
    events = await collect(ModelRequest([user("hi")]), OfflineModel(chunk_chars=10))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) > 5 and "".join(texts) == FALLBACK
    assert all(t[-1] == " " for t in texts[:-1])


@pytest.mark.anyio
async def test_deterministic_and_ids_unique_across_conversation() -> None:
    request = ModelRequest([user("`ls` and `pwd`")], ALL_TOOLS)
    first = await collect(request)
    assert first == await collect(request)
    assert first == await collect(ModelRequest([user("`ls` and `pwd`")], ALL_TOOLS))

    acc = AssistantAccumulator()
    for e in first:
        acc.add(e)
    turn1 = acc.message()
    msgs = [user("`ls` and `pwd`"), turn1]
    msgs += [
        ConvMessage(role="tool", tool_call_id=c.id, tool_name=c.name, text="ok")
        for c in turn1.tool_calls
    ]
    answer = AssistantAccumulator()
    for e in await collect(ModelRequest(msgs, ALL_TOOLS)):
        answer.add(e)
    msgs += [answer.message(), user("`ls` and `pwd`")]  # the same text again
    acc2 = AssistantAccumulator()
    for e in await collect(ModelRequest(msgs, ALL_TOOLS)):
        acc2.add(e)
    ids = [c.id for c in turn1.tool_calls + acc2.message().tool_calls]
    assert len(ids) == 4 and len(set(ids)) == 4


@pytest.mark.anyio
async def test_zero_delay_never_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_sleep(seconds: float) -> None:
        raise AssertionError("slept with delay=0")

    monkeypatch.setattr(anyio, "sleep", no_sleep)
    events = await collect(ModelRequest([user("`ls`, the time and hi")], ALL_TOOLS))
    assert events[-1] == StopEvent(reason="tool_use")


@pytest.mark.anyio
async def test_delay_sleeps_between_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(anyio, "sleep", fake_sleep)
    events = await collect(ModelRequest([user("`ls`")], ALL_TOOLS), OfflineModel(delay=0.25))
    pieces = [e for e in events if isinstance(e, TextDelta | ToolCallDelta)]
    assert slept == [0.25] * (len(pieces) - 1)


def test_chunk_chars_must_be_positive() -> None:
    with pytest.raises(ValueError):
        OfflineModel(chunk_chars=0)


@pytest.mark.anyio
async def test_a_shell_result_is_said_in_a_few_words_not_quoted_whole() -> None:
    """The console shows a shell call's output under it; the model's answer says how it
    went rather than repeating the JSON the tool returned."""
    call = ConvMessage(role="assistant", tool_calls=[ToolCallPart(id="s", name="shell")])

    async def answer(result: dict) -> str:
        done = ConvMessage(role="tool", tool_call_id="s", tool_name="shell",
                           text=json.dumps(result))  # fmt: skip
        acc = AssistantAccumulator()
        for e in await collect(ModelRequest([user("go"), call, done], ALL_TOOLS)):
            acc.add(e)
        return acc.message().text

    assert await answer({"exit_code": 0, "stdout": "hi\n", "stderr": ""}) == "`shell` exited 0: hi"
    many = {"exit_code": 0, "stdout": "a\nb\nc\n", "stderr": ""}
    assert await answer(many) == "`shell` exited 0 (3 lines of output)."
    assert await answer({"exit_code": 1, "stdout": "", "stderr": "no"}) == (
        "`shell` exited 1 with no output.")  # fmt: skip


def _grown(rng: object, n: int) -> list[ConvMessage]:
    """A conversation of `n` messages of every kind the model reads differently."""
    import random

    assert isinstance(rng, random.Random)
    out: list[ConvMessage] = []
    for i in range(n):
        kind = rng.choice(("user", "calls", "answer", "tool", "tool_error"))
        if kind == "user":
            out.append(user(rng.choice(("calc 1+1 and the time", "hello there", "list files"))))
        elif kind == "calls":
            parts = [ToolCallPart(id=f"c{i}_{j}", name="calc", arguments={"expression": f"{j} + 1"})
                     for j in range(rng.randint(1, 3))]  # fmt: skip
            out.append(ConvMessage(role="assistant", text=rng.choice(("", "on it")),
                                   tool_calls=parts))  # fmt: skip
        elif kind == "answer":
            out.append(ConvMessage(role="assistant", text="two words"))
        else:
            call = next((m.tool_calls[0] for m in reversed(out) if m.tool_calls), None)
            out.append(ConvMessage(role="tool", text=f"result {i}", is_error=kind == "tool_error",
                                   tool_call_id=call.id if call else None,
                                   tool_name=call.name if call else None))  # fmt: skip
    return out


@pytest.mark.anyio
async def test_a_model_that_reads_only_what_is_new_answers_as_one_that_reads_all() -> None:
    """The model carries its reading of a thread from one request to the next (its cost
    stays the same however long the thread); its events are those a model that never saw
    the thread before gives, also when a request is not the previous one grown: a branch
    (plan_execute's own last message), a message changed in place of another, a shorter one,
    another thread interleaved."""
    import random

    rng = random.Random(35)
    warm = OfflineModel()
    threads = [_grown(rng, 3) for _ in range(3)]
    for step in range(150):
        t = rng.randrange(len(threads))
        msgs = threads[t]
        msgs.extend(_grown(rng, rng.randint(1, 3)))
        sent = list(msgs)
        if step % 7 == 3:  # a branch: one more message, not kept
            sent.append(user("what is 2 * 21"))
        if step % 11 == 5 and len(sent) > 2:  # one message replaced by an equal copy
            sent[1] = sent[1].model_copy()
        if step % 13 == 6 and len(sent) > 2:  # one replaced by another
            sent[1] = user("read notes.txt")
        if step % 17 == 8:  # a shorter view of the thread
            sent = sent[: len(sent) // 2]
        request = ModelRequest(sent, ALL_TOOLS, system="be brief")
        assert warm.events(request) == OfflineModel().events(request), step
