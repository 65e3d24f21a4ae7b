"""The process's cyclic garbage collector, once a runtime has started.

Python collects its young generation after every 700 allocations (net of deallocations) of
objects that can hold references, and everything it has when enough has grown old. A runtime
running turns allocates such objects at every step, so a busy one collected its young
generation every few dozen steps (0.25 ms each), the middle one every few hundred (1.3 ms)
and, every few seconds, the whole heap: the modules, the config, the tools' schemas and
whatever the turns keep, 60-120 ms during which no turn moves and no request is admitted
(bench_throughput --short --offline: 45 us of CPU per step, 6 full collections in 15 s).

What exists once the runtime has started lives as long as the process, so it is moved out
of the collector's reach (`gc.freeze`), and the young generation is collected every 1,000
allocations instead of 700: 18-23 us per step, full collections of 25 ms over what the
turns made since. The middle generation is collected after 5 young collections instead of
10: as much CPU, and its pauses, which an admission may wait behind, 1.2-1.5 ms instead of
1.9-2.5. Done once per process, and only where nobody tuned the collector before (a
console's own, console/collector.py, is left as it is).
"""

from __future__ import annotations

import gc

PYTHON_DEFAULT = (700, 10, 10)
THRESHOLDS = (1_000, 5, 10)
_settled = False


def settle() -> None:
    """Freeze what exists and set the thresholds, the first time a runtime has started in a
    process whose collector nobody tuned (never twice: what was frozen stays frozen)."""
    global _settled
    if _settled:
        return
    _settled = True
    if gc.get_freeze_count() or gc.get_threshold() != PYTHON_DEFAULT or not gc.isenabled():
        return
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
