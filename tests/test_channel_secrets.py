"""Channel secrets are kept like provider keys (issue 25, item 4): every variable a channel
names (`token_env`, `secret_env`, `signing_secret_env`) is kept from the processes tools
start, and its value is masked in results, in answers leaving for a channel and in a
channel's errors, also URL-encoded, upper-cased and by its halves.

An approved `env` put TELEGRAM_BOT_TOKEN and the webhook's signing secret into execution.db;
a file holding the token was stored unmasked; the secret went back out to the chat."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from engine.domain.decisions import Decision
from engine.domain.messages import Message
from engine.loops.channels import ChannelSet
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime
from tests.helpers import room_bytes, rows
from tests.wait import until

pytestmark = pytest.mark.anyio

TOKEN = "4242424242:AAHsecret-telegram-token_value"
HOOK = "whsec-signing-secret-0123456789"
CHANNELS = '[tg]\nkind = "telegram"\ntoken_env = "TG_TOKEN"\napi_url = "http://127.0.0.1:9"\n'
HOOKS = (
    'listen = "127.0.0.1:0"\n[gh]\nkind = "webhook"\nsecret_env = "HOOK_SECRET"\n'
    'text = "comment.body"\nthread = "issue.number"\nsender = "sender.login"\n'
)


@pytest.fixture
def room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    room = tmp_path / "room"
    (room / "workspace").mkdir(parents=True)
    (room / "channels.toml").write_text(CHANNELS)
    (room / "hooks.toml").write_text(HOOKS)
    monkeypatch.setenv("TG_TOKEN", TOKEN)
    monkeypatch.setenv("HOOK_SECRET", HOOK)
    return room


async def ran(rt: Runtime, command: str, thread: str) -> str:
    """Run `command` through the shell tool, approved; its stored result."""
    out = await rt.run_turn(Message(origin="invoke", sender="t", thread_id=thread,
                                    text=f"run `{command}`"))  # fmt: skip
    [call] = out.pending
    await rt.decide(Decision.approve(call["call_id"]))
    await until(lambda: rt.wait_turn(out.turn_id), f"{command} ran",
                ok=lambda o: o.status == "done")  # fmt: skip
    [(result,)] = await rows(rt, "SELECT result FROM tool_calls WHERE id = ?", call["call_id"])
    return str(result)


async def test_channel_secrets_are_kept_from_tools_and_masked_in_results(room: Path) -> None:
    half = len(TOKEN) // 2
    (room / "workspace" / "leak.txt").write_text(
        f"url bot{quote(TOKEN, safe='')}/getMe\nupper {TOKEN.upper()}\n"
        f"split {TOKEN[:half]}\n{TOKEN[half:]} end\nhook {HOOK}\n"
    )
    async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
        env = await ran(rt, "env", "t-env")
        assert "TG_TOKEN" not in env and "HOOK_SECRET" not in env  # not in the tool's env
        leak = await ran(rt, "cat leak.txt", "t-cat")
        assert "[TG_TOKEN masked]" in leak and "[HOOK_SECRET masked]" in leak
    stored = room_bytes(room)
    for form in (TOKEN, quote(TOKEN, safe=""), TOKEN.upper(), TOKEN[:half], TOKEN[half:], HOOK):
        assert form.encode() not in stored, form


async def test_a_channels_errors_are_masked_and_its_answers_leave_masked(room: Path) -> None:
    async with Runtime.open(room, kind="test", provider=OfflineModel(delay=0)) as rt:
        # what the delivery worker masks answers and errors with (engine/loops/channels.py)
        assert {"TG_TOKEN", "HOOK_SECRET"} <= set(rt.ctx.secret_env)
    cs = ChannelSet.read(room)
    cs.open()
    cs.states["tg"].fail(f"Client error '404 Not Found' for url 'https://x/bot{TOKEN}/getMe'")
    assert TOKEN not in (cs.states["tg"].last_error or "")
    assert "[TG_TOKEN masked]" in (cs.states["tg"].last_error or "")
    await cs.aclose()
