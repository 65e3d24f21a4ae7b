"""A model per group and thread (issue 32): `[groups.NAME.model]` and `[threads."ID".model]`
over the room's `[model]`; each turn records the model that answered it."""

from __future__ import annotations

from typing import Any

import pytest

from engine.config import Config, GroupSettings, ModelConfig, ThreadSettings
from engine.domain.events import TurnStarted
from engine.domain.messages import Message
from tests.helpers import rows, runtime
from tests.scripted import Reply, ScriptedModel

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


class Named(ScriptedModel):
    """A scripted model that says its name (`name:model` is the key a turn records)."""

    name = "named"

    def __init__(self, model: str) -> None:
        super().__init__(lambda request: Reply(text=f"answered by {model}"))
        self.model = model


CONFIG = Config(
    groups={"task": GroupSettings(model=ModelConfig(provider="openai", model="cheap-1"))},
    threads={"task:audit": ThreadSettings(model=ModelConfig(model="strong-1"))},
)


def msg(origin: str, thread: str) -> Message:
    channel = "console" if origin == "chat" else None
    sender = "op" if origin == "chat" else "self"
    return Message(origin=origin, channel=channel, sender=sender, thread_id=thread, text="go")  # type: ignore[arg-type]


async def test_a_group_and_a_thread_answer_with_their_own_models(tmp_path: Any) -> None:
    room = ScriptedModel(lambda request: Reply(text="answered by the room's"))
    made: dict[str, Named] = {}

    def make(model: ModelConfig) -> Named:
        assert model.provider == "openai"  # the group's settings over the room's, field by field
        return made.setdefault(model.model or "", Named(model.model or ""))

    async with runtime(tmp_path, room, config=CONFIG) as rt:
        rt.models.make = make
        started: list[TurnStarted] = []
        rt.subscribe(lambda e: started.append(e) if isinstance(e, TurnStarted) else None)
        chat = await rt.run_turn(msg("chat", "chat:main"))
        task = await rt.run_turn(msg("task", "task:nightly"))
        audit = await rt.run_turn(msg("task", "task:audit"))
        again = await rt.run_turn(msg("task", "task:other"))
        recorded = await rows(rt, "SELECT thread_id, model FROM turns ORDER BY created_at")
    assert (chat.text, task.text, audit.text, again.text) == (
        "answered by the room's", "answered by cheap-1", "answered by strong-1",
        "answered by cheap-1")  # fmt: skip
    assert sorted(made) == ["cheap-1", "strong-1"]  # each made once
    assert recorded == [("chat:main", "scripted:scripted-1"), ("task:nightly", "named:cheap-1"),
                        ("task:audit", "named:strong-1"), ("task:other", "named:cheap-1")]  # fmt: skip
    assert [e.model for e in started] == [m for _, m in recorded]


def test_a_groups_model_is_read_from_agentdeck_toml(tmp_path: Any) -> None:
    from engine.config import load_config

    path = tmp_path / "agentdeck.toml"
    path.write_text('[groups.chore.model]\nprovider = "anthropic"\nmodel = "claude-haiku-4-5"\n'
                    'key_env = "CHORES_KEY"\ncontext_window = 50000\n')  # fmt: skip
    chore = load_config(path).groups["chore"].model
    assert chore is not None and (chore.provider, chore.key_env, chore.context_window) == (
        "anthropic", "CHORES_KEY", 50000)  # fmt: skip
