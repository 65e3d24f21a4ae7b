"""agentdeck.toml: the room's settings, validated, with a clear error for a bad file."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from engine.config_retention import RetentionConfig
from engine.domain.instructions import MAX_PART
from engine.domain.rules import Rule, check_pattern
from engine.tomlfile import ConfigError, read_toml


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class StoreConfig(_Section):
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    # PostgreSQL instead of the room's execution.db (engine/store/select.py); never with a
    # password in it (AGENTDECK_STORE_URL, PGPASSFILE or a service file hold that).
    url: str | None = None


class ClusterConfig(_Section):
    """One worker of several sharing the store's PostgreSQL database (engine/cluster)."""

    enabled: bool = False
    worker: str | None = Field(None, min_length=1, max_length=100)  # None: host-pid
    # How long a worker's lease on a thread lasts without a heartbeat: the time another
    # worker waits before it takes a dead worker's threads over. Heartbeats come 3 a lease.
    lease_seconds: float = Field(15.0, ge=0.5, le=3600.0)


class PriceSettings(_Section):
    """A model's price in US dollars per million tokens (`[model] price`): over the price
    table's (engine/providers/prices.py), and the only one a model missing from it has."""

    input: float = Field(ge=0, le=1_000_000)
    output: float = Field(ge=0, le=1_000_000)
    cached: float | None = Field(None, ge=0, le=1_000_000)  # input read from cache (None: input)


class LimitSettings(_Section):
    """A budget: at most `tokens` (in + out) and at most `cost` US dollars."""

    tokens: int | None = Field(None, ge=0, le=10**15)
    cost: float | None = Field(None, ge=0, le=10**9)


class BudgetConfig(_Section):
    """`[budget]`: what a turn may spend, and each thread and the room per (UTC) day; a
    group's is `[groups.NAME] budget`. Raised from the console or `agentdeck budget`."""

    turn: LimitSettings | None = None
    thread: LimitSettings | None = None
    room: LimitSettings | None = None


class ModelConfig(_Section):
    provider: Literal["offline", "openai", "anthropic"] | None = None
    model: str | None = None
    base_url: str | None = None
    offline_delay: float = Field(0.0, ge=0.0, le=5.0)  # seconds between streamed pieces
    # The model's context window in tokens; None: the provider's documented one for its
    # model name (engine/providers/windows.py), the offline model's OFFLINE_WINDOW.
    context_window: int | None = Field(None, ge=256, le=100_000_000)
    compact_at: float = Field(0.8, gt=0.1, le=1.0)  # of the window: a request past it compacts
    key_env: str | None = Field(None, min_length=1, max_length=256)  # the key's variable
    # Deadlines of one HTTP request to a model (each retry gets its own), in seconds.
    connect_timeout: float = Field(10.0, gt=0, le=600)  # to open the connection
    read_timeout: float = Field(60.0, gt=0, le=3600)  # the longest gap between bytes
    request_timeout: float = Field(600.0, gt=0, le=86400)  # from sending to the last byte
    retry_after_max: float = Field(60.0, ge=0, le=3600)  # a longer Retry-After fails instead
    # Bytes of one server-sent event from the model, and of any line of its stream.
    max_event_bytes: int = Field(8 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024)
    price: PriceSettings | None = None  # None: the price table's (or none)


class GroupSettings(_Section):
    priority: int | None = Field(None, ge=-1_000_000, le=1_000_000)
    max_running_turns: int | None = Field(None, ge=0, le=1000)
    max_queued_turns: int | None = Field(None, ge=1, le=1_000_000)
    overflow_policy: Literal["reject", "drop_oldest", "replace_pending"] | None = None
    coalesce: Literal["none", "keep_pending", "newest"] | None = None
    paused: bool | None = None
    strategy: Literal["react", "direct", "plan_execute"] | None = None
    instructions: str | None = Field(None, max_length=MAX_PART)  # the group's agents are told
    model: ModelConfig | None = None  # its own model: [groups.NAME.model], over [model]
    budget: LimitSettings | None = None  # what the group's turns may spend per (UTC) day


class ThreadSettings(_Section):
    strategy: Literal["react", "direct", "plan_execute"] | None = None
    instructions: str | None = Field(None, max_length=MAX_PART)  # an operator's set ones win
    model: ModelConfig | None = None  # its own model: [threads."ID".model], over the group's


class AgentConfig(_Section):
    """What every turn's agent is told (engine/domain/instructions.py for the order)."""

    instructions: str | None = Field(None, max_length=MAX_PART)
    file: str = Field("AGENTS.md", min_length=1, max_length=4096)  # in the room; relative


