"""The engine never imports the UI: not textual, not rich, not the console package.

Checked three ways: statically (every import statement in engine/, at any nesting level),
dynamically (import every engine module in a fresh interpreter and look at sys.modules),
and with import-linter against the contract in pyproject.toml.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import engine

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ROOT / "engine"
FORBIDDEN = ("textual", "rich", "console")


def _top(name: str) -> str:
    return name.split(".")[0]


def forbidden_imports(source: str, filename: str = "<src>") -> list[str]:
    """Every import of a forbidden package in `source`, wherever it sits (functions,
    try/except, TYPE_CHECKING blocks), plus importlib.import_module/__import__ of a literal."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:  # relative imports stay inside engine
                names = [node.module]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if fname in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                names = [str(arg.value)]
        found += [f"{filename}:{node.lineno} {n}" for n in names if _top(n) in FORBIDDEN]
    return found


ENGINE_FILES = sorted(ENGINE.rglob("*.py"))


def _file_param(path: Path) -> object:
    rel = path.relative_to(ROOT).as_posix()
    return pytest.param(path, id=rel)


# --- (a) static ----------------------------------------------------------------------------


def test_engine_files_found() -> None:
    rels = {p.relative_to(ROOT).as_posix() for p in ENGINE_FILES}
    assert {"engine/__init__.py", "engine/turn/loop.py", "engine/cli/__init__.py"} <= rels
    assert any(r.startswith("engine/store/") for r in rels)
    assert any(r.startswith("engine/lifecycle/") for r in rels)


@pytest.mark.parametrize("path", [_file_param(p) for p in ENGINE_FILES])
def test_no_ui_import_in_source(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert forbidden_imports(source, path.relative_to(ROOT).as_posix()) == []


@pytest.mark.parametrize(
    ("source", "hits"),
    [
        ("import textual", 1),
        ("import rich.console as rc", 1),
        ("from console import app", 1),
        ("from console.app import run_console", 1),
        ("def f():\n    from textual.app import App\n", 1),
        ("try:\n    import rich\nexcept ImportError:\n    pass\n", 1),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import textual\n", 1),
        ("import importlib\nimportlib.import_module('console.app')", 1),
        ("__import__('rich')", 1),
        ("import os, textual.widgets, rich", 2),
        ("from . import console", 0),  # relative: engine.console, not the UI package
        ("from .console import x", 0),
        ("import richer, consoles, textualize", 0),
        ("from engine import tools", 0),
    ],
)
def test_static_checker_itself(source: str, hits: int) -> None:
    assert len(forbidden_imports(source)) == hits


# --- (b) dynamic ---------------------------------------------------------------------------

# argv: modules to import, in order; `--block=M` makes `import M` fail (as when an optional
# dependency is absent) before anything is imported.
PROBE = """
import importlib, json, sys
bad = {}
names = [a for a in sys.argv[1:] if not a.startswith('--block=')]
for a in sys.argv[1:]:
    if a.startswith('--block='):
        sys.modules[a.removeprefix('--block=')] = None
for name in names:
    before = set(sys.modules)
    importlib.import_module(name)
    new = [m for m in set(sys.modules) - before if m.split('.')[0] in ('textual', 'rich', 'console')]
    if new:
        bad[name] = sorted(new)
print(json.dumps(bad))
sys.exit(1 if bad else 0)
"""


def engine_modules() -> list[str]:
    mods = ["engine"]
    for info in pkgutil.walk_packages(engine.__path__, "engine."):
        mods.append(info.name)
    return sorted(mods)


def probe(modules: list[str], block: tuple[str, ...] = ()) -> tuple[int, dict[str, list[str]]]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *(f"--block={b}" for b in block), *modules],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.stdout, proc.stderr  # an import error is a failure too, with its traceback
    return proc.returncode, json.loads(proc.stdout.splitlines()[-1])


def test_engine_modules_discovered() -> None:
    mods = engine_modules()
    for expected in ("engine.cli", "engine.turn.loop", "engine.runtime", "engine.store.sqlite",
                     "engine.lifecycle.call", "engine.providers.offline", "engine.tools"):  # fmt: skip
        assert expected in mods
    # every engine/*.py file is a discovered module
    from_files = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in ENGINE_FILES
    }
    assert from_files <= set(mods)


# httpx/__init__.py does `try: from ._main import main`, and httpx._main imports rich (and
# click, pygments) whenever click is installed (import-linter brings it in the `test`
# extra). That is httpx's choice, not an engine import, so the probe blocks that one module
# to check the engine's own code (the providers import httpx).
HTTPX_CLI = "httpx._main"


