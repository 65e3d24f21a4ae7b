"""The truth layer: execution.db in the room, written one transaction per checkpoint."""

from engine.store.sqlite import Op, Store, StoreError, json_or_text

__all__ = ["Op", "Store", "StoreError", "json_or_text"]
