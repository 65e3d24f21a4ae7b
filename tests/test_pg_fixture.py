"""The throwaway PostgreSQL cluster the store's tests run against (tests/pg.py)."""

from __future__ import annotations

import psycopg


def test_each_test_gets_an_empty_database_on_a_private_socket(pg_cluster, pg_url) -> None:
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)  # no TCP
    assert (pg_cluster.sockets.stat().st_mode & 0o777) == 0o700
    assert pg_cluster.database() != pg_url