class RuntimeConfig(_Section):
    max_running_turns: int = Field(8, ge=1, le=1000)
    tool_concurrency: int = Field(4, ge=1, le=64)
    max_rounds: int = Field(25, ge=1, le=100_000)
    plan_max_rounds: int = Field(
        5, ge=1, le=10_000
    )  # plan_execute: planning rounds before answering
    turn_timeout: float = Field(900.0, gt=0)
    max_consecutive_errors: int = Field(5, ge=1, le=100_000)
    # Seconds a shell command may run when the model gives no timeout (the shell tool's
    # own bound is 3600; tool_timeout, below, still cuts a call that takes longer).
    shell_timeout: float = Field(30.0, gt=0, le=3600)
    # Seconds one tool call may take before it ends with an error; per tool name below.
    tool_timeout: float = Field(600.0, gt=0, le=86400)
    tool_timeouts: dict[str, Annotated[float, Field(gt=0, le=86400)]] = Field(default_factory=dict)
    # Bytes of a tool call's result (or error) as stored and shown to the model; more is cut.
    max_result_bytes: int = Field(128_000, ge=1024, le=64 * 1024 * 1024)
    # Bytes of idle threads' conversations kept in memory (estimated); past it the least
    # recently used leave and are read again when a turn needs one (0: only those in use).
    conversation_cache_bytes: int = Field(64 * 1024 * 1024, ge=0, le=1024**4)
    # Variables tool processes never get and results never show (besides the provider keys).
    secret_env: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        default_factory=list
    )


class PulseConfig(_Section):
    interval: float = Field(1.0, gt=0)  # seconds between scans of tasks/, chores/, will.md
    will_interval: float = Field(3600.0, gt=0)  # a will turn at least this often
    agent: str = Field("agent", min_length=1)  # the will's thread is will:<agent>
    # Bytes a file may have; a larger one is reported and not read (a task's text is copied
    # into its request, turn, message and events, so this also bounds what one costs).
    max_task_bytes: int = Field(262_144, ge=1, le=64 * 1_048_576)
    max_chore_bytes: int = Field(65_536, ge=1, le=64 * 1_048_576)
    max_will_bytes: int = Field(262_144, ge=1, le=64 * 1_048_576)


class ServerConfig(_Section):
    """The room's API: always on a Unix socket in the room; TCP only when `listen` is set."""

    listen: str | None = None  # "127.0.0.1:8700": loopback TCP, every request needs the token
    allow_remote: str | None = None  # the non-loopback host `listen` may name, opted in by name
    max_body: int = Field(1_048_576, ge=1024, le=64 * 1_048_576)  # bytes of one request body
    event_buffer: int = Field(10_000, ge=100, le=1_000_000)  # events kept for reconnects

    @field_validator("listen")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            split_listen(value)
        return value


class BusConfig(_Section):
    """`[bus]`: the bus projection several rooms of a machine may share (engine/services/projector.py)."""

    path: str | None = None  # default <room>/bus/events.db; relative: to the room
    every: float = Field(1.0, gt=0, le=3600)  # seconds between catch-ups when nothing pokes


class ChannelDelivery(_Section):
    max_tries: int | None = Field(None, ge=1, le=1000)


class DeliveryConfig(_Section):
    """`[delivery]`: how answers go out to channels (engine/services/delivery.py)."""

    max_tries: int = Field(8, ge=1, le=1000)  # then the answer is dead (an operator may retry)
    channels: dict[str, ChannelDelivery] = Field(default_factory=dict)  # max_tries per channel
    timeout: float = Field(30.0, gt=0, le=3600)  # seconds one try may take
    backoff: float = Field(1.0, gt=0, le=3600)  # seconds before the first retry (at most)
    backoff_cap: float = Field(300.0, gt=0, le=86400)  # the longest wait between tries
    concurrency: int = Field(8, ge=1, le=256)  # answers in flight (one per thread)

    def tries_for(self, channel: str) -> int:
        settings = self.channels.get(channel)
        return settings.max_tries if settings and settings.max_tries else self.max_tries


def split_listen(listen: str) -> tuple[str, int]:
    """`host:port` (IPv6 in brackets) as a pair; ValueError saying what is wrong."""
    host, sep, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"listen must be HOST:PORT (e.g. 127.0.0.1:8700), not {listen!r}")
    return host, int(port)


