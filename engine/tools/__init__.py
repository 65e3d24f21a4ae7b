"""Tools: typed Python functions the model can call, their results and approval policy.

A tool's parameters come from its signature; pydantic validates the model's arguments and
produces the JSON schema the model sees. A parameter annotated `ToolContext` is filled by
the runtime and hidden from the model.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_type_hints

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from engine.tools.redact import Secrets

if TYPE_CHECKING:
    from engine.shell.sandbox import Choice, Sandbox

Approval = Literal["never", "always"] | Callable[[dict[str, Any]], bool]

RESULT_CAP = 128_000  # bytes of a result's text, unless [runtime] max_result_bytes says
NOTE_ROOM = 512  # bytes a tool leaves below the cap for its own note and JSON around it


class ToolResult(BaseModel):
    """What a tool returns: success, warning, error, or pending (suspend for a decision)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    status: Literal["success", "warning", "error", "pending"]
    content: Any = None
    message: str = ""

    @classmethod
    def success(cls, content: Any = None) -> ToolResult:
        return cls(status="success", content=content)

    @classmethod
    def warning(cls, content: Any, message: str) -> ToolResult:
        return cls(status="warning", content=content, message=message)

    @classmethod
    def error(cls, message: str, content: Any = None) -> ToolResult:
        return cls(status="error", content=content, message=message)

    @classmethod
    def pending(cls, message: str = "waiting for a decision") -> ToolResult:
        return cls(status="pending", message=message)

    def text(self) -> str:
        """The result as the model reads it."""
        import json

        if self.status == "error":
            return f"error: {self.message}"
        if self.status == "pending":
            return f"pending: {self.message}"
        body = (
            self.content
            if isinstance(self.content, str)
            else json.dumps(self.content, default=str, ensure_ascii=False)
        )
        return f"{body}\nwarning: {self.message}" if self.status == "warning" else body


@dataclass(frozen=True)
class ToolContext:
    """What the runtime hands a tool about where and why it runs."""

    workspace: Path
    call_id: str = ""
    thread_id: str = ""
    turn_id: str = ""
    time_limit: float | None = None  # seconds the call may take ([runtime] tool_timeout)
    shell_timeout: float = 30.0  # a shell command's, when the call gives none ([runtime])
    max_result_bytes: int = RESULT_CAP  # the result's text is cut to this ([runtime])
    env: Mapping[str, str] | None = None  # for processes the tool starts; None: see process_env
    # Records, durably, a process group the tool started (pgid, command, ...) in the call's
    # meta before the tool lets it run, so a runtime that died meanwhile leaves it findable
    # (engine.tools.orphans). None: nothing records (a tool called outside a turn).
    started: Callable[[dict[str, Any]], Awaitable[None]] | None = None
    # What a streaming tool's process prints, as it prints it ("stdout" or "stderr", the
    # bytes), for those who watch the call (engine/turn/output.py). Sync and quick; None:
    # nobody watches (a tool called outside a turn).
    output: Callable[[Literal["stdout", "stderr"], bytes], None] | None = None
    # The run's shell sandbox (engine/shell/sandbox.py; None: none) and how this call runs
    # under it: as the room says, with the network, or outside it (an operator's decision).
    sandbox: Sandbox | None = None
    sandbox_choice: Choice = "default"

    def process_env(self) -> dict[str, str]:
        """The environment for a process the tool starts: `env`, or by default this
        process's without the provider keys."""
        return dict(self.env) if self.env is not None else Secrets.from_env().tool_env()

    @property
    def content_cap(self) -> int:
        """Bytes of content a tool should produce at most: what fits under the result cap
        with room left for the tool's own note, so the runtime's cut never hides it."""
        return max(self.max_result_bytes - NOTE_ROOM, 1)

    def resolve(self, path: str) -> Path:
        """Resolve `path` inside the workspace; raise ToolError if it escapes.

        A check of the name only: what the name points to can change before it is opened.
        The built-in file tools open through `engine.tools.workspace`, which cannot be raced.
        """
        root = self.workspace.resolve()
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise ToolError(f"path {path!r} is outside the workspace ({root})")
        return target


def cut_to(text: str, limit: int) -> str:
    """`text` if it is at most `limit` bytes of UTF-8; else its beginning and a note the
    model reads saying what was cut, `limit` bytes in all."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    note = f"\n[cut by the runtime: the result was {len(data):,} bytes; it is kept to {limit:,}]"
    keep = max(limit - len(note.encode()), 0)
    return data[:keep].decode("utf-8", "ignore") + note  # a character cut in two is dropped


class ToolError(Exception):
    """Raised by a tool for an expected failure; becomes an error result the model sees."""


class ToolArgsError(ValueError):
    """The model's arguments did not validate; the text says which and why."""


