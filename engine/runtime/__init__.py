"""The runtime over a room: `Runtime` (runtime.py), the one API that answers the operator;
how it opens and closes (lifetime.py: own the room, open the store, pick the coordinator,
repair what a crash left, run its tasks, stop them); and `agent.run`, the small JSON file
that says what it runs (summary.py).

`Runtime` loads on first use, so a module that needs only a piece of the runtime's
package (a record, the summary) does not load the whole runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.runtime.runtime import Runtime

__all__ = ["Runtime"]


def __getattr__(name: str) -> Any:
    if name == "Runtime":
        from engine.runtime.runtime import Runtime

        return Runtime
    raise AttributeError(f"module 'engine.runtime' has no attribute {name!r}")