class RuleSettings(_Section):
    """One `[[rules]]` entry: engine/domain/rules.py says how its pattern matches."""

    effect: Literal["allow", "ask", "deny"]
    tool: str = Field(min_length=1, max_length=200)
    pattern: str | None = None  # left out: any arguments
    scope: Literal["once", "thread", "room"] = "room"
    thread: str | None = Field(None, min_length=1)  # a thread rule's thread
    expires: datetime | date | None = None  # a TOML date or time; a local one is this host's
    reason: str = ""
    # an allow rule for shell: the commands it allows reach the network from the sandbox
    network: bool = False

    @model_validator(mode="after")
    def _valid(self) -> RuleSettings:
        if self.network and (self.effect != "allow" or self.tool != "shell"):
            raise ValueError(
                "network = true is for an allow rule of shell: the commands it "
                "allows reach the network from the sandbox"
            )
        if self.scope == "thread" and self.thread is None:
            raise ValueError('a thread rule names its thread: thread = "..."')
        if self.scope == "room" and self.thread is not None:
            raise ValueError('a room rule names no thread (scope = "thread" does)')
        check_pattern(self.tool, self.pattern)
        if self.expires is not None:
            self._expires_at()  # a time this host cannot count in seconds is refused here
        return self

    def _expires_at(self) -> float | None:
        when = self.expires
        if when is None:
            return None
        if isinstance(when, date) and not isinstance(when, datetime):
            when = datetime(when.year, when.month, when.day)
        try:
            return when.timestamp()
        except (ValueError, OverflowError, OSError):  # year 1 in a zone west of UTC, say
            raise ValueError(f"expires: {self.expires} is out of the range of times this host "
                             "counts; give a date from 1971 to 9999") from None  # fmt: skip

    def as_rule(self, number: int) -> Rule:
        """The rule, numbered as in the file from 1."""
        return Rule(id=f"toml:{number}", source="toml", tool=self.tool, effect=self.effect,
                    pattern=self.pattern, scope=self.scope, thread_id=self.thread,
                    made_by="agentdeck.toml", expires_at=self._expires_at(),
                    reason=self.reason, network=self.network)  # fmt: skip


DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DEADLINE = 30 * 86400.0  # seconds: a longer wait is no deadline


def parse_duration(value: object) -> float:
    """Seconds of a duration as agentdeck.toml writes it ("90s", "10m", "2h", "1h30m", or
    a number of seconds); "none" is no deadline (math.inf). ValueError saying what is
    wrong otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip().lower() in ("none", "off"):
        return math.inf
    elif isinstance(value, str) and (parts := _DURATION.fullmatch(value.strip().lower())):
        seconds = sum(float(n) * DURATION_UNITS[u]
                      for n, u in _DURATION_PART.findall(parts.group(0)))  # fmt: skip
    else:
        raise ValueError(f'a duration is like "90s", "10m", "2h" or "1h30m", not {value!r}')
    if not 0 < seconds <= MAX_DEADLINE:
        raise ValueError(f"a duration is more than 0 and at most 30 days, not {value!r}")
    return seconds


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?\s*[smhd]\s*)+")

Duration = Annotated[float, BeforeValidator(parse_duration)]
OnDeadline = Literal["cancel", "approve"]


class DeadlineSettings(_Section):
    """How long a call of one tool (or one thread group) may wait for a decision."""

    deadline: Duration | None = None  # left out: the next less specific one applies
    on_deadline: OnDeadline | None = None


class ApprovalsConfig(_Section):
    """`[approvals]`: deadlines of suspended calls (engine.services.deadlines). The most specific
    applies: `[approvals.tools.NAME]`, then `[approvals.groups.NAME]`, then this one."""

    deadline: Duration | None = None  # none: a call waits as long as it takes
    on_deadline: OnDeadline = "cancel"  # what the deadline decides
    tools: dict[str, DeadlineSettings] = Field(default_factory=dict)
    groups: dict[str, DeadlineSettings] = Field(default_factory=dict)

    @property
    def any_deadline(self) -> bool:
        """Whether some call may have a deadline (else nothing needs watching)."""
        more = [*self.tools.values(), *self.groups.values()]
        return self.deadline is not None or any(s.deadline is not None for s in more)


class SandboxConfig(_Section):
    """`[sandbox]`: what shell commands may touch (engine/shell/sandbox.py)."""

    shell: Literal["workspace-write", "read-only", "off"] = "workspace-write"
    network: bool = False  # commands reach the network (else only per decision)


ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
Env = Annotated[str, Field(pattern=ENV_NAME)]


class McpSettings(_Section):
    """`[[mcp]]`: an MCP server whose tools the agent gets (engine/tools/mcp.py), named
    `NAME.TOOL`. A stdio server (`command`, `args`, `cwd`) or a streamable HTTP one
    (`url`); what it is given of the environment is only the variables `env` names (and
    HTTP `headers`: header name -> the variable holding its value)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,31}$")
    command: str | None = Field(None, min_length=1, max_length=4096)
    args: list[Annotated[str, Field(max_length=4096)]] = Field(default_factory=list)
    cwd: str | None = Field(None, max_length=4096)  # relative: to the room (default: workspace)
    env: list[Env] = Field(default_factory=list)
    url: str | None = Field(None, pattern=r"^https?://", max_length=4096)
    headers: dict[str, Env] = Field(default_factory=dict)
    # Whether its tools ask before they run (`ask`, the default) or run unasked (`allow`,
    # for a server the operator trusts); per tool over it. Rules apply either way.
    approval: Literal["ask", "allow"] = "ask"
    tools: dict[str, Literal["ask", "allow"]] = Field(default_factory=dict)
    timeout: float = Field(60.0, gt=0, le=86400)  # seconds one call may take
    start_timeout: float = Field(20.0, gt=0, le=600)  # to start and list its tools

    @model_validator(mode="after")
    def _one_transport(self) -> McpSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"[[mcp]] {self.name}: give a command (stdio) or a url (HTTP), one")
        if self.url is not None and (self.args or self.cwd or self.env):
            raise ValueError(f"[[mcp]] {self.name}: args, cwd and env are a stdio server's")
        if self.command is not None and self.headers:
            raise ValueError(f"[[mcp]] {self.name}: headers are an HTTP server's")
        return self


