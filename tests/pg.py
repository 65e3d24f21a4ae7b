"""A throwaway PostgreSQL cluster for tests: initdb and pg_ctl on a private socket folder.

`cluster()` starts one server (no TCP: `listen_addresses = ''`, a Unix socket in a 0700
folder of its own; fsync off, it is thrown away) and yields its `Cluster`; each test asks
it for a fresh database (`cluster.database()`), or for one holding the store's schema
and no rows (`cluster.store_database()`, given back with `cluster.give_back(url)`:
emptied and reused, as CREATE DATABASE takes a quarter second); `Rooms` gives each room
a test opens a database of its own. The server binaries are found on PATH or
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
from typing import Any

import pytest

REQUIRE = "AGENTDECK_REQUIRE_PG"
NO_SERVER = "PostgreSQL's server binaries (initdb, pg_ctl) are not installed"


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
    _free: list[str] = field(default_factory=list)  # store databases given back, emptied
    _seed: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)  # migration's rows

    def url(self, db: str = "postgres") -> str:
        return f"postgresql:///{db}?host={self.sockets}&user={self.user}"

    def database(self) -> str:
        import psycopg

        name = f"t{next(self._n)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def store_database(self) -> str:
        """A database with the store's schema at its version and only the rows migrating
        writes (a reused one, or a new one migrated)."""
        if self._free:
            return self._free.pop()
        import psycopg

        from engine.store.pg.migrations import migrate

        url = self.database()
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
            if not self._seed:
                self._seed = {t: conn.execute(f'SELECT * FROM "{t}"').fetchall()
                              for t in _tables(conn)}  # fmt: skip
        return url

    def give_back(self, url: str) -> None:
        """Empty a database from `store_database` for another test: its other sessions
        ended, every table's rows deleted (triggers off: a session in replication role),
        sequences restarted, migration's rows put back. One that cannot be emptied is left
        alone (the next test gets a new one)."""
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                             " WHERE datname = current_database() AND pid <> pg_backend_pid()")  # fmt: skip
                with conn.transaction():
                    conn.execute("SET LOCAL lock_timeout = '5s'")
                    conn.execute("SET LOCAL session_replication_role = replica")
                    empty = sql.SQL("; ").join(sql.SQL("DELETE FROM {}").format(sql.Identifier(t))
                                               for t in _tables(conn))  # fmt: skip
                    conn.execute(empty)
                    conn.execute("SELECT setval(format('%I', sequencename)::regclass, 1, false)"
                                 " FROM pg_sequences WHERE schemaname = 'public'")  # fmt: skip
                    for table, rows in self._seed.items():
                        for row in rows:
                            marks = sql.SQL(", ").join([sql.Placeholder()] * len(row))
                            conn.execute(sql.SQL("INSERT INTO {} VALUES ({})").format(
                                sql.Identifier(table), marks), row)  # fmt: skip
        except psycopg.Error:
            return
        self._free.append(url)


def _tables(conn: Any) -> list[str]:
    """The tables of the store's schema (not its version's), in `conn`'s database."""
    return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname ="
                                       " 'public' AND tablename <> 'agentdeck_schema'")]  # fmt: skip


@dataclass
class Rooms:
    """The database each room of a test keeps its store in, on PostgreSQL: the first room
    opened gets `first` (the database AGENTDECK_STORE_URL names, which processes the test
    starts use), another room a database of its own."""

    cluster: Cluster
    first: str
    urls: dict[Path, str] = field(default_factory=dict)

    def url(self, db: Path) -> str:
        """The URL of the database of the room whose execution.db would be `db`."""
        key = db.resolve()
        if key not in self.urls:
            self.urls[key] = self.first if not self.urls else self.cluster.store_database()
        return self.urls[key]

    def give_back(self) -> None:
        for url in {self.first, *self.urls.values()}:
            self.cluster.give_back(url)


ROOMS: Rooms | None = None  # the running test's, when it runs its rooms on PostgreSQL


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    """Start a server for the block; stop it and remove its files after."""
    bin_ = pg_bin()
    if bin_ is None:
        if os.environ.get(REQUIRE):
            raise RuntimeError(NO_SERVER)
        pytest.skip(NO_SERVER)
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
