"""The `tool` decorator, argument validation, running tools, approval, and ToolResult.text."""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

from engine.tools import (
    Tool,
    ToolArgsError,
    ToolContext,
    ToolError,
    ToolRegistry,
    ToolResult,
    tool,
)


@tool
def greet(name: str, times: int = 1, loud: bool = False) -> str:
    """Greet someone.

    More detail the model also reads.
    """
    return ("HI " if loud else "hi ") * times + name


@tool
def where(path: str, ctx: ToolContext) -> str:
    """Resolve a path in the workspace."""
    return str(ctx.resolve(path))


@tool(name="pick_color", approval="always", idempotent=True)
def color(choice: Literal["red", "green"], weights: list[float] | None = None) -> dict[str, Any]:
    return {"choice": choice, "weights": weights}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, call_id="c1", thread_id="t1", turn_id="u1")


# --- schema --------------------------------------------------------------------------------


def test_decorator_builds_a_tool() -> None:
    assert isinstance(greet, Tool)
    assert greet.name == "greet"
    assert greet.description == "Greet someone.\n\nMore detail the model also reads."
    assert greet.approval == "never" and greet.idempotent is False
    assert color.name == "pick_color"
    assert color.approval == "always" and color.idempotent is True
    assert color.description == ""


def test_schema_required_vs_defaults() -> None:
    s = greet.schema()
    assert s["name"] == "greet"
    assert s["description"].startswith("Greet someone.")
    params = s["parameters"]
    assert params["type"] == "object"
    assert "title" not in params
    assert set(params["properties"]) == {"name", "times", "loud"}
    assert params["required"] == ["name"]
    assert params["properties"]["name"]["type"] == "string"
    assert params["properties"]["times"] == {"default": 1, "title": "Times", "type": "integer"}
    assert params["properties"]["loud"]["default"] is False
    assert params.get("additionalProperties") is False


def test_tool_context_param_is_hidden() -> None:
    assert greet.context_param is None
    assert where.context_param == "ctx"
    params = where.schema()["parameters"]
    assert set(params["properties"]) == {"path"}
    assert params["required"] == ["path"]
    assert "ctx" not in str(params)


@pytest.mark.anyio
async def test_optional_tool_context_is_hidden_and_not_forgeable(tmp_path: Path) -> None:
    @tool
    def peek(path: str, ctx: ToolContext | None = None) -> str:
        assert ctx is not None
        return str(ctx.resolve(path))

    assert set(peek.schema()["parameters"]["properties"]) == {"path"}
    with pytest.raises(ToolArgsError):
        peek.validate({"path": "etc/passwd", "ctx": {"workspace": "/"}})
    result = await peek.call(peek.validate({"path": "a"}), ToolContext(workspace=tmp_path))
    assert result == ToolResult.success(str(tmp_path.resolve() / "a"))


def test_schema_of_literal_and_optional() -> None:
    params = color.schema()["parameters"]
    assert params["required"] == ["choice"]
    assert params["properties"]["choice"]["enum"] == ["red", "green"]


def test_registry() -> None:
    reg = ToolRegistry([greet, where])
    reg.add(color)
    assert reg.names() == ["greet", "where", "pick_color"]
    assert "where" in reg and "nope" not in reg
    assert reg.get("pick_color") is color and reg.get("nope") is None
    assert [s["name"] for s in reg.schemas()] == reg.names()


# --- validation ----------------------------------------------------------------------------


def test_validate_fills_defaults() -> None:
    assert greet.validate({"name": "ann"}) == {"name": "ann", "times": 1, "loud": False}
    assert where.validate({"path": "a"}) == {"path": "a"}


@pytest.mark.parametrize(
    ("args", "field"),
    [
        pytest.param({}, "name", id="missing"),
        pytest.param({"name": "a", "times": "many"}, "times", id="wrong-type"),
        pytest.param({"name": "a", "bogus": 1}, "bogus", id="extra"),
        pytest.param({"name": ["a"]}, "name", id="list-for-str"),
    ],
)
def test_validation_errors_name_the_field(args: dict[str, Any], field: str) -> None:
    with pytest.raises(ToolArgsError) as info:
        greet.validate(args)
    assert str(info.value).startswith("invalid arguments for greet: ")
    assert f"{field}: " in str(info.value)


def test_validation_error_names_literal_choices() -> None:
    with pytest.raises(ToolArgsError, match="choice: .*'red' or 'green'"):
        color.validate({"choice": "blue"})


def test_context_param_cannot_be_passed_by_the_model() -> None:
    with pytest.raises(ToolArgsError, match="ctx"):
        where.validate({"path": "a", "ctx": "/etc"})


