"""The truth layer: one `Store` interface (engine/store/base.py), with execution.db on SQLite
and a PostgreSQL database as its two implementations, each written by one writer thread
(group commit)."""

from engine.store.base import DiskFull, LeaseLost, Op, Store, StoreError, json_or_text

__all__ = ["DiskFull", "LeaseLost", "Op", "Store", "StoreError", "json_or_text"]
