"""Hypothesis profiles for the fuzz suite: `ci` (the default) and `long`.

`ci` is small and derandomized with no example database, so a CI run is the same run
every time and adds seconds, not minutes (properties that open a room or run a turn take
half the examples: `rooms.ROOMY`). `long` (AGENTDECK_FUZZ=long) draws fresh random
examples, thousands per property (AGENTDECK_FUZZ_EXAMPLES to change), and lifts the
per-test timeout that would otherwise end it.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

LONG = os.environ.get("AGENTDECK_FUZZ", "").lower() == "long"
# Examples are slow by hypothesis's measure (a room, a turn) and some inputs are large on
# purpose (a 5,000-deep nesting): neither is a problem of the test.
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, database=None,
    suppress_health_check=_SLOW_OK, print_blob=True,
)  # fmt: skip
settings.register_profile(
    "long", max_examples=int(os.environ.get("AGENTDECK_FUZZ_EXAMPLES", "3000")), deadline=None,
    database=None, suppress_health_check=_SLOW_OK, print_blob=True,
)  # fmt: skip
settings.load_profile("long" if LONG else "ci")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a long run, a property may take many minutes: only a hang should end it."""
    if LONG:
        for item in items:
            if "tests/fuzz" in item.nodeid.replace("\\", "/"):
                item.add_marker(pytest.mark.timeout(3600))
