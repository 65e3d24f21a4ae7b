"""Reading a room's history without owning it: the public face of the history reader.

The reader itself, and its SQL, is `engine.store.history` (see its docstring for the
shapes it returns); this module names what its users (the CLI, the console, programs)
may rely on.
"""

from engine.store.history import (
    READ_ERRORS,
    STATUSES,
    Filters,
    History,
    HistoryError,
    Page,
    UnknownTurn,
    connect_readonly,
    parse_time,
)
from engine.store.history.filters import fts_query

__all__ = ["READ_ERRORS", "STATUSES", "Filters", "History", "HistoryError", "Page",
           "UnknownTurn", "connect_readonly", "fts_query", "parse_time"]  # fmt: skip
