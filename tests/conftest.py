"""Fixtures for every test: asyncio as the anyio backend, no user config, no stray room."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _isolated_env(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No test reads the user's room, config or model keys."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for var in ("AGENT_ROOM", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL", "NO_COLOR"):  # fmt: skip
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
