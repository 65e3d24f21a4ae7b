"""The throwaway PostgreSQL cluster the store's tests run against (tests/pg.py)."""

from __future__ import annotations

import psycopg
import pytest

EVENT = ("INSERT INTO events (at, run_id, thread_id, turn_id, kind, body)"
         " VALUES (1.0, 'r1', 't1', 'u1', 'x', '{}')")  # fmt: skip


def test_each_test_gets_an_empty_database_on_a_private_socket(pg_cluster, pg_url) -> None:
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone() == (0,)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)  # no TCP
    assert (pg_cluster.sockets.stat().st_mode & 0o777) == 0o700
    assert pg_cluster.database() != pg_url


def test_a_store_database_given_back_is_emptied_and_reused(pg_cluster) -> None:
    from engine.store.pg.migrations import VERSION

    url = pg_cluster.store_database()
    with psycopg.connect(url, autocommit=True) as conn:
        fresh = {
            t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in ("counters", "runs")
        }
        conn.execute("INSERT INTO runs (id, kind, pid, started_at, status)"
                     " VALUES ('r1', 'run', 1, 1.0, 'active')")  # fmt: skip
        conn.execute("INSERT INTO threads (id, group_name, created_at, updated_at)"
                     " VALUES ('t1', 'default', 1.0, 1.0)")  # fmt: skip
        conn.execute(EVENT)
        other = psycopg.connect(url)  # a session the test left open, in a transaction
        other.execute("SELECT * FROM runs FOR UPDATE").fetchall()
    pg_cluster.give_back(url)
    assert pg_cluster.store_database() == url
    with psycopg.connect(url, autocommit=True) as conn:
        assert {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall())
                for t in ("counters", "runs")} == fresh  # fmt: skip
        assert conn.execute("SELECT count(*) FROM threads").fetchone() == (0,)
        assert conn.execute("SELECT version FROM agentdeck_schema").fetchall() == [(VERSION,)]
        conn.execute(EVENT)
        assert conn.execute("SELECT id FROM events").fetchall() == [(1,)]  # identities restart
    with pytest.raises(psycopg.OperationalError):  # its session was ended
        other.execute("SELECT 1")
    other.close()
