"""Which store a room's runtime opens: SQLite (the room's execution.db, the default) or a
PostgreSQL database named by a URL.

The URL comes from the environment variable AGENTDECK_STORE_URL, else from agentdeck.toml's
`[store] url`. A URL in agentdeck.toml must not hold a password (the file is not a place
for secrets): libpq finds one in PGPASSFILE (~/.pgpass), a service file (`service=` in
the URL, PGSERVICEFILE) or PGPASSWORD, or the whole URL goes in AGENTDECK_STORE_URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from engine.store.sqlite import SqliteStore, Store, StoreError

if TYPE_CHECKING:
    from engine.config import StoreConfig

ENV = "AGENTDECK_STORE_URL"
SCHEMES = ("postgresql://", "postgres://")


def store_url(config: StoreConfig, env: Mapping[str, str] = os.environ) -> str | None:
    """The PostgreSQL URL the store is to use (None: the room's SQLite file)."""
    if config.url and _has_password(config.url):
        raise StoreError(
            "agentdeck.toml's [store] url holds a password: put the URL in "
            f"{ENV}, or the password in a PGPASSFILE or a libpq service file"
        )
    url = env.get(ENV) or config.url
    if not url:
        return None
    if not url.startswith(SCHEMES):
        raise StoreError(f"the store URL must start with postgresql:// ({ENV} or [store] url)")
    return url


def _has_password(url: str) -> bool:
    try:
        from psycopg import conninfo
    except ImportError:  # cannot parse it: look for the usual spellings
        head = url.split("?", 1)[0].split("@", 1)
        return (len(head) == 2 and ":" in head[0].split("//", 1)[-1]) or "password=" in url
    try:
        return bool(conninfo.conninfo_to_dict(url).get("password"))
    except Exception:  # noqa: BLE001 - unreadable: the store refuses it when it opens
        return "password" in url


def on_postgres(config_path: Path, env: Mapping[str, str] = os.environ) -> bool:
    """Whether a room whose agentdeck.toml is `config_path` keeps its store on PostgreSQL
    (a config that cannot be read: not known to, so False; the runtime reports it)."""
    if env.get(ENV):
        return True
    from engine.config import ConfigError, StoreConfig, load_section

    try:
        return bool(load_section(config_path, "store", StoreConfig).url)
    except ConfigError:
        return False


def room_store_url(config_path: Path, env: Mapping[str, str] = os.environ) -> str | None:
    """The PostgreSQL URL of the room whose agentdeck.toml is `config_path` (None: its
    SQLite file; also when the config cannot be read, as `on_postgres`). A password in
    agentdeck.toml: StoreError, as when the runtime opens."""
    from engine.tomlfile import ConfigError, read_toml

    try:
        if "store" not in read_toml(config_path) and not env.get(ENV):
            return None  # (without loading the config's models: the common case)
        from engine.config import StoreConfig, load_section

        config = load_section(config_path, "store", StoreConfig)
    except ConfigError:
        from engine.config import StoreConfig

        config = StoreConfig()
    return store_url(config, env)


def display(url: str) -> str:
    """The URL as it may be shown: without its password."""
    try:
        from engine.store.pg.store import display_url
    except ImportError:  # no psycopg to read it: the scheme only
        return "postgresql://(psycopg is not installed to read the URL)"
    return display_url(url)


async def open_store(
    db: Path, config: StoreConfig, env: Mapping[str, str] = os.environ, *, shared: bool = False
) -> Store:
    """The room's store: PostgreSQL when a URL is set (store_url), else SQLite at `db`.
    `shared`: opened by one worker of a cluster (PostgreSQL only)."""
    url = store_url(config, env)
    if url is None:
        if shared:
            raise StoreError("[cluster] needs the store on PostgreSQL ([store] url or "
                             f"{ENV}): workers share its database")  # fmt: skip
        return await SqliteStore.open(db, config.synchronous)
    try:
        from engine.store.pg.store import PgStore
    except ImportError as exc:
        raise StoreError("a PostgreSQL store needs psycopg: pip install 'agentdeck[postgres]'"
                         ) from exc  # fmt: skip
    return await PgStore.open(url, shared=shared)