class ConsoleConfig(_Section):
    """`[console]`: how the console asks for attention when a call starts waiting."""

    bell: bool = True  # ring the terminal bell
    # a desktop notification by escape sequence: "auto" picks by the terminal (engine
    # leaves it to the console), "osc9", "osc777", or "off"
    desktop_notify: Literal["auto", "osc9", "osc777", "off"] = "auto"


class Config(_Section):
    store: StoreConfig = Field(default_factory=StoreConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    groups: dict[str, GroupSettings] = Field(default_factory=dict)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    threads: dict[str, ThreadSettings] = Field(default_factory=dict)
    pulse: PulseConfig = Field(default_factory=PulseConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    rules: list[RuleSettings] = Field(default_factory=list)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)
    console: ConsoleConfig = Field(default_factory=ConsoleConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    mcp: list[McpSettings] = Field(default_factory=list)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)  # config_retention.py

    @model_validator(mode="after")
    def _mcp_names(self) -> Config:
        names = [m.name for m in self.mcp]
        if len(names) != len(set(names)):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"[[mcp]] names must differ: {', '.join(twice)} given twice")
        return self

    bus: BusConfig = Field(default_factory=BusConfig)
    delivery: DeliveryConfig = Field(default_factory=DeliveryConfig)


def toml_rules(config: Config, path: Path, tools: Iterable[str]) -> list[Rule]:
    """The file's rules; ConfigError when one names a tool the runtime does not have (a
    typo would leave a deny rule that never applies)."""
    known = sorted(tools)
    servers = tuple(f"{m.name}." for m in config.mcp)  # their tools are listed once they run
    for number, rule in enumerate(config.rules, 1):
        if rule.tool not in known and not rule.tool.startswith(servers):
            raise ConfigError(f"{path}: [rules.{number}] unknown tool {rule.tool!r} "
                              f"(tools: {', '.join(known)})")  # fmt: skip
    return [rule.as_rule(number) for number, rule in enumerate(config.rules, 1)]


def check_approvals(config: Config, path: Path, tools: Iterable[str],
                    groups: Iterable[str]) -> None:  # fmt: skip
    """ConfigError when `[approvals]` names a tool or thread group the runtime does not
    have (a typo would leave a deadline that never applies)."""
    for what, known, named in (("tools", sorted(tools), config.approvals.tools),
                               ("groups", sorted(groups), config.approvals.groups)):  # fmt: skip
        for name in named:
            if name not in known and not (what == "tools" and name.startswith(
                    tuple(f"{m.name}." for m in config.mcp))):  # fmt: skip
                raise ConfigError(f"{path}: [approvals.{what}.{_key(name)}] unknown "
                                  f"{what[:-1]} {name!r} ({what}: {', '.join(known)})")  # fmt: skip


_M = TypeVar("_M", bound=BaseModel)


def load_config(path: Path) -> Config:
    """Read `path` (a missing file means defaults) or raise ConfigError saying what is wrong."""
    return _validated(path, Config, read_toml(path))


def load_section(path: Path, name: str, model: type[_M]) -> _M:
    """Only the section `name` of `path` (its defaults when the file has none): what a
    command that reads the room needs, without validating (and building the models of)
    the rest of the file."""
    return _validated(path, model, read_toml(path).get(name, {}), (name,))


def _validated(path: Path, model: type[_M], data: object, at: tuple[str, ...] = ()) -> _M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        reasons = "; ".join(
            f"[{'.'.join(map(_key, (*at, *e['loc'])))}] {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigError(f"{path}: {reasons}") from None


def _key(part: str | int) -> str:
    """A key of the file as an error names it: quoted when it is not plain text (a key
    holding a newline must not break the one-line message); an item of a list by its
    number from 1 (`[rules.1]` is the file's first `[[rules]]`)."""
    if isinstance(part, int):
        return str(part + 1)
    plain = part.isprintable() and part.strip() == part != ""
    return part if plain else json.dumps(part)
