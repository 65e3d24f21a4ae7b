"""channels.toml and hooks.toml: channels read, bad files and missing secrets refused in
one line that names the file and the channel, secrets never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.channels import (
    ChannelConfigError,
    HookChannel,
    PollChannel,
    SlackChannel,
    TelegramChannel,
    WebhookChannel,
    load_channels,
)
from engine.channels.config import Secret, read_channels

TOKEN = "123456:telegram-token-value"
ENV = {
    "TELEGRAM_BOT_TOKEN": TOKEN,
    "SLACK_SIGNING_SECRET": "slack-signing-secret-value",
    "SLACK_BOT_TOKEN": "xoxb-slack-token-value",
    "HOOK_SECRET": "hook-secret-value",
}
CHANNELS = """
[bot]
kind = "telegram"
token_env = "TELEGRAM_BOT_TOKEN"
group = "support"
"""
HOOKS = """
[team]
kind = "slack"
signing_secret_env = "SLACK_SIGNING_SECRET"
token_env = "SLACK_BOT_TOKEN"
api_url = "http://127.0.0.1:9/api/"

[gh]
kind = "webhook"
secret_env = "HOOK_SECRET"
text = "comment.body"
thread = "issue.number"
sender = "sender.login"
deliver_url = "https://example.com/answers"
max_body = 2048
"""


def room(tmp_path: Path, channels: str | None = CHANNELS, hooks: str | None = HOOKS) -> Path:
    if channels is not None:
        (tmp_path / "channels.toml").write_text(channels, encoding="utf-8")
    if hooks is not None:
        (tmp_path / "hooks.toml").write_text(hooks, encoding="utf-8")
    return tmp_path


def error(tmp_path: Path, env: dict[str, str] = ENV, **files: str | None) -> str:
    with pytest.raises(ChannelConfigError) as caught:
        load_channels(room(tmp_path, **files), env)
    text = str(caught.value)
    assert "\n" not in text
    for secret in ENV.values():
        assert secret not in text
    return text


@pytest.mark.anyio
async def test_both_files_make_channels(tmp_path: Path) -> None:
    channels = load_channels(room(tmp_path), ENV)
    by_name = {c.name: c for c in channels}
    assert [type(c) for c in channels] == [TelegramChannel, SlackChannel, WebhookChannel]
    bot, team, gh = by_name["bot"], by_name["team"], by_name["gh"]
    assert isinstance(bot, PollChannel) and not isinstance(bot, HookChannel)
    assert isinstance(team, HookChannel) and isinstance(gh, HookChannel)
    assert (bot.kind, bot.group, bot.max_tries) == ("telegram", "support", 8)
    assert bot.config.api_url == "https://api.telegram.org"
    assert (team.group, team.config.api_url) == ("chat", "http://127.0.0.1:9/api")
    assert team.config.max_body == 1024 * 1024 and team.config.max_age == 300
    assert gh.config.max_body == 2048 and gh.config.sender == "sender.login"
    assert gh.config.signature_header == "X-Hub-Signature-256"
    assert gh.config.delivery_header == "X-GitHub-Delivery"
    for channel in channels:
        assert TOKEN not in repr(channel) and TOKEN not in repr(vars(channel))
        await channel.aclose()


def test_no_files_no_channels(tmp_path: Path) -> None:
    assert load_channels(tmp_path, {}) == []


def test_secret_never_prints() -> None:
    secret = Secret("TELEGRAM_BOT_TOKEN", TOKEN)
    assert TOKEN not in repr(secret) and TOKEN not in str(secret) and TOKEN not in f"{secret}"
    assert "TELEGRAM_BOT_TOKEN" in repr(secret)
    assert secret.reveal() == TOKEN


@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_channel_without_its_secret_does_not_start(tmp_path: Path, value: str | None) -> None:
    env = {k: v for k, v in ENV.items() if k != "HOOK_SECRET"}
    if value is not None:
        env["HOOK_SECRET"] = value
    text = error(tmp_path, env)
    assert "hooks.toml: [gh] secret_env: $HOOK_SECRET" in text
    assert "does not start" in text


@pytest.mark.parametrize(
    ("key", "hint"),
    [("token", "token_env"), ("secret", "secret_env"), ("signing_secret", "signing_secret_env")],
)
def test_a_literal_secret_is_refused(tmp_path: Path, key: str, hint: str) -> None:
    hooks = HOOKS + f'{key} = "literal-secret-in-file"\n'
    text = error(tmp_path, hooks=hooks)
    assert f"hooks.toml: [gh] {key}: a secret is never written in the file" in text
    assert hint in text and "literal-secret-in-file" not in text


@pytest.mark.parametrize(
    ("channels", "hooks", "expected"),
    [
        ("[bot\nkind=", None, "channels.toml: not valid TOML"),
        (None, "[gh]\nkind = 'webhook'\nsecret_env = 'HOOK_SECRET'\nthread = 'a'\n",
         "hooks.toml: [gh] text: Field required"),
        ("[bot]\nkind = 'slack'\n", None, "channels.toml: [bot] kind slack belongs in hooks.toml"),
        (None, "[bot]\nkind = 'telegram'\n", "hooks.toml: [bot] kind telegram belongs in channels.toml"),
        (None, "[x]\nkind = 'irc'\n", "[x] kind irc is not a channel kind"),
        (None, "[x]\nsecret_env = 'HOOK_SECRET'\n", "[x] kind is missing"),
        ("answer = 42\n", None, "channels.toml: [answer] must be a table"),
        ("[bot]\nkind='telegram'\ntoken_env='T'\ncolour='red'\n", None,
         "[bot] colour: Extra inputs are not permitted"),
        ("[bot]\nkind='telegram'\ntoken_env='not a name'\n", None, "[bot] token_env: String should match"),
        ("[bot]\nkind='telegram'\ntoken_env='T'\napi_url='ftp://x'\n", None, "[bot] api_url:"),
        ('["a:b"]\nkind=\'telegram\'\ntoken_env=\'T\'\n', None, "a channel's name is"),
        (CHANNELS, CHANNELS.replace("telegram", "slack"), "[bot] the name is taken"),
        (None, HOOKS.replace("2048", "-1"), "[gh] max_body: Input should be greater"),
        (None, HOOKS.replace('"comment.body"', '"comment..body"'), "[gh] text: String should"),
    ],
)  # fmt: skip
def test_a_bad_file_is_one_clear_line(
    tmp_path: Path, channels: str | None, hooks: str | None, expected: str
) -> None:
    assert expected in error(tmp_path, channels=channels, hooks=hooks)


def test_a_file_that_is_not_text(tmp_path: Path) -> None:
    (tmp_path / "hooks.toml").write_bytes(b"\xff\xfe[gh]")
    with pytest.raises(ChannelConfigError, match="hooks.toml: not valid TOML"):
        read_channels(tmp_path)


def test_channels_read_without_secrets(tmp_path: Path) -> None:
    """The console can list channels without the environment that holds their secrets."""
    names = [c.name for c in read_channels(room(tmp_path))]
    assert names == ["bot", "team", "gh"]