@pytest.mark.parametrize("args", [[], ["a"], "name=a", None, 3, '{"name": "a"}'])
def test_non_dict_args_refused(args: Any) -> None:
    with pytest.raises(ToolArgsError, match="arguments must be a JSON object, got "):
        greet.validate(args)


# --- running -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sync_tool_runs_in_a_worker_thread(ctx: ToolContext) -> None:
    seen: dict[str, Any] = {}

    @tool
    def probe(x: int, c: ToolContext) -> int:
        seen["thread"] = threading.get_ident()
        seen["ctx"] = c
        return x * 2

    result = await probe.call(probe.validate({"x": 21}), ctx)
    assert result == ToolResult.success(42)
    assert seen["thread"] != threading.get_ident()
    assert seen["ctx"] is ctx


@pytest.mark.anyio
async def test_async_tool_is_awaited(ctx: ToolContext) -> None:
    seen: dict[str, Any] = {}

    @tool
    async def aprobe(word: str, c: ToolContext) -> dict[str, str]:
        seen["thread"] = threading.get_ident()
        return {"word": word, "call": c.call_id}

    result = await aprobe.call(aprobe.validate({"word": "x"}), ctx)
    assert result == ToolResult.success({"word": "x", "call": "c1"})
    assert seen["thread"] == threading.get_ident()  # ran on the event loop


@pytest.mark.anyio
async def test_tool_result_passes_through(ctx: ToolContext) -> None:
    @tool
    def ask() -> ToolResult:
        return ToolResult.pending("needs a human")

    @tool
    async def warn() -> ToolResult:
        return ToolResult.warning([1], "partial")

    assert await ask.call({}, ctx) == ToolResult.pending("needs a human")
    assert await warn.call({}, ctx) == ToolResult.warning([1], "partial")


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_raising_tool_becomes_an_error_result(ctx: ToolContext, is_async: bool) -> None:
    if is_async:

        @tool
        async def boom(n: int) -> int:
            raise ZeroDivisionError(f"cannot divide {n}")

    else:

        @tool
        def boom(n: int) -> int:
            raise ZeroDivisionError(f"cannot divide {n}")

    result = await boom.call({"n": 3}, ctx)
    assert result.status == "error"
    assert result.message == "boom raised ZeroDivisionError: cannot divide 3"
    assert result.text() == "error: boom raised ZeroDivisionError: cannot divide 3"


@pytest.mark.anyio
async def test_tool_error_is_an_error_result_with_its_own_text(ctx: ToolContext) -> None:
    @tool
    def picky() -> None:
        raise ToolError("file not found: x.txt")

    result = await picky.call({}, ctx)
    assert result == ToolResult.error("file not found: x.txt")


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
async def test_a_tool_past_its_time_limit_ends_with_an_error(
    tmp_path: Path, is_async: bool
) -> None:
    release = threading.Event()  # lets the abandoned thread end once the test has its answer
    if is_async:

        @tool
        async def stuck() -> str:
            await anyio.sleep_forever()
            return "never"

    else:

        @tool
        def stuck() -> str:
            release.wait(60)  # blocks like a FIFO's open would
            return "late"

    try:
        with anyio.fail_after(30):  # the guard: a limit that does not work hangs here
            result = await stuck.call({}, ToolContext(workspace=tmp_path, time_limit=0.1))
    finally:
        release.set()
    assert result.status == "error"
    assert result.message == "stuck did not finish within its time limit (0.1s) and was stopped"


@pytest.mark.anyio
async def test_escaping_path_through_a_tool_is_an_error_result(ctx: ToolContext) -> None:
    result = await where.call({"path": "../outside"}, ctx)
    assert result.status == "error"
    assert "outside the workspace" in result.message
    ok = await where.call({"path": "sub/file"}, ctx)
    assert ok == ToolResult.success(str(ctx.workspace.resolve() / "sub" / "file"))


# --- approval ------------------------------------------------------------------------------


def test_approval_policies() -> None:
    @tool(approval="never")
    def a(x: int) -> int:
        return x

    @tool(approval="always")
    def b(x: int) -> int:
        return x

    @tool(approval=lambda args: args["x"] > 10)
    def c(x: int) -> int:
        return x

    assert a.needs_approval({"x": 99}) is False
    assert b.needs_approval({"x": 0}) is True
    assert c.needs_approval({"x": 11}) is True
    assert c.needs_approval({"x": 10}) is False

    @tool(approval=lambda args: args.get("path", ""))  # truthy value, not a bool
    def d(path: str = "") -> str:
        return path

    assert d.needs_approval({"path": "x"}) is True
    assert d.needs_approval({"path": ""}) is False


