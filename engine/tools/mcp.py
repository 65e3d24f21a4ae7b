"""Tools from MCP servers (`[[mcp]]` in agentdeck.toml), through the official `mcp` SDK.

The room's owner starts each server (a stdio command, or a streamable HTTP URL), lists its
tools and adds them to the registry as `SERVER.TOOL`; they then go through the same gate
as the built-in tools: rules by pattern over their arguments, approvals bound to the
argument hash, deadlines, the result cap, secret masking, the time limit, cancellation
(the SDK tells the server when a call is cancelled). Each is described to the model with
the JSON schema its server gives, under a name the providers accept (`SERVER__TOOL`).

A server's tools ask before they run unless the toml says `approval = "allow"` for it (or
for one of its tools); a tool its server annotates read-only or idempotent is shown so,
and only one annotated idempotent runs again after a crash without a review.

A server that exits or stops answering is started again, with a backoff from one second
to a minute and a notice each time; while it is down its tools stay listed and a call
fails at once, saying why. One that never starts does not stop the runtime: the operator
is told why (a notice, `agentdeck tools`, the tools screen). A stdio server's stderr goes
to `mcp/NAME.log` in the room, never to the terminal. Progress a server reports for a call
is shown as the call's output. Nothing imports the SDK unless a server is configured.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from engine.config import Config, McpSettings
from engine.tools import Tool, ToolArgsError, ToolContext, ToolRegistry, ToolResult

PING_EVERY = 5.0  # seconds between two looks at a server that is up
PING_TIMEOUT = 10.0  # a server that does not answer a look this long is restarted
BACKOFF = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)  # seconds before each restart
PROGRESS_EVERY = 0.25  # at most this often, a call's progress is shown


def _never(**_: Any) -> None:  # an McpTool's `fn`: its calls go to its server
    raise RuntimeError("an MCP tool is called through its server")


@dataclass
class McpTool(Tool):
    """A tool of an MCP server, as the runtime's registry holds it."""

    server: McpServer | None = None
    remote: str = ""  # its name on the server
    input_schema: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False

    def schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "parameters": self.input_schema or {"type": "object"}}  # fmt: skip

    def validate(self, args: Any) -> dict[str, Any]:
        """The arguments, checked against the server's JSON schema (ToolArgsError)."""
        if not isinstance(args, dict):
            raise ToolArgsError(f"arguments must be a JSON object, got {type(args).__name__}")
        from jsonschema import exceptions, validators  # (the SDK's own dependency)

        try:
            cls = validators.validator_for(self.input_schema or {})
            errors = sorted(cls(self.input_schema or {}).iter_errors(args), key=str)
        except exceptions.SchemaError as exc:  # the server's schema is broken: its call
            raise ToolArgsError(
                f"{self.name}: its server's schema is invalid: {exc.message}"
            ) from None
        if errors:
            reasons = "; ".join(f"{'.'.join(map(str, e.absolute_path)) or 'arguments'}: "
                                f"{e.message}" for e in errors[:5])  # fmt: skip
            raise ToolArgsError(f"invalid arguments for {self.name}: {reasons}")
        return dict(args)

    async def call(self, kwargs: dict[str, Any], ctx: ToolContext) -> ToolResult:
        assert self.server is not None
        return await self.server.call(self, kwargs, ctx)


