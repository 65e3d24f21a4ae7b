"""channels.toml and hooks.toml: the room's channels, validated, their secrets from the env.

`channels.toml` holds the channels the poll loop fetches (telegram), `hooks.toml` those
whose messages arrive as HTTP deliveries (slack, webhook). Each top-level table is one
channel, its key the channel's name:

    [support]                       # hooks.toml
    kind = "slack"
    signing_secret_env = "SLACK_SIGNING_SECRET"
    token_env = "SLACK_BOT_TOKEN"

hooks.toml's top-level `listen = "host:port"` (default 127.0.0.1:8790) and `allow_remote`
say where the hook loop listens. A secret is never written in the file: the file names the environment variable that holds
it, and a channel whose variable is unset or empty does not start. Every error is one line
naming the file, the channel and what is wrong, and never holds a secret's value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from engine.tomlfile import read_toml

CHANNELS_FILE = "channels.toml"
HOOKS_FILE = "hooks.toml"
POLLED = ("telegram",)
HOOKED = ("slack", "webhook")
# Keys that would hold a secret itself, and the key that names its variable instead.
LITERAL_SECRETS = {
    "token": "token_env",
    "bot_token": "token_env",
    "secret": "secret_env",
    "signing_secret": "signing_secret_env",
}
MiB = 1024 * 1024
# hooks.toml's top-level keys that are the listener's, not channels
LISTENER_KEYS = ("listen", "allow_remote")
DEFAULT_LISTEN = "127.0.0.1:8790"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ENV = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
_PATH = r"^[^.\s]+(\.[^.\s]+)*$"


class ChannelConfigError(ValueError):
    """A channel cannot start; the text names the file, the channel and the problem."""


class Secret:
    """A secret's value, with the variable it came from; it never prints its value."""

    __slots__ = ("env", "_value")

    def __init__(self, env: str, value: str) -> None:
        self.env, self._value = env, value

    def reveal(self) -> str:
        """The value itself: for the request that needs it, nothing else."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret(${self.env})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is not pickled")


def _url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+(/\S*)?$", value):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value.rstrip("/")


class _Channel(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    group: str = Field("chat", pattern=_NAME.pattern)
    max_tries: int = Field(8, ge=1, le=10_000)  # delivery attempts before dead
    timeout: float = Field(30.0, gt=0, le=600)  # seconds one request to the service may take
    _source: Path = PrivateAttr(default=Path("."))

    @property
    def source(self) -> Path:
        """The file the channel was read from."""
        return self._source

    def secret(self, key: str, env: Mapping[str, str]) -> Secret:
        """The value of the variable that field `key` names, or ChannelConfigError."""
        var = getattr(self, key)
        value = env.get(var, "")
        if not value.strip():
            state = "is not set" if var not in env else "is empty"
            raise ChannelConfigError(
                f"{self._source}: [{self.name}] {key}: ${var} {state} "
                "(a channel with no secret does not start)"
            )
        return Secret(var, value)


class HookSettings(_Channel):
    max_body: int = Field(MiB, ge=1024, le=64 * MiB)  # bytes of one delivery


class TelegramConfig(_Channel):
    """A Telegram bot, polled with getUpdates."""

    kind: Literal["telegram"]
    token_env: str = Field(pattern=_ENV)
    api_url: str = "https://api.telegram.org"
    poll_timeout: int = Field(30, ge=0, le=600)  # seconds one getUpdates long poll waits

    @field_validator("api_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _url(value)


class SlackConfig(HookSettings):
    """A Slack app: Events API deliveries in, chat.postMessage out."""

    kind: Literal["slack"]
    signing_secret_env: str = Field(pattern=_ENV)
    token_env: str = Field(pattern=_ENV)
    api_url: str = "https://slack.com/api"
    max_age: float = Field(300.0, gt=0, le=3600)  # seconds a request's timestamp may be off

    @field_validator("api_url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return _url(value)


class WebhookConfig(HookSettings):
    """A generic signed webhook: JSON in, JSON POSTed to `deliver_url` out."""

    kind: Literal["webhook"]
    secret_env: str = Field(pattern=_ENV)
    text: str = Field(pattern=_PATH)  # dotted path of the message text in the body
    thread: str = Field(pattern=_PATH)  # dotted path of the conversation's id
    sender: str | None = Field(None, pattern=_PATH)
    signature_header: str = Field("X-Hub-Signature-256", pattern=r"^[A-Za-z0-9-]{1,100}$")
    delivery_header: str = Field("X-GitHub-Delivery", pattern=r"^[A-Za-z0-9-]{1,100}$")
    # GitHub's form signs the body alone: a delivery replayed under a new id is a new
    # message. A sender that can sign more names a header holding Unix seconds here: the
    # signature is then of `<timestamp>.<delivery id>.<body>`, and one older than `max_age`
    # is refused (a replay), as Slack's is.
    timestamp_header: str | None = Field(None, pattern=r"^[A-Za-z0-9-]{1,100}$")
    max_age: float = Field(300.0, gt=0, le=86_400)
    deliver_url: str | None = None

    @field_validator("deliver_url")
    @classmethod
    def _check_deliver(cls, value: str | None) -> str | None:
        return None if value is None else _url(value)


ChannelConfig = Annotated[TelegramConfig | SlackConfig | WebhookConfig, Field(discriminator="kind")]
_ADAPTER: TypeAdapter[TelegramConfig | SlackConfig | WebhookConfig] = TypeAdapter(ChannelConfig)


def read_channels(room_dir: Path) -> list[TelegramConfig | SlackConfig | WebhookConfig]:
    """The channels of `room_dir`'s channels.toml and hooks.toml (none when neither
    exists), or ChannelConfigError. Secrets are not looked up here."""
    found: list[TelegramConfig | SlackConfig | WebhookConfig] = []
    seen: dict[str, Path] = {}
    for file, kinds in ((CHANNELS_FILE, POLLED), (HOOKS_FILE, HOOKED)):
        path = room_dir / file
        for name, table in _read(path).items():
            if file == HOOKS_FILE and name in LISTENER_KEYS:
                continue  # the listener's settings (`hook_listener`), not a channel
            if name in seen:
                raise ChannelConfigError(f"{path}: [{_key(name)}] the name is taken by a "
                                         f"channel in {seen[name]}")  # fmt: skip
            seen[name] = path
            found.append(_channel(path, name, table, kinds))
    return found


def secret_names(room_dir: Path) -> frozenset[str]:
    """The variables the room's channels take their secrets from: every `*_env` field
    (`token_env`, `secret_env`, `signing_secret_env`, and any added later), kept from
    tools and masked in what is stored as a provider key is. ChannelConfigError for a
    malformed file."""
    return secret_names_of(read_channels(room_dir))


def secret_names_of(configs: Iterable[BaseModel]) -> frozenset[str]:
    """The `*_env` variables these channel configs name."""
    return frozenset(str(value) for config in configs
                     for name, value in config if name.endswith("_env") and value)  # fmt: skip


def delivering(room_dir: Path) -> frozenset[str]:
    """The channels whose turns' answers go back out: all but a webhook with no
    `deliver_url` (it only brings messages in). ChannelConfigError for a malformed file."""
    return frozenset(c.name for c in read_channels(room_dir)
                     if not isinstance(c, WebhookConfig) or c.deliver_url)  # fmt: skip


def hook_listener(room_dir: Path) -> tuple[str, str | None]:
    """Where the hook loop listens: hooks.toml's top-level `listen` ("host:port", default
    DEFAULT_LISTEN) and `allow_remote` (a host beyond loopback it may bind), or
    ChannelConfigError."""
    path = room_dir / HOOKS_FILE
    data = _read(path)
    listen, allow = data.get("listen", DEFAULT_LISTEN), data.get("allow_remote")
    if not isinstance(listen, str) or not re.fullmatch(r"\[?[0-9A-Za-z.:-]+\]?:\d{1,5}", listen):
        raise ChannelConfigError(f'{path}: listen: give "host:port", such as "{DEFAULT_LISTEN}"')
    if allow is not None and not isinstance(allow, str):
        raise ChannelConfigError(f"{path}: allow_remote: give the host, as a string")
    return listen, allow


def _read(path: Path) -> dict[str, Any]:
    return read_toml(path, ChannelConfigError)


def _channel(
    path: Path, name: str, table: Any, kinds: tuple[str, ...]
) -> TelegramConfig | SlackConfig | WebhookConfig:
    where = f"{path}: [{_key(name)}]"
    if not isinstance(table, dict):
        raise ChannelConfigError(f"{where} must be a table (one channel, its name the key)")
    if not _NAME.fullmatch(name):
        raise ChannelConfigError(f"{where} a channel's name is 1-64 letters, digits, "
                                 "'_', '.' or '-', starting with a letter or digit")  # fmt: skip
    for key in table:
        if key in LITERAL_SECRETS:
            raise ChannelConfigError(
                f"{where} {_key(key)}: a secret is never written in the file; put it in "
                f'an environment variable and name that with {LITERAL_SECRETS[key]} = "..."'
            )
    kind = table.get("kind")
    if kind is None:
        raise ChannelConfigError(f"{where} kind is missing ({' or '.join(kinds)})")
    if kind not in kinds:
        other = HOOKS_FILE if kind in HOOKED else CHANNELS_FILE
        known = kind in POLLED + HOOKED
        why = f"belongs in {other}" if known else "is not a channel kind"
        raise ChannelConfigError(f"{where} kind {_key(str(kind))} {why} "
                                 f"({path.name} holds {' or '.join(kinds)})")  # fmt: skip
    if "name" in table:
        raise ChannelConfigError(f"{where} name: the table's key is the channel's name")
    try:
        config = _ADAPTER.validate_python({**table, "name": name})
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(_key(p) for p in e['loc'][1:]) or 'kind'}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ChannelConfigError(f"{where} {reasons}") from None
    config._source = path
    return config


def _key(part: str | int) -> str:
    """A key as an error names it: quoted when it is not plain text."""
    if isinstance(part, int):
        return str(part + 1)
    plain = part.isprintable() and part.strip() == part != "" and len(part) <= 64
    return part if plain else json.dumps(part[:64])
