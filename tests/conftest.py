"""Fixtures for every test: asyncio as the anyio backend, no user config, no stray room;
a throwaway PostgreSQL server, and `store_backend` to run a module's rooms on both stores."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.tiers import _processes_are_tiered, mark

if TYPE_CHECKING:
    from engine.config import StoreConfig
    from engine.store.sqlite import Store


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads the user's room, config or model keys, nor registers a room in the
    user's list of rooms (engine/rooms_registry.py: a runtime folder of the test's)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    (home / "run").mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(home / "run"))
    for var in ("AGENT_ROOM", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL", "NO_COLOR", "AGENTDECK_STORE_URL",
                "COLUMNS", "LINES"):  # (pytest-xdist's workers set these: 80x24)  # fmt: skip
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def leftover() -> Iterator[list[int]]:
    """Process groups a test left (append their ids); whatever survives it is killed at
    its end."""
    pgids: list[int] = []
    yield pgids
    for pgid in pgids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="session")
def pg_cluster():  # noqa: ANN201
    """One throwaway PostgreSQL server for the session (tests/pg.py)."""
    from tests.pg import cluster

    with cluster() as running:
        yield running


@pytest.fixture
def pg_url(pg_cluster) -> str:  # noqa: ANN001
    """A new empty database on the session's server."""
    return pg_cluster.database()


@pytest.fixture
async def pg_pool(pg_url: str) -> Any:
    """A runtime's pool of connections (engine/store/pg/pool.py) to `pg_url`."""
    from engine.store.pg.pool import open_pool

    pool = await open_pool(pg_url, "agentdeck-test")
    yield pool
    await pool.close()


__all__ = ["_processes_are_tiered"]  # autouse: a test that starts Python is in `process`


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line, even with -q, when the PostgreSQL tests were skipped for want of a server."""
    from tests.pg import NO_SERVER

    skipped = terminalreporter.stats.get("skipped", [])
    if any(NO_SERVER in str(getattr(r, "longrepr", "")) for r in skipped):
        terminalreporter.write_line(
            "agentdeck: the PostgreSQL tests were skipped: initdb and pg_ctl are not installed "
            "(scripts/ensure-postgres installs them as root on Debian/Ubuntu; "
            "AGENTDECK_REQUIRE_PG=1 makes their absence fail)", yellow=True)  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's tier markers (tests/tiers.py)."""
    mark(items)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`store_backend` is 'sqlite' and 'postgresql' for a test that can make a room (it takes
    `tmp_path`), else 'sqlite' alone, as for a test marked `one_store`."""
    if "store_backend" in metafunc.fixturenames:
        both = "tmp_path" in metafunc.fixturenames
        both = both and metafunc.definition.get_closest_marker("one_store") is None
        metafunc.parametrize("store_backend", ["sqlite", "postgresql"] if both else ["sqlite"],
                             indirect=True)  # fmt: skip


@pytest.fixture
def store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The store the test's rooms open: a module runs on both with
    `pytestmark = pytest.mark.usefixtures("store_backend")`. On 'postgresql',
    each room the test opens keeps its store in a database of its own, with no rows
    (tests/pg.py `Rooms`); AGENTDECK_STORE_URL names the first room's, as an operator's
    environment would, for the processes the test starts."""
    if request.param != "postgresql":
        yield "sqlite"
        return
    import engine.store.select
    from tests import pg

    cluster = request.getfixturevalue("pg_cluster")
    rooms = pg.Rooms(cluster, cluster.store_database())
    real = engine.store.select.open_store

    async def per_room(db: Path, config: StoreConfig, env: Mapping[str, str] = os.environ,
                       **kw: Any) -> Store:  # fmt: skip
        return await real(db, config, {**env, engine.store.select.ENV: rooms.url(db)}, **kw)

    monkeypatch.setattr("engine.runtime.lifetime.open_store", per_room)
    monkeypatch.setattr(pg, "ROOMS", rooms)
    monkeypatch.setenv(engine.store.select.ENV, rooms.first)
    yield "postgresql"
    rooms.give_back()