class McpServer:
    """One `[[mcp]]` server: started, listed, watched and started again."""

    def __init__(self, settings: McpSettings, room: Path, workspace: Path, registry: ToolRegistry,
                 notice: Callable[[str, str], None]) -> None:  # fmt: skip
        self.settings, self.room, self.workspace = settings, room, workspace
        self.registry, self.notice = registry, notice
        self.state = "starting"  # starting | up | restarting | failed | stopped
        self.why: str | None = None  # why it is not up
        self.tools: dict[str, McpTool] = {}
        self.restarts = 0
        self.ready = anyio.Event()  # set once its first start succeeded or failed
        self._was_up = False
        self._broken = anyio.Event()  # a call found the server gone (`_watch` pings at once)
        self._client: Any = None

    @property
    def name(self) -> str:
        return self.settings.name

    def describe(self) -> str:
        target = self.settings.url or " ".join([self.settings.command or "", *self.settings.args])
        return target.strip()

    # -- running ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the server up until cancelled."""
        attempt = 0
        while True:
            start = self.settings.start_timeout
            try:
                # the SDK's client holds a task group: the start's deadline is a scope
                # around all of it, lifted once the tools are listed
                with anyio.CancelScope(deadline=anyio.current_time() + start) as starting:
                    async with AsyncExitStack() as stack:
                        client = await self._connect(stack)
                        await self._list(client)
                        starting.deadline = math.inf
                        self._client, self.state, self.why = client, "up", None
                        self._was_up = True
                        self.ready.set()
                        if attempt:
                            self.notice("info", f"MCP server {self.name} is up again "
                                        f"({len(self.tools)} tools)")  # fmt: skip
                        attempt = 0
                        await self._watch(client)
                if starting.cancelled_caught:
                    self.why = f"it did not start and list its tools within {start:g}s"
            except anyio.get_cancelled_exc_class():
                self.state, self._client = "stopped", None
                raise
            except BaseException as exc:  # it did not start, or it died: said, then again
                self._client = None
                self.why = _reason(exc)
            self._client = None
            stopped = self._was_up  # it ran, and stopped; else it never started
            self._was_up = False
            self.state = "restarting" if stopped else "failed"
            self.ready.set()
            wait = BACKOFF[min(attempt, len(BACKOFF) - 1)]
            attempt += 1
            self.restarts += 1 if stopped else 0
            what = "stopped" if stopped else "cannot start"
            self.notice("warning", f"MCP server {self.name} {what}: {self.why}; its tools are "
                        f"unavailable; trying again in {wait:g}s")  # fmt: skip
            await anyio.sleep(wait)
            self.state = "starting"

    async def _connect(self, stack: AsyncExitStack) -> Any:
        from mcp import Client

        s = self.settings
        if s.url is not None:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            headers = {h: _var(var, self.name) for h, var in s.headers.items()}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
            transport = streamable_http_client(s.url, http_client=http)
        else:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            logs = self.room / "mcp"
            logs.mkdir(mode=0o700, exist_ok=True)
            # a small local file, opened once per start (the SDK writes the stderr to it)
            errlog = stack.enter_context(open(logs / f"{self.name}.log", "a"))  # noqa: ASYNC230, SIM115
            cwd = self.workspace if s.cwd is None else (self.room / s.cwd)
            env = {var: _var(var, self.name) for var in s.env}
            params = StdioServerParameters(command=s.command or "", args=list(s.args),
                                           env=env, cwd=cwd)  # fmt: skip
            transport = stdio_client(params, errlog=errlog)
        return await stack.enter_async_context(Client(transport))

    async def _list(self, client: Any) -> None:
        """The server's tools, in the registry under `SERVER.TOOL`."""
        listed, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        for name in list(self.tools):  # a tool it no longer has leaves the registry
            if name not in {f"{self.name}.{t.name}" for t in listed}:
                self.registry.remove(name)
                del self.tools[name]
        for t in listed:
            tool = self._tool(t)
            self.tools[tool.name] = tool
            self.registry.add(tool)

    def _tool(self, listed: Any) -> McpTool:
        notes = listed.annotations
        read_only = bool(notes and notes.read_only_hint)
        idempotent = bool(notes and notes.idempotent_hint)
        policy = self.settings.tools.get(listed.name, self.settings.approval)
        schema = listed.input_schema if isinstance(listed.input_schema, dict) else {}
        return McpTool(
            name=f"{self.name}.{listed.name}", description=listed.description or listed.title or "",
            fn=_never, params=BaseModel, approval="never" if policy == "allow" else "always",
            idempotent=idempotent, meta={"source": self.name}, server=self,
            remote=listed.name, input_schema=schema, read_only=read_only,
        )  # fmt: skip

    async def _watch(self, client: Any) -> None:
        """Return when the server stops answering (its process exited, its URL is gone):
        a look every PING_EVERY seconds, or at once when a call found it gone. The look is
        a listing of its tools, past the SDK's cache: `ping` is gone from the protocol of
        2026-07-28 (servers of that era answer it with an error, or the SDK refuses it)."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED

        self._broken = anyio.Event()
        while True:
            with anyio.move_on_after(PING_EVERY):
                await self._broken.wait()
            self._broken = anyio.Event()
            try:
                with anyio.fail_after(PING_TIMEOUT):
                    await client.list_tools(cache_mode="bypass")
            except MCPError as exc:  # it answered, even with an error: it is there,
                if exc.error.code == CONNECTION_CLOSED:  # unless the connection is gone
                    raise

    # -- calling ----------------------------------------------------------------------------

    async def call(self, tool: McpTool, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        client = self._client
        if client is None:
            return ToolResult.error(f"MCP server {self.name} is {self.state}: {self.why or '?'}")
        limit = min(self.settings.timeout, ctx.time_limit or self.settings.timeout)
        shown = [0.0]

        async def progress(done: float, total: float | None, message: str | None) -> None:
            now = anyio.current_time()
            if ctx.output is None or now - shown[0] < PROGRESS_EVERY:
                return
            shown[0] = now
            part = f"{done:g}/{total:g}" if total else f"{done:g}"
            ctx.output("stdout", f"progress {part}{': ' + message if message else ''}\n".encode())

        try:
            with anyio.move_on_after(limit) as cut:
                result = await client.call_tool(tool.remote, args, read_timeout_seconds=limit,
                                                progress_callback=progress)  # fmt: skip
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # the server failed the request (or went away during it)
            self._broken.set()  # the watcher pings it now, and starts it again if it is gone
            return ToolResult.error(f"{tool.name}: {_reason(exc)}")
        if cut.cancelled_caught:
            return ToolResult.error(f"{tool.name} did not finish within {limit:g}s and was stopped")
        text = _text(result)
        if result.is_error:
            return ToolResult.error(text or f"{tool.name} failed")
        return ToolResult.success(text)


class McpServers:
    """Every `[[mcp]]` server of the room."""

    def __init__(self, settings: list[McpSettings], room: Path, workspace: Path,
                 registry: ToolRegistry, notice: Callable[[str, str], None]) -> None:  # fmt: skip
        self.servers = [McpServer(s, room, workspace, registry, notice) for s in settings]

    @classmethod
    def configured(cls, config: Config, room: Path, workspace: Path, registry: ToolRegistry,
                   notice: Callable[[str, str], None]) -> McpServers | None:  # fmt: skip
        """The room's `[[mcp]]` servers (None: it has none)."""
        return cls(config.mcp, room, workspace, registry, notice) if config.mcp else None

    async def start(self, tg: Any) -> None:
        """Start every server in `tg` and wait until each has listed its tools or failed
        (a turn resumed after a crash then finds its tool, and whether it is idempotent)."""
        for server in self.servers:
            tg.start_soon(server.run)
        for server in self.servers:
            with anyio.move_on_after(server.settings.start_timeout + 1):
                await server.ready.wait()

    def of(self, tool_name: str) -> McpServer | None:
        server, _, _ = tool_name.partition(".")
        return next((s for s in self.servers if s.name == server), None)


def _var(name: str, server: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise LookupError(f"the variable {name} that [[mcp]] {server} names is not set")
    return value


def _reason(exc: BaseException) -> str:
    """An exception as one line an operator reads (a group: its first cause)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    text = re.sub(r"\s+", " ", str(exc)).strip()
    return f"{type(exc).__name__}: {text}"[:500] if text else type(exc).__name__


def _text(result: Any) -> str:
    """A tool result as text the model reads: its text blocks, other blocks named, or its
    structured content as JSON when it has no text."""
    parts = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            inner = getattr(block, "resource", None)
            parts.append(getattr(inner, "text", None) or f"[resource {getattr(inner, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
