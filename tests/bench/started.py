"""When this process started, for benchmarks that time a start from the very beginning."""

from __future__ import annotations

import os
import time


def process_age() -> float:
    """Seconds since this process started (from /proc, to 10 ms)."""
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
