"""The tools every room gets out of the box: clock, files, shell, calculator, HTTP.

They are ordinary `@tool` functions, so they show the model the same schemas and obey the
same approval policy as user tools. The file tools reach the disk only through
`engine.tools.workspace`, which opens every path component relative to the workspace without
following symlinks, so they cannot read or write outside the room's workspace even while
it changes under them; the ones with side effects (write_file, shell, http_get) always ask
for approval. `shell` starts each command in a process group of its own and has the group
recorded in its call's meta before the command runs, so one a crash leaves behind can be
found and ended (`engine.tools.orphans`).
"""

from __future__ import annotations

import ast
import codecs
import json
import math
import operator
import os
import signal
import subprocess
from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from engine.shell.sandbox import denied
from engine.tools import Tool, ToolContext, ToolError, ToolResult, tool
from engine.tools.orphans import identity
from engine.tools.workspace import Workspace

if TYPE_CHECKING:
    import httpx


def _local_now() -> datetime:
    return datetime.now().astimezone()


now: Callable[[], datetime] = _local_now  # replaced in tests
_transport: httpx.AsyncBaseTransport | None = None  # replaced in tests (httpx loads on use)


@tool(idempotent=True)
def clock() -> dict[str, str]:
    """Return the current local date and time (ISO 8601), weekday and timezone."""
    t = now()
    if t.tzinfo is None:
        t = t.astimezone()
    return {"now": t.isoformat(), "weekday": t.strftime("%A"), "timezone": t.tzname() or ""}


@tool(idempotent=True)
def list_dir(path: str = ".", *, ctx: ToolContext) -> Any:
    """List a workspace directory: each entry's name, kind (file/dir/symlink) and size."""
    entries = Workspace(ctx.workspace).entries(path)
    size = 2
    for shown, entry in enumerate(entries):
        size += len(json.dumps(entry, ensure_ascii=False).encode()) + 2
        if size > ctx.content_cap:
            return ToolResult.warning(
                entries[:shown],
                f"listing cut: showed {shown} of {len(entries)} entries"
                f" (results are kept to {ctx.max_result_bytes} bytes)",
            )
    return entries


@tool(idempotent=True)
def read_file(path: str, ctx: ToolContext, max_bytes: int = 100_000) -> Any:
    """Read a UTF-8 text file from the workspace (at most max_bytes bytes)."""
    if max_bytes < 1:
        raise ToolError("max_bytes must be at least 1")
    limit = min(max_bytes, ctx.content_cap)  # never more in memory than a result may hold
    data, size = Workspace(ctx.workspace).read(path, limit)
    truncated = size > len(data)
    try:  # a cut in the middle of a character is left undecoded, not an error
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=not truncated)
    except UnicodeDecodeError:
        raise ToolError(f"{path!r} is not UTF-8 text (binary file?)") from None
    if "\x00" in text:
        raise ToolError(f"{path!r} looks binary (contains NUL bytes)")
    if truncated:
        why = f" (results are kept to {ctx.max_result_bytes} bytes)" if limit < max_bytes else ""
        return ToolResult.warning(text, f"truncated: showed {len(data)} of {size} bytes{why}")
    return text


@tool(approval="always")
def write_file(path: str, text: str, ctx: ToolContext) -> dict[str, Any]:
    """Write text to a file in the workspace (UTF-8), creating parent directories."""
    data = text.encode("utf-8")
    return {"path": Workspace(ctx.workspace).write(path, data), "bytes": len(data)}


# What a call was writing, for the review after a crash (engine/decisions/review.py): the file named
# by `path`, which was to hold `text`.
write_file.meta["writes"] = {"path": "text"}


class _Capped:
    """Keeps the first `cap` bytes of a stream and counts the rest; hands every piece to
    `tee` as it comes (the call's output, for those who watch it)."""

    def __init__(self, cap: int, tee: Callable[[bytes], None] | None = None) -> None:
        self.cap, self.kept, self.dropped, self.tee = cap, bytearray(), 0, tee

    async def drain(self, stream: ByteReceiveStream | None) -> None:
        if stream is None:
            return
        async for chunk in stream:
            room = self.cap - len(self.kept)
            self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - room)
            if self.tee is not None:
                self.tee(chunk)

    def text(self) -> str:
        out = self.kept.decode("utf-8", errors="replace")
        return out + (f"\n[... {self.dropped} bytes truncated]" if self.dropped else "")


