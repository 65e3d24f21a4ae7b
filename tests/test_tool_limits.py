"""What the runtime bounds around every tool call: its time, its result's size, its secrets."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from engine.config import Config
from engine.domain.decisions import Decision
from engine.store.bus import public_events, top_seq
from engine.tools import ToolError, tool
from engine.tools import builtin as bt
from engine.tools.redact import Secrets
from tests.helpers import msg, room_bytes, rows, runtime
from tests.scripted import first_then

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


# --- time limit ----------------------------------------------------------------------------


@tool
async def stuck() -> str:
    """Never returns on its own."""
    await anyio.sleep_forever()
    return "never"


async def test_the_configured_time_limit_ends_a_stuck_call_with_an_error_the_model_sees(
    tmp_path,
):
    config = Config.model_validate({"runtime": {"tool_timeouts": {"stuck": 0.1}}})
    async with runtime(tmp_path, first_then([("stuck", {})]), [stuck], config=config) as rt:
        with anyio.fail_after(30):  # the guard: without a limit the turn never ends
            out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "natural")
        assert out.calls[0]["status"] == "failed"
        error = "stuck did not finish within its time limit (0.1s) and was stopped"
        assert await rows(rt, "SELECT error FROM tool_calls") == [(error,)]
        assert f"stuck: error: {error}" in out.text


# --- result size ---------------------------------------------------------------------------


@tool
def flood() -> str:
    """A result far past the cap."""
    return "x" * 1_000_000


@tool
def shout() -> str:
    """An error far past the cap."""
    raise ToolError("y" * 1_000_000)


def size(text: str | None) -> int | None:
    """The stored text's length in bytes (UTF-8), as the cap counts it."""
    return None if text is None else len(text.encode())


async def test_every_result_and_error_is_cut_to_the_cap_before_it_is_stored(tmp_path):
    config = Config.model_validate({"runtime": {"max_result_bytes": 2048}})
    script = first_then([("flood", {}), ("shout", {})])
    async with runtime(tmp_path, script, [flood, shout], config=config) as rt:
        out = await rt.run_turn(msg("go"))
        assert (out.status, out.reason) == ("done", "natural")
        calls = await rows(rt, "SELECT result, error FROM tool_calls ORDER BY step_id, idx")
        assert [tuple(size(v) for v in r) for r in calls] == [(2048, None), (None, 2048)]
        tool_texts = await rows(rt, "SELECT text FROM messages WHERE role='tool'")
        assert max(size(t) for (t,) in tool_texts) <= 2048 + len("error: ")
        assert max(size(b) for (b,) in await rows(rt, "SELECT body FROM events")) < 8192
        seen = [m.text for m in rt.provider.requests[-1].messages if m.role == "tool"]
        assert all("[cut by the runtime: the result was 1,000,0" in t for t in seen), seen


# --- a NUL character --------------------------------------------------------------------


@tool
def binary() -> str:
    """Output as a program that prints a NUL gives it."""
    return "before\x00after"


async def test_a_nul_in_a_message_an_argument_or_a_result_is_stored_and_the_turn_goes_on(
    tmp_path,
):
    """Found running these tests on PostgreSQL, whose text cannot hold NUL (0x00): there
    it is stored as U+FFFD; the write failed, the turn with it, and a call_changed event's
    body with an escaped NUL failed every read of the event stream."""
    script = first_then([("binary", {}), ("shell", {"command": "printf 'a\x00b'"})])
    async with runtime(tmp_path, script, [binary, bt.shell]) as rt:
        out = await rt.run_turn(msg("nul \x00 here"))
        assert out.status == "waiting"  # the shell call waits with its NUL argument
        await rt.decide(Decision.cancel(out.pending[0]["call_id"], "no"))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        [(result,)] = await rows(rt, "SELECT result FROM tool_calls WHERE tool = 'binary'")
        assert result.replace("\ufffd", "\x00") == "before\x00after"
        [(text,)] = await rows(rt, "SELECT text FROM messages WHERE role = 'user'")
        assert text.replace("\ufffd", "\x00") == "nul \x00 here"
        top = await top_seq(rt.store)
        public = await public_events(rt.store, 0, top, 1000)  # the stream reads past them
        assert "call_changed" in {e["kind"] for e in public}


# --- secrets -------------------------------------------------------------------------------

FAKE_OPENAI = "sk-proj-FAKE0123456789abcdefghijklmnop"
FAKE_ANTHROPIC = "sk-ant-FAKE9876543210zyxwvutsrqpon"
FAKE_TOKEN = 'tok"FAKE\\5555-named-in-secret_env'  # JSON escapes it: masked in both forms


@tool
def leak() -> dict[str, str]:
    """Reads the runtime's own environment, as a careless user tool might."""
    return {k: os.environ[k] for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_TOKEN")}


@tool
def leak_error() -> str:
    """Puts a key into an error."""
    raise ToolError(f"refused key {os.environ['OPENAI_API_KEY']}")


async def test_an_approved_env_leaves_no_key_anywhere_in_execution_db(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI)
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC)
    monkeypatch.setenv("MY_TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("HARMLESS", "visible-value")
    config = Config.model_validate({"runtime": {"secret_env": ["MY_TOKEN"]}})
    command = 'env; echo "key=$OPENAI_API_KEY token=$MY_TOKEN"'
    script = first_then([("shell", {"command": command}), ("leak", {}), ("leak_error", {})])
    async with runtime(tmp_path, script, [bt.shell, leak, leak_error], config=config) as rt:
        out = await rt.run_turn(msg("go"))
        assert out.status == "waiting"
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        results = dict(await rows(rt, "SELECT tool, coalesce(result, error) FROM tool_calls"))
        shell_out = json.loads(results["shell"])["stdout"]
        assert "HARMLESS=visible-value" in shell_out  # the rest of the environment is there
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_TOKEN"):
            assert f"{name}=" not in shell_out  # the tool's process never had them
        assert "key= token=" in shell_out
        assert "[OPENAI_API_KEY masked]" in results["leak"]
        assert "[MY_TOKEN masked]" in results["leak"]
        assert results["leak_error"] == "refused key [OPENAI_API_KEY masked]"
    stored = room_bytes(tmp_path / "room")
    assert b"HARMLESS=visible-value" in stored, "the scan does not see the stored results"
    for secret in (FAKE_OPENAI, FAKE_ANTHROPIC, "FAKE\\5555", "FAKE\\\\5555"):
        assert secret.encode() not in stored, secret


def test_secrets_are_found_by_name_and_masked_longest_first() -> None:
    env = {"OPENAI_API_KEY": "sk-abcdefgh", "MY_TOKEN": "sk-abcdefgh-longer", "SHORT": "abc",
           "PATH": "/bin"}  # fmt: skip
    secrets = Secrets.from_env(["MY_TOKEN", "SHORT"], env)
    assert secrets.tool_env(env) == {"PATH": "/bin"}
    text = "a sk-abcdefgh-longer b sk-abcdefgh c abc"
    assert secrets.mask(text) == "a [MY_TOKEN masked] b [OPENAI_API_KEY masked] c abc"
