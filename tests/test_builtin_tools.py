"""Tests for engine.tools.builtin: success paths, workspace confinement, shell lifecycle."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from engine.config import Config
from engine.domain.decisions import Decision
from engine.tools import NOTE_ROOM, Tool, ToolContext, ToolResult
from engine.tools import builtin as bt
from tests.helpers import msg, runtime
from tests.scripted import first_then
from tests.wait import until

TOOLS = {t.name: t for t in bt.builtin_tools()}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path)


async def run(name: str, ctx: ToolContext | None = None, **args: Any) -> ToolResult:
    t = TOOLS[name]
    return await t.call(t.validate(args), ctx or ToolContext(workspace=Path(".")))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def read_pid(path: Path) -> int:
    return int(await until(lambda: path.read_text().strip() if path.exists() else "",
                           f"the shell wrote its pid to {path.name}"))  # fmt: skip


# --- registry, schemas, approval ---------------------------------------------------------


def test_builtin_tools_are_fresh_instances() -> None:
    a, b = bt.builtin_tools(), bt.builtin_tools()
    assert [t.name for t in a] == [
        "clock", "list_dir", "read_file", "write_file", "shell", "calc", "http_get",
    ]  # fmt: skip
    assert all(isinstance(t, Tool) for t in a)
    assert all(x is not y and x.meta is not y.meta for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(
    ("name", "required"),
    [
        ("clock", set()),
        ("list_dir", set()),
        ("read_file", {"path"}),
        ("write_file", {"path", "text"}),
        ("shell", {"command"}),
        ("calc", {"expression"}),
        ("http_get", {"url"}),
    ],
)
def test_schema_hides_ctx_and_lists_required(name: str, required: set[str]) -> None:
    schema = TOOLS[name].schema()
    assert schema["description"] and "\n" not in schema["description"]
    params = schema["parameters"]
    assert "ctx" not in params.get("properties", {})
    assert set(params.get("required", [])) == required


def test_approval_and_idempotency() -> None:
    needs = {name for name, t in TOOLS.items() if t.needs_approval({})}
    assert needs == {"write_file", "shell", "http_get"}
    assert {n for n, t in TOOLS.items() if t.idempotent} == {
        "clock", "list_dir", "read_file", "calc",
    }  # fmt: skip


# --- clock ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_clock_uses_injected_time(monkeypatch: pytest.MonkeyPatch) -> None:
    tz = timezone(timedelta(hours=2), "CEST")
    monkeypatch.setattr(bt, "now", lambda: datetime(2024, 5, 17, 9, 30, tzinfo=tz))
    result = await run("clock")
    assert result.status == "success"
    assert result.content == {
        "now": "2024-05-17T09:30:00+02:00",
        "weekday": "Friday",
        "timezone": "CEST",
    }


# --- files ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_list_dir(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("hello")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "inner").write_text("x")
    result = await run("list_dir", ctx)
    assert result.status == "success"
    assert result.content == [
        {"name": "a", "kind": "dir", "size": None},
        {"name": "b.txt", "kind": "file", "size": 5},
    ]
    sub = await run("list_dir", ctx, path="a")
    assert sub.content == [{"name": "inner", "kind": "file", "size": 1}]


@pytest.mark.anyio
async def test_list_dir_errors(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    missing = await run("list_dir", ctx, path="nope")
    assert missing.status == "error" and "no such directory" in missing.message
    not_dir = await run("list_dir", ctx, path="f")
    assert not_dir.status == "error" and "not a directory" in not_dir.message


@pytest.mark.anyio
async def test_read_file(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("héllo\nworld\n", encoding="utf-8")
    result = await run("read_file", ctx, path="notes.txt")
    assert result.status == "success" and result.content == "héllo\nworld\n"


@pytest.mark.anyio
async def test_read_file_truncation_is_a_warning(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("é" * 10, encoding="utf-8")  # 20 bytes
    result = await run("read_file", ctx, path="big.txt", max_bytes=5)
    assert result.status == "warning"
    assert result.content == "éé"  # the half character at the cut is dropped
    assert "5 of 20 bytes" in result.message


@pytest.mark.anyio
async def test_read_file_errors(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00\x01")
    (tmp_path / "nul").write_bytes(b"a\x00b")
    os.mkfifo(tmp_path / "fifo")
    cases = {
        "missing": "no such file",
        "d": "is a directory",
        "bin": "not UTF-8",
        "nul": "looks binary",
        "fifo": "not a regular file",
    }
    for path, message in cases.items():
        result = await run("read_file", ctx, path=path)
        assert result.status == "error" and message in result.message, path


@pytest.mark.anyio
async def test_write_file(ctx: ToolContext, tmp_path: Path) -> None:
    result = await run("write_file", ctx, path="sub/dir/out.txt", text="héllo")
    assert result.status == "success"
    assert result.content == {"path": "sub/dir/out.txt", "bytes": 6}
    assert (tmp_path / "sub/dir/out.txt").read_text(encoding="utf-8") == "héllo"
    again = await run("write_file", ctx, path="sub/dir/out.txt", text="bye")
    assert again.status == "success"
    assert (tmp_path / "sub/dir/out.txt").read_text() == "bye"
    assert sorted(p.name for p in (tmp_path / "sub/dir").iterdir()) == ["out.txt"]  # no temp


@pytest.mark.anyio
async def test_write_file_onto_directory_fails(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = await run("write_file", ctx, path="d", text="x")
    assert result.status == "error" and "is a directory" in result.message


@pytest.mark.anyio
@pytest.mark.parametrize("escape", ["../x", "/etc/passwd", "link/passwd", "link"])
@pytest.mark.parametrize(
    ("name", "args"),
    [("list_dir", {}), ("read_file", {}), ("write_file", {"text": "pwned"})],
)
async def test_paths_cannot_escape_workspace(
    tmp_path: Path, escape: str, name: str, args: dict[str, Any]
) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "passwd").write_text("secret")
    (workspace / "link").symlink_to(outside)  # a symlink pointing outside the workspace
    result = await run(name, ToolContext(workspace=workspace), path=escape, **args)
    assert result.status == "error"
    assert "outside the workspace" in result.message
    assert (outside / "passwd").read_text() == "secret"
    assert not (tmp_path / "x").exists()


# --- shell ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_shell_success_runs_in_workspace(ctx: ToolContext, tmp_path: Path) -> None:
    result = await run("shell", ctx, command="pwd; echo oops >&2")
    assert result.status == "success"
    assert result.content["exit_code"] == 0
    assert Path(result.content["stdout"].strip()).resolve() == tmp_path.resolve()
    assert result.content["stderr"] == "oops\n"


@pytest.mark.anyio
async def test_shell_nonzero_exit(ctx: ToolContext) -> None:
    result = await run("shell", ctx, command="echo out; echo it broke >&2; exit 3")
    assert result.status == "error"
    assert "exit code 3" in result.message and "it broke" in result.message
    assert result.content == {"exit_code": 3, "stdout": "out\n", "stderr": "it broke\n"}


@pytest.mark.anyio
async def test_shell_output_is_capped(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path, max_result_bytes=2000 + NOTE_ROOM)  # 1000 a stream
    result = await run("shell", ctx, command="head -c 50000 /dev/zero | tr '\\0' a")
    assert result.status == "success"
    assert result.content["stdout"] == "a" * 1000 + "\n[... 49000 bytes truncated]"


@pytest.mark.anyio
async def test_shell_timeout_kills_process(ctx: ToolContext, tmp_path: Path) -> None:
    start = time.monotonic()
    result = await run("shell", ctx, command="echo $$ > pid; exec sleep 30", timeout=0.5)
    assert time.monotonic() - start < 10
    assert result.status == "error" and "timed out after 0.5s" in result.message
    assert not alive(int((tmp_path / "pid").read_text()))


@pytest.mark.anyio
async def test_shell_timeout_kills_whole_process_group(ctx: ToolContext, tmp_path: Path) -> None:
    # the shell stays the parent; its child `sleep` must die with it
    result = await run("shell", ctx, command="sleep 30 & echo $! > pid; wait", timeout=0.5)
    assert result.status == "error"
    pid = int((tmp_path / "pid").read_text())
    await until(lambda: alive(pid) and not _is_zombie(pid), "the group's `sleep` killed",
                ok=lambda running: not running)  # the orphan is reaped by init  # fmt: skip


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.anyio
async def test_shell_cancellation_kills_process(ctx: ToolContext, tmp_path: Path) -> None:
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await run("shell", ctx, command="echo $$ > pid; exec sleep 30"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        pid = await read_pid(tmp_path / "pid")
        assert alive(pid)
        tg.cancel_scope.cancel()
    assert results == []  # cancelled, never returned
    assert not alive(pid)


# --- calc ----------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2", 3),
        ("7 - 10", -3),
        ("6 * 7", 42),
        ("7 / 2", 3.5),
        ("6 / 3", 2),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("-3 + +5", 2),
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("-2 ** 2", -4),
        ("2 ** 3 ** 2", 512),
        ("sqrt(16) + abs(-2)", 6),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("floor(2.7) + ceil(2.1)", 5),
        ("round(pi, 2)", 3.14),
        ("log(e)", 1),
        ("sin(0) + cos(0) + tan(0)", 1),
        ("0.1 + 0.2", 0.1 + 0.2),
    ],
)
async def test_calc(expression: str, expected: float) -> None:
    result = await run("calc", expression=expression)
    assert result.status == "success", result.message
    assert result.content == expected
    assert type(result.content) is type(expected)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os')", "'__import__' is not allowed"),
        ("(1).__class__", "attribute access is not allowed"),
        ("2**99999999", "too large"),
        ("10**5000 * 10**5000", "too large"),
        ("1/0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("'a' * 3", "str constants are not allowed"),
        ("x + 1", "name 'x' is not allowed"),
        ("open('f')", "function 'open' is not allowed"),
        ("[1, 2]", "List is not allowed"),
        ("1 << 3", "BinOp is not allowed"),
        ("True + 1", "bool constants are not allowed"),
        ("sqrt(-1)", "cannot compute"),
        ("(-8) ** 0.5", "not a real number"),
        ("1e308 * 10", "not a finite number"),
        ("1 +", "not a valid expression"),
    ],
)
async def test_calc_rejects(expression: str, message: str) -> None:
    result = await run("calc", expression=expression)
    assert result.status == "error"
    assert message in result.message


# --- http_get ------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/hello")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = ("x" * 70_000 if self.path == "/big" else "hello there").encode()
        self.send_response(200 if self.path in ("/hello", "/big") else 404)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.mark.anyio
async def test_http_get(server: str) -> None:
    result = await run("http_get", url=f"{server}/hello")
    assert result.status == "success"
    assert result.content == {
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "text": "hello there",
    }
    missing = await run("http_get", url=f"{server}/nope")
    assert missing.status == "success" and missing.content["status"] == 404


@pytest.mark.anyio
async def test_http_get_follows_no_redirect(server: str) -> None:
    """A redirect may leave what was approved (issue 25, item 5): it comes back with where
    it leads, for a call of its own that the gate sees."""
    result = await run("http_get", url=f"{server}/redirect")
    assert result.status == "success"
    assert (result.content["status"], result.content["location"]) == (302, f"{server}/hello")
    assert result.content["text"] == ""


@pytest.mark.anyio
async def test_http_get_truncates_big_body(server: str) -> None:
    ctx = ToolContext(workspace=Path("."), max_result_bytes=10_000)
    result = await run("http_get", ctx, url=f"{server}/big")
    assert result.status == "warning" and "truncated" in result.message
    assert result.content["text"] == "x" * ctx.content_cap
    whole = await run("http_get", url=f"{server}/big")  # 70,000 bytes fit the default cap
    assert whole.status == "success" and whole.content["text"] == "x" * 70_000


@pytest.mark.anyio
@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "example.com"])
async def test_http_get_rejects_other_schemes(url: str) -> None:
    result = await run("http_get", url=url)
    assert result.status == "error" and "only http and https" in result.message


@pytest.mark.anyio
async def test_http_get_network_error() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = await run("http_get", url=f"http://127.0.0.1:{port}/", timeout=5)
    assert result.status == "error" and "failed" in result.message


@pytest.mark.anyio
async def test_http_get_uses_injected_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(201, text=f"saw {request.url.path}")

    monkeypatch.setattr(bt, "_transport", httpx.MockTransport(handler))
    result = await run("http_get", url="https://example.invalid/ping")
    assert result.status == "success"
    assert result.content["status"] == 201 and result.content["text"] == "saw /ping"


# --- result cap ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_read_file_reads_no_more_than_the_cap_whatever_max_bytes(tmp_path: Path) -> None:
    import tracemalloc

    (tmp_path / "big.txt").write_bytes(b"a" * 20_000_000)
    ctx = ToolContext(workspace=tmp_path, max_result_bytes=4096)
    tracemalloc.start()
    try:
        result = await run("read_file", ctx, path="big.txt", max_bytes=1_000_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.status == "warning"
    assert len(result.text().encode()) <= 4096
    assert f"of {20_000_000} bytes" in result.message
    assert peak < 2_000_000  # bytes: the file was never read whole


@pytest.mark.anyio
async def test_list_dir_is_cut_to_the_cap(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"file-{i:03}.txt").write_text("x")
    result = await run("list_dir", ToolContext(workspace=tmp_path, max_result_bytes=2048))
    assert result.status == "warning" and "of 300 entries" in result.message
    assert len(result.text().encode()) <= 2048
    assert result.content[0]["name"] == "file-000.txt"


@pytest.mark.anyio
async def test_shell_output_fits_the_cap(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path, max_result_bytes=4096)
    both = "head -c 100000 /dev/zero | tr '\\0' a; head -c 100000 /dev/zero | tr '\\0' b >&2"
    result = await run("shell", ctx, command=both)
    assert result.status == "success"
    assert len(result.text().encode()) <= 4096
    stdout = result.content["stdout"]
    assert stdout.startswith("aaaa") and stdout.endswith("bytes truncated]")
    assert result.content["stderr"].startswith("bbbb")


@pytest.mark.anyio
async def test_http_get_body_fits_the_cap(server: str) -> None:
    ctx = ToolContext(workspace=Path("."), max_result_bytes=4096)
    result = await run("http_get", ctx, url=f"{server}/big")
    assert result.status == "warning" and "truncated" in result.message
    assert len(result.text().encode()) <= 4096
    assert set(result.content["text"]) == {"x"}


@pytest.mark.anyio
async def test_shell_without_a_timeout_takes_the_contexts_default(tmp_path: Path) -> None:
    ctx = ToolContext(workspace=tmp_path, shell_timeout=0.3)
    result = await run("shell", ctx, command="sleep 30")
    assert (result.status, result.message) == ("error", "timed out after 0.3s")
    assert TOOLS["shell"].schema()["parameters"]["properties"]["timeout"]["default"] is None


@pytest.mark.anyio
async def test_the_rooms_shell_timeout_reaches_the_shell_tool(tmp_path: Path) -> None:
    """`[runtime] shell_timeout` was read by nothing: the shell tool hard-coded 30 s."""
    config = Config.model_validate({"runtime": {"shell_timeout": 0.3}})
    script = first_then([("shell", {"command": "sleep 30"})])
    async with runtime(tmp_path, script, bt.builtin_tools(), config=config) as rt:
        out = await rt.run_turn(msg("go"))
        await rt.decide(Decision.approve(out.pending[0]["call_id"]))
        out = await rt.wait_turn(out.turn_id)
        assert (out.status, out.reason) == ("done", "natural")
        assert out.text == "shell: error: timed out after 0.3s"