# --- ToolContext.resolve -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "rel"),
    [(".", ""), ("", ""), ("a", "a"), ("a/b/c.txt", "a/b/c.txt"), ("a/../b", "b"), ("./a/./b", "a/b")],
)  # fmt: skip
def test_resolve_inside(ctx: ToolContext, path: str, rel: str) -> None:
    root = ctx.workspace.resolve()
    assert ctx.resolve(path) == (root / rel if rel else root)


@pytest.mark.parametrize("path", ["..", "../x", "a/../../x", "/etc/passwd", "/", "~root"])
def test_resolve_refuses_escapes(ctx: ToolContext, path: str) -> None:
    if path == "~root":  # not expanded: a literal directory name inside the workspace
        assert ctx.resolve(path) == ctx.workspace.resolve() / "~root"
        return
    with pytest.raises(ToolError, match="outside the workspace"):
        ctx.resolve(path)


def test_resolve_refuses_sibling_with_common_prefix(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws-evil").mkdir()
    c = ToolContext(workspace=tmp_path / "ws")
    with pytest.raises(ToolError):
        c.resolve("../ws-evil/x")


def test_resolve_refuses_symlink_escape(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    os.symlink(outside, ws / "link")
    c = ToolContext(workspace=ws)
    with pytest.raises(ToolError, match="outside the workspace"):
        c.resolve("link/secret")
    os.symlink(ws / "real", ws / "inner")
    assert c.resolve("inner/x") == ws.resolve() / "real" / "x"


def test_resolve_with_relative_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ws").mkdir()
    c = ToolContext(workspace=Path("ws"))
    assert c.resolve("a") == tmp_path.resolve() / "ws" / "a"
    with pytest.raises(ToolError):
        c.resolve("../a")


# --- ToolResult.text -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "text"),
    [
        pytest.param(ToolResult.success("plain text"), "plain text", id="success-str"),
        pytest.param(ToolResult.success(""), "", id="success-empty-str"),
        pytest.param(ToolResult.success({"a": 1, "b": [1, 2]}), '{"a": 1, "b": [1, 2]}', id="success-dict"),
        pytest.param(ToolResult.success(3.5), "3.5", id="success-number"),
        pytest.param(ToolResult.success(), "null", id="success-none"),
        pytest.param(ToolResult.warning("ok-ish", "truncated"), "ok-ish\nwarning: truncated", id="warning-str"),
        pytest.param(ToolResult.warning([1], "partial"), "[1]\nwarning: partial", id="warning-list"),
        pytest.param(ToolResult.error("boom"), "error: boom", id="error"),
        pytest.param(ToolResult.error("boom", content={"x": 1}), "error: boom", id="error-with-content"),
        pytest.param(ToolResult.pending(), "pending: waiting for a decision", id="pending-default"),
        pytest.param(ToolResult.pending("ask bob"), "pending: ask bob", id="pending"),
    ],
)  # fmt: skip
def test_tool_result_text(result: ToolResult, text: str) -> None:
    assert result.text() == text


def test_tool_result_statuses() -> None:
    assert ToolResult.success(1).status == "success"
    assert ToolResult.warning(1, "w").status == "warning"
    assert ToolResult.error("e").status == "error"
    assert ToolResult.pending().status == "pending"
    with pytest.raises(ValueError):
        ToolResult(status="ok")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_tool_returning_a_non_json_value_still_has_text(ctx: ToolContext) -> None:
    @tool
    def now() -> dt.datetime:
        return dt.datetime(2024, 1, 2, 3, 4, 5)

    result = await now.call({}, ctx)
    assert result.status == "success"
    assert result.text() == '"2024-01-02 03:04:05"'  # JSON of the value's str()


@pytest.mark.anyio
@pytest.mark.parametrize("value", ["huge-int", "deep", "bad-str"])
async def test_a_result_that_cannot_be_written_as_text_is_an_error(
    ctx: ToolContext, value: str
) -> None:
    # Found by tests/fuzz: add({"a": 9...9, "b": 9...9}, 4,300 digits each) returned 4,301
    # digits, which json.dumps refuses; the ValueError ended the turn in error.
    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    nested: list[Any] = []
    for _ in range(5000):
        nested = [nested]
    returns = {"huge-int": 10**4300, "deep": nested, "bad-str": [Unprintable()]}[value]

    @tool
    def odd() -> Any:
        return returns

    result = await odd.call({}, ctx)
    assert result.status == "error"
    assert result.message.startswith("odd returned a result that cannot be written as text: ")