def test_importing_every_engine_module_loads_no_ui() -> None:
    code, bad = probe(engine_modules(), block=(HTTPX_CLI,))
    assert bad == {}, f"engine modules pulled in UI packages: {bad}"
    assert code == 0


def test_engine_commands_do_not_load_the_console(tmp_path: Path) -> None:
    """`agentdeck invoke` (or info, decide, history) runs without importing Textual: the
    console loads only when it opens."""
    code = ("import sys; from console.cli import main; "
            "main(['info', '--room', sys.argv[1]]); print('textual' in sys.modules)")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "room")],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)  # fmt: skip
    assert proc.stdout.strip().splitlines()[-1] == "False", proc.stderr


def test_dynamic_probe_detects_ui_imports() -> None:
    code, bad = probe(["json", "rich.text", "engine.tools"])
    assert code == 1
    assert list(bad) == ["rich.text"] and "rich" in bad["rich.text"]


# --- (c) import-linter ---------------------------------------------------------------------

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # '.[test]' installs it


def lint_imports(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_pyproject_has_the_contract() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in conf["contracts"] if c.get("source_modules") == ["engine"]]
    assert contract["type"] == "forbidden"
    assert contract["source_modules"] == ["engine"]
    assert set(contract["forbidden_modules"]) == set(FORBIDDEN)


def test_every_engine_package_has_its_layer() -> None:
    """The layers contract places every package and root module of the engine, so a new
    one is given a layer (and import-linter checks it) rather than left out unseen."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in conf["contracts"] if c["type"] == "layers"]
    placed = {m.strip() for layer in layers["layers"] for m in layer.replace(":", "|").split("|")}
    engine = ROOT / "engine"
    present = {f"engine.{p.name}" for p in engine.iterdir() if (p / "__init__.py").exists()}
    present |= {f"engine.{p.stem}" for p in engine.glob("*.py") if p.stem != "__init__"}
    assert placed == present


def test_lint_imports_with_project_config() -> None:
    proc = lint_imports()
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pyproject_keeps_screens_and_widgets_off_the_runtime() -> None:
    """Screens and widgets reach the runtime only through the bridge (its client), and the
    console runs no SQL: import-linter contracts, checked by the test above."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    forbidden = {
        tuple(c["source_modules"]): set(c["forbidden_modules"])
        for c in conf["contracts"]
        if c["type"] == "forbidden"
    }
    assert {"engine.runtime", "engine.store", "sqlite3", "aiosqlite", "httpx"} <= forbidden[
        ("console.screens", "console.widgets")
    ]
    assert {"engine.store", "sqlite3", "aiosqlite"} <= forbidden[("console",)]


# --- one coordinator (issue 28) -------------------------------------------------------------

# Where a cluster may be named: its implementation, the coordinator protocol and the
# composition root that chooses one (the store's own PostgreSQL modules name their tables).
CLUSTER_HOME = (
    "engine/cluster/",
    "engine/services/coordinator.py",
    "engine/runtime/lifetime.py",
    "engine/store/pg/",
)


def test_nothing_but_the_coordinators_and_the_root_asks_for_a_cluster() -> None:
    """Issue 28: about 40 `cluster is (not) None` branches were spread over the runtime,
    the supervisor, the lifetime, the API, the loops and the CLI. What differs between one
    room and a cluster goes through engine/services/coordinator.py's protocol."""
    import re

    asks = re.compile(r"\bcluster\s+is\s+(not\s+)?None|\b(rt|runtime|self|sv)\.cluster\b")
    found = [
        f"{path.relative_to(ROOT).as_posix()}:{n}: {line.strip()}"
        for path in sorted([*ENGINE.rglob("*.py"), *(ROOT / "console").rglob("*.py")])
        if not path.relative_to(ROOT).as_posix().startswith(CLUSTER_HOME)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if asks.search(line)
    ]
    assert found == []


def test_no_engine_modules_import_each_other_in_a_circle() -> None:
    """Type-only imports count: engine.turn.context imported engine.services.coordinator, which named
    the supervisor; engine.runtime.lifetime named engine.runtime (issue 28's review)."""
    import grimp

    graph = grimp.build_graph("engine")
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph.find_modules_directly_imported_by(module):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            part = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(part) > 1:
                circles.append(sorted(part))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    assert circles == []
