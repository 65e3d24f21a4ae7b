"""What a turn's agent is told (issue 32): the room's AGENTS.md, [agent], the group's and
the thread's own, in that order, sent as the system prompt; recorded by hash, once per
distinct text; what changes from turn to turn with the user's message instead."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.api.local import LocalClient
from engine.config import AgentConfig, Config, GroupSettings
from engine.domain.decisions import Decision
from engine.domain.instructions import HEADER
from engine.domain.messages import Message
from engine.providers.base import ModelRequest
from engine.providers.offline import OfflineModel
from tests.helpers import rows, runtime
from tests.scripted import Reply, ScriptedModel, first_then

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]

CONFIG = Config(agent=AgentConfig(instructions="Answer in English."),
                groups={"chat": GroupSettings(instructions="Keep answers short.")})  # fmt: skip


def chat(text: str, thread: str = "chat:main", sender: str = "ann") -> Message:
    return Message(origin="chat", channel="telegram", sender=sender, thread_id=thread, text=text)


def room_with_file(tmp_path: Path) -> None:
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "AGENTS.md").write_text("You are Ada.\n")


async def test_the_parts_come_in_the_documented_order_and_each_text_is_kept_once(tmp_path):
    room_with_file(tmp_path)
    model = ScriptedModel(lambda request: Reply(text="ok"))
    async with runtime(tmp_path, model, config=CONFIG) as rt:
        await LocalClient(rt).set_instructions("chat:main", "This thread is the release.")
        await rt.run_turn(chat("one"))
        await rt.run_turn(chat("two"))
        await LocalClient(rt).set_instructions("chat:main", "This thread is the launch.")
        await rt.run_turn(chat("three"))
        kept = await rows(rt, "SELECT hash, parts FROM instructions ORDER BY created_at")
        turns = await rows(rt, "SELECT instructions FROM turns ORDER BY created_at")
    first = model.requests[0].system
    assert first == (f"{HEADER}\n\n## From AGENTS.md\n\nYou are Ada.\n\n"
                     "## From [agent] instructions\n\nAnswer in English.\n\n"
                     "## From the group chat\n\nKeep answers short.\n\n"
                     "## From the thread chat:main\n\nThis thread is the release.")  # fmt: skip
    assert model.requests[1].system == first and model.requests[2].system != first
    assert len(kept) == 2  # two distinct texts, for three turns
    assert [t for (t,) in turns] == [kept[0][0], kept[0][0], kept[1][0]]
    assert [source for source, _ in json.loads(kept[1][1])] == [
        "AGENTS.md",
        "[agent] instructions",
        "the group chat",
        "the thread chat:main",
    ]


async def test_what_changes_each_turn_goes_with_the_message_not_the_system_prompt(tmp_path):
    model = ScriptedModel(lambda request: Reply(text="ok"))
    async with runtime(tmp_path, model, config=CONFIG, clock=lambda: 1_767_268_800.0) as rt:
        await rt.run_turn(chat("hello", sender="bob"))
        await rt.run_turn(chat("again", sender="eve"))
    one, two = model.requests
    assert one.system == two.system  # the same prefix: a provider's prompt cache holds
    assert "bob" not in (one.system or "") and "2026" not in (one.system or "")
    said = one.messages[-1]
    assert said.text == "hello"  # the model's own text is the message's
    assert said.context is not None and "via telegram" in said.context and "bob" in said.context
    assert said.read_text.startswith("<context>") and said.read_text.endswith("\n\nhello")
    assert "2026-01-01" in said.context


async def test_a_resumed_turn_is_told_what_it_started_with(tmp_path):
    seen: list[ModelRequest] = []

    def script(request: ModelRequest) -> Reply:
        seen.append(request)
        return first_then([("shell", {"command": "ls"})])(request)

    async with runtime(tmp_path, script, config=CONFIG) as rt:
        client = LocalClient(rt)
        await client.set_instructions("chat:main", "Before.")
        waiting = await rt.run_turn(chat("run it"))
        assert waiting.status == "waiting"
        await client.set_instructions("chat:main", "After.")
        call = waiting.pending[0]
        await rt.decide(Decision.approve(call["call_id"], seen=call["args"], id="d1"))
        await rt.wait_turn(waiting.turn_id)
    assert seen[-1].system == seen[0].system and "Before." in (seen[-1].system or "")


async def test_the_offline_model_says_which_instructions_it_received(tmp_path):
    room_with_file(tmp_path)
    async with runtime(tmp_path, OfflineModel(), config=CONFIG) as rt:
        told = await rt.run_turn(chat("what are your instructions?"))
    assert told.text == ("I was given instructions of 238 characters, from AGENTS.md, "
                         "[agent] instructions and the group chat.")  # fmt: skip


async def test_no_instructions_no_system_prompt_and_a_thread_told_nothing(tmp_path):
    model = ScriptedModel(lambda request: Reply(text="ok"))
    async with runtime(tmp_path, model) as rt:
        await rt.run_turn(chat("hi"))
        described = await LocalClient(rt).instructions("task:nightly")
        turns = await rows(rt, "SELECT instructions FROM turns")
    assert model.requests[0].system is None and turns == [(None,)]
    assert (described.group, described.hash, described.parts) == ("task", "", [])


def test_the_cli_sets_and_shows_a_threads_instructions(tmp_path: Path, capsys: Any) -> None:
    from engine.cli import main

    room = tmp_path / "room"
    assert main(["--room", str(room), "instructions", "chat:main", "--set", "Be kind."]) == 0
    capsys.readouterr()
    assert main(["--room", str(room), "instructions", "chat:main", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["own"], shown["text"]) == ("Be kind.", "Be kind.")
    assert main(["--room", str(room), "instructions", "chat:main", "--clear"]) == 0
    assert "no instructions" in capsys.readouterr().out


def test_both_providers_send_the_instructions_and_the_messages_circumstances() -> None:
    from engine.domain.messages import ConvMessage
    from engine.providers.anthropic import AnthropicProvider
    from engine.providers.openai import OpenAIProvider

    request = ModelRequest(messages=[ConvMessage(role="user", text="hi", context="Friday · via tg")],
                           system="You are Ada.")  # fmt: skip
    openai = OpenAIProvider("gpt-4o-mini", "k", "http://127.0.0.1:9").body(request)["messages"]
    assert openai == [{"role": "system", "content": "You are Ada."},
                      {"role": "user", "content": "<context>Friday · via tg</context>\n\nhi"}]  # fmt: skip
    body = AnthropicProvider("claude-sonnet-4-5", "k").body(request)
    assert body["system"] == [{"type": "text", "text": "You are Ada.",
                               "cache_control": {"type": "ephemeral"}}]  # fmt: skip
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "<context>Friday · via tg</context>\n\nhi"}
    ]
