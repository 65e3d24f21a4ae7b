"""The truth layer: execution.db in the room, written by one writer thread (group commit)."""

from engine.store.sqlite import DiskFull, LeaseLost, Op, Store, StoreError, json_or_text

__all__ = ["DiskFull", "LeaseLost", "Op", "Store", "StoreError", "json_or_text"]