@dataclass
class Tool:
    """A callable the model may use, with its schema, approval policy and idempotency."""

    name: str
    description: str
    fn: Callable[..., Any]
    params: type[BaseModel]
    context_param: str | None = None
    approval: Approval = "never"
    idempotent: bool = False
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def streams(self) -> bool:
        """Whether the tool hands what it prints to `ToolContext.output` as it runs."""
        return bool(self.meta.get("streams"))

    @property
    def quick(self) -> bool:
        """Whether the tool, though sync, runs on the event loop: it never blocks and its
        work is bounded to microseconds (the calculator), so a worker thread would cost
        more than the call (two thread switches, each waiting for the interpreter)."""
        return bool(self.meta.get("quick"))

    def schema(self) -> dict[str, Any]:
        """The tool as the model sees it: name, description, JSON schema of parameters."""
        params = self.params.model_json_schema()
        params.pop("title", None)
        return {"name": self.name, "description": self.description, "parameters": params}

    def validate(self, args: Any) -> dict[str, Any]:
        """Validate raw arguments into keyword arguments, or raise ToolArgsError."""
        if not isinstance(args, dict):
            raise ToolArgsError(f"arguments must be a JSON object, got {type(args).__name__}")
        try:
            model = self.params.model_validate(args)
        except ValidationError as exc:
            reasons = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolArgsError(f"invalid arguments for {self.name}: {reasons}") from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def needs_approval(self, args: dict[str, Any]) -> bool:
        """Apply the approval policy to validated arguments."""
        if self.approval == "never":
            return False
        if self.approval == "always":
            return True
        return bool(self.approval(args))

    async def call(self, kwargs: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the tool within `ctx.time_limit`; exceptions and the limit become errors.

        Sync functions run in a worker thread (but `quick` ones). A thread cannot be killed:
        past the limit it is abandoned (it finishes, or not, on its own) and the call ends
        anyway.
        """
        if self.context_param:
            kwargs = {**kwargs, self.context_param: ctx}
        try:
            if inspect.iscoroutinefunction(self.fn):
                with anyio.move_on_after(ctx.time_limit) as limit:
                    value = await self.fn(**kwargs)
            elif self.quick:  # (bounded: no limit to keep)
                limit = None
                value = self.fn(**kwargs)
            else:
                # Shielded: a cancelled turn still waits for a thread that started (its work
                # happens anyway, so its result is recorded), but not past the time limit.
                with anyio.CancelScope(shield=True), anyio.move_on_after(ctx.time_limit) as limit:
                    value = await anyio.to_thread.run_sync(
                        lambda: self.fn(**kwargs), abandon_on_cancel=True
                    )
        except ToolError as exc:
            return ToolResult.error(str(exc))
        except Exception as exc:  # a tool that raises is a failed call, not a failed turn
            return ToolResult.error(f"{self.name} raised {type(exc).__name__}: {exc}")
        if limit is not None and limit.cancelled_caught:
            return ToolResult.error(
                f"{self.name} did not finish within its time limit ({ctx.time_limit:g}s) and"
                " was stopped"
            )
        result = value if isinstance(value, ToolResult) else ToolResult.success(value)
        try:
            result.text()  # what the call keeps; made again then, but it must be makeable now
        except Exception as exc:  # a 4,301-digit integer, absurd nesting, a __str__ that raises
            return ToolResult.error(
                f"{self.name} returned a result that cannot be written as text: "
                f"{type(exc).__name__}: {exc}"
            )
        return result


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    approval: Approval = "never",
    idempotent: bool = False,
) -> Any:
    """Make a Tool from a typed function; the docstring's first line is its description."""

    def build(f: Callable[..., Any]) -> Tool:
        hints = get_type_hints(f)
        fields: dict[str, Any] = {}
        context_param = None
        for pname, param in inspect.signature(f).parameters.items():
            annotation = hints.get(pname, Any)
            if annotation is ToolContext or ToolContext in get_args(annotation):
                context_param = pname
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, default)
        params = create_model(f"{f.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)
        doc = inspect.getdoc(f) or ""
        return Tool(
            name=name or f.__name__,
            description=doc,
            fn=f,
            params=params,
            context_param=context_param,
            approval=approval,
            idempotent=idempotent,
        )

    return build(fn) if fn is not None else build


def wire_name(name: str) -> str:
    """A tool's name as the providers take it (`^[A-Za-z0-9_-]{1,64}$`): an MCP server's
    `SERVER.TOOL` is `SERVER__TOOL`, and anything else outside the set becomes `_`."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name.replace(".", "__"))[:64] or "_"


@dataclass
class ToolUse:
    """What a tool did in this run: calls ended, how many failed, the last failure."""

    calls: int = 0
    errors: int = 0
    last_error: str | None = None


class ToolRegistry:
    """The tools a turn may use, by name. The model sees each under its wire name
    (`wire_name`); a call it makes by that name is recorded under the tool's own."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self.use: dict[str, ToolUse] = {}  # by tool name, for the tools screen
        self._tools: dict[str, Tool] = {}
        self._wire: dict[str, str] = {}  # wire name -> name, where the two differ
        self._schemas: list[dict[str, Any]] | None = None
        for t in tools or []:
            self.add(t)

    def add(self, t: Tool) -> None:
        self._tools[t.name] = t
        wire = wire_name(t.name)
        if wire != t.name:
            while self._wire.get(wire, t.name) != t.name or (
                wire in self._tools and wire != t.name
            ):
                wire = f"{wire[:60]}_{len(self._wire) % 1000}"  # two names, one wire name
            self._wire[wire] = t.name
        self._schemas = None

    def remove(self, name: str) -> None:
        if self._tools.pop(name, None) is not None:
            self._wire = {w: n for w, n in self._wire.items() if n != name}
            self._schemas = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name) or self._tools.get(self._wire.get(name, ""))

    def ended(self, name: str, error: str | None) -> None:
        """A call of `name` ended (`error`: failed, and why)."""
        use = self.use.setdefault(name, ToolUse())
        use.calls += 1
        if error is not None:
            use.errors += 1
            use.last_error = error[:500]

    def canonical(self, name: str) -> str:
        """A tool's own name for the name the model used (its wire name, or itself)."""
        return self._wire.get(name, name)

    def tools(self) -> list[Tool]:
        return list(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """What the model sees of every tool (built once: pydantic's schema is not cheap),
        each under its wire name."""
        if self._schemas is None:
            wires = {n: w for w, n in self._wire.items()}
            self._schemas = [
                {**t.schema(), "name": wires[t.name]} if t.name in wires else t.schema()
                for t in self._tools.values()
            ]
        return self._schemas

    def __contains__(self, name: str) -> bool:
        return name in self._tools