def _kill_group(pgid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, signal.SIGKILL)


# The command waits behind this gate until its process group is recorded: a line on stdin
# lets it run (stdin then /dev/null, as for any command); end of file, which is what a
# runtime that died before recording it leaves, ends it unrun. `exec` keeps the pid, so
# the recorded group is the command's.
_GATE = 'IFS= read -r go || exit 125; exec /bin/sh -c "$1" </dev/null'


async def _open_gate(process: Process, command: str, ctx: ToolContext) -> None:
    """Record the command's process group durably (`ctx.started`), then let it run."""
    assert process.stdin is not None
    if ctx.started is not None:
        await ctx.started({"pgid": process.pid, "command": command, **identity(process.pid)})
    await process.stdin.send(b"go\n")
    await process.stdin.aclose()


@tool(approval="always")
async def shell(command: str, ctx: ToolContext, timeout: float | None = None) -> ToolResult:  # noqa: ASYNC109 (model-facing)
    """Run a shell command in the workspace; returns exit code, stdout and stderr."""
    # no timeout given: the room's default, [runtime] shell_timeout (via the ToolContext)
    timeout = ctx.shell_timeout if timeout is None else timeout
    if not 0 < timeout <= 3600:
        raise ToolError("timeout must be between 0 and 3600 seconds")
    argv = ["/bin/sh", "-c", _GATE, "agentdeck-shell", command]
    env = ctx.process_env()  # without the provider keys and [runtime] secret_env
    box = ctx.sandbox
    confined = box.wrap(argv, ctx.sandbox_choice) if box is not None else None
    if box is not None and confined is not None:  # (engine/shell/sandbox.py)
        argv, env = confined, box.env(env, ctx.sandbox_choice)
    with anyio.CancelScope(shield=True):  # a cancel mid-spawn would leak the process
        process = await anyio.open_process(
            argv,
            cwd=ctx.workspace,
            env=env,
            stdin=subprocess.PIPE,
            start_new_session=True,  # its own process group, so we can kill its children too
        )
    tee = ctx.output
    out = _Capped(ctx.content_cap // 2, tee and (lambda data: tee("stdout", data)))
    err = _Capped(ctx.content_cap // 2, tee and (lambda data: tee("stderr", data)))
    finished = False
    try:
        await _open_gate(process, command, ctx)
        with anyio.move_on_after(timeout):
            async with anyio.create_task_group() as tg:
                tg.start_soon(out.drain, process.stdout)
                tg.start_soon(err.drain, process.stderr)
            await process.wait()
            finished = True
    finally:  # timed out or cancelled: nothing of the command may outlive the call
        if not finished:
            _kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.aclose()
    content = {"exit_code": process.returncode, "stdout": out.text(), "stderr": err.text()}
    if not finished:
        return ToolResult.error(f"timed out after {timeout:g}s", content)
    if process.returncode != 0:
        tail = err.text()[-500:].strip()
        if confined is not None and denied(err.text()):
            content["sandbox"] = SANDBOX_NOTE
            tail = f"{SANDBOX_NOTE}. {tail}"
        return ToolResult.error(f"exit code {process.returncode}: {tail}".rstrip(": "), content)
    return ToolResult.success(content)


SANDBOX_NOTE = ("the sandbox may have refused it: it writes only the workspace, reads no home or "
                "room files, and has no network; an operator can approve it outside the "
                "sandbox")  # fmt: skip


shell.meta["streams"] = True  # what it prints is shown as it prints it (engine/turn/output.py)
shell.meta["sandboxed"] = True  # it runs in the room's sandbox (engine/shell/sandbox.py)


_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_NAMES = {"pi": math.pi, "e": math.e}
_FUNCS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "floor": math.floor,
    "ceil": math.ceil, "log": math.log, "sin": math.sin, "cos": math.cos, "tan": math.tan,
}  # fmt: skip
MAX_EXPONENT = 10_000
MAX_INT_BITS = 10_000  # ~3000 digits; keeps results printable and cheap


def _check(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError("result is too large")
    if isinstance(value, complex):
        raise ToolError("result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("result is not a finite number")
    return value


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        if type(node.value) not in (int, float):
            raise ToolError(f"{type(node.value).__name__} constants are not allowed")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise ToolError(f"exponent {right} is too large (limit {MAX_EXPONENT})")
            if isinstance(left, int) and isinstance(right, int) and right > 0:
                if left.bit_length() * right > MAX_INT_BITS:
                    raise ToolError("result is too large")
        return _check(_BINOPS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id not in _NAMES:
            raise ToolError(f"name {node.id!r} is not allowed")
        return _NAMES[node.id]
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS:
            what = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise ToolError(f"function {what!r} is not allowed")
        if node.keywords:
            raise ToolError("keyword arguments are not allowed")
        args = [_eval(a) for a in node.args]
        try:
            return _check(_FUNCS[node.func.id](*args))
        except TypeError as exc:
            raise ToolError(f"bad arguments to {node.func.id}: {exc}") from None
    if isinstance(node, ast.Attribute):
        raise ToolError("attribute access is not allowed")
    raise ToolError(f"{type(node).__name__} is not allowed")


@tool(idempotent=True)
def calc(expression: str) -> int | float:
    """Evaluate an arithmetic expression (+ - * / // % **, pi, e, sqrt, log, sin, ...)."""
    if len(expression) > 1000:
        raise ToolError("expression is too long (limit 1000 characters)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        raise ToolError(f"not a valid expression: {exc}") from None
    try:
        value = _eval(tree.body)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except (OverflowError, ValueError, RecursionError) as exc:
        raise ToolError(f"cannot compute: {exc}") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


# Bounded work (an expression of 1,000 characters, exponents and integers capped): run on
# the event loop, not in a worker thread
calc.meta["quick"] = True


@tool(approval="always")
async def http_get(url: str, ctx: ToolContext, timeout: float = 10.0) -> Any:  # noqa: ASYNC109
    """Fetch a URL over http(s) with GET; returns status, content type, text, and the location of a redirect (not followed: fetch it in a call of its own)."""
    import httpx  # on first use: it costs a console start ~80 ms

    try:
        scheme = httpx.URL(url).scheme
    except httpx.InvalidURL as exc:
        raise ToolError(f"invalid URL {url!r}: {exc}") from None
    if scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs are allowed, not {scheme or 'no scheme'!r}")
    cap = ctx.content_cap
    # Not followed: what was approved (or allowed by a prefix rule) is this URL, and a
    # redirect may lead anywhere.
    client = httpx.AsyncClient(follow_redirects=False, timeout=timeout, transport=_transport)
    try:
        async with client, client.stream("GET", url) as response:
            parts: list[str] = []
            size = 0
            async for chunk in response.aiter_text():  # stop reading once past the cap
                parts.append(chunk)
                size += len(chunk.encode("utf-8", "surrogatepass"))
                if size > cap:
                    break
    except httpx.TimeoutException:
        raise ToolError(f"timed out after {timeout:g}s fetching {url}") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"request to {url} failed: {type(exc).__name__}: {exc}") from None
    body = "".join(parts).encode("utf-8", "surrogatepass")
    content = {
        "status": response.status_code,
        "content_type": response.headers.get("content-type", "")[:200],
        "text": body[:cap].decode("utf-8", "ignore"),
    }
    if response.is_redirect:
        content["location"] = str(response.url.join(response.headers["location"]))[:2000]
    if len(body) > cap:
        return ToolResult.warning(content, f"body truncated to {cap} bytes")
    return content


def builtin_tools() -> list[Tool]:
    """Fresh Tool instances of every built-in tool."""
    return [
        replace(t, meta=dict(t.meta))
        for t in (clock, list_dir, read_file, write_file, shell, calc, http_get)
    ]
