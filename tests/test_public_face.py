"""engine's public face (issue 29): `engine.__all__` is what an embedder imports, each name
loads on first use, and README's embedding example runs importing only from `engine`."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"```python\n(.*?)```", re.S)


def test_every_public_name_loads() -> None:
    assert {"Runtime", "Message", "ConvMessage", "Decision", "Tool", "tool", "RoomClient",
            "connect", "TurnStatus", "CallChanged"} <= set(engine.__all__)  # fmt: skip
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    assert set(engine.__all__) <= set(dir(engine))


def test_importing_engine_loads_nothing_it_does_not_use() -> None:
    code = "import sys, engine; print(sorted(m for m in sys.modules if m.startswith('engine')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)  # fmt: skip
    assert out.stdout.strip() == "['engine']"


def _embedding_example() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Embedding", 1)[1]
    found = FENCE.search(section)
    assert found is not None, "README's embedding section has no Python example"
    return found.group(1)


def test_the_readme_example_imports_only_the_public_face() -> None:
    for node in ast.walk(ast.parse(_embedding_example())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("engine"):
            assert node.module == "engine", f"imports engine's insides: {node.module}"
            assert {a.name for a in node.names} <= set(engine.__all__)
        if isinstance(node, ast.Import):
            assert all(not a.name.startswith("engine.") for a in node.names)


def test_the_readme_example_runs(tmp_path: Path) -> None:
    """On the offline model: the agent reads the clock, asks to run `uname -a`, the example
    approves it, and the turn ends."""
    script = tmp_path / "example.py"
    script.write_text(_embedding_example())
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "done"
    assert (tmp_path / "room" / "execution.db").exists()


def test_all_names_what_loads() -> None:
    assert sorted(engine.__all__) == sorted(engine._EXPORTS)  # noqa: SLF001
