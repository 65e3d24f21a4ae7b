"""A throwaway PostgreSQL cluster for tests: initdb and pg_ctl on a private socket folder.

`cluster()` starts one server (no TCP: `listen_addresses = ''`, a Unix socket in a 0700
folder of its own; fsync off, it is thrown away) and yields its `Cluster`; each test asks
it for a fresh database (`cluster.database()`). The server binaries are found on PATH or
in Debian's /usr/lib/postgresql/<version>/bin; without them the tests that need a server
are skipped with the reason, unless AGENTDECK_REQUIRE_PG is set (CI sets it, so a missing
server fails there instead of passing quietly).
"""

from __future__ import annotations

import contextlib
import getpass
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REQUIRE = "AGENTDECK_REQUIRE_PG"


def pg_bin() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                      key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)  # fmt: skip
    return versions[-1].parent if versions else None


@dataclass
class Cluster:
    """A running server; `database()` makes a new empty database and returns its URL."""

    bin: Path
    data: Path
    sockets: Path
    user: str
    _n: Iterator[int] = field(default_factory=itertools.count)

    def url(self, db: str = "postgres") -> str:
        return f"postgresql:///{db}?host={self.sockets}&user={self.user}"

    def database(self) -> str:
        import psycopg

        name = f"t{next(self._n)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    """Start a server for the block; stop it and remove its files after."""
    bin_ = pg_bin()
    if bin_ is None:
        if os.environ.get(REQUIRE):
            raise RuntimeError("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
        pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    root = Path(tempfile.mkdtemp(prefix="agentdeck-pg-"))
    data, sockets = root / "data", root / "s"
    sockets.mkdir(mode=0o700)
    user = getpass.getuser()
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    run_as: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: a user of its own
        user = "postgres"
        os.chown(root, *_ids(user))
        os.chown(sockets, *_ids(user))
        run_as = ["runuser", "-u", user, "--"]
    try:
        subprocess.run([*run_as, str(bin_ / "initdb"), "-D", str(data), "-U", user, "-A", "trust",
                        "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True, env=env)  # fmt: skip
        options = (f"-c listen_addresses='' -c unix_socket_directories='{sockets}' -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")  # fmt: skip
        subprocess.run([*run_as, str(bin_ / "pg_ctl"), "-D", str(data), "-o", options, "-w",
                        "-l", str(root / "log"), "start"],
                       check=True, capture_output=True, env=env)  # fmt: skip
        try:
            yield Cluster(bin_, data, sockets, user)
        finally:
            subprocess.run([*run_as, str(bin_ / "pg_ctl"), "-D", str(data), "-m", "immediate",
                            "-w", "stop"], capture_output=True, env=env)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _ids(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid
