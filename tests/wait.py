"""Waiting in tests: on state, never on time.

Every test that waits for something uses `until` (in a coroutine) or `until_sync` (in a
plain function, or a thread): they poll a probe until its value is what the test waits
for, with a deadline generous enough for a loaded 2-core machine, and when they give up
they say what was awaited and what the probe last returned. A fixed sleep is only ever
the behaviour under test (a silence that must stay silent, a clock that must pass), with
a comment saying so.

`PATIENCE` (seconds, `AGENTDECK_TEST_PATIENCE` in the environment, 60 by default) is the
one deadline; a test that waits for something slower by nature (a cluster's lease to
lapse, a soak) passes a multiple of it.
"""

from __future__ import annotations

import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")

PATIENCE = float(os.environ.get("AGENTDECK_TEST_PATIENCE", "60"))


class NeverHappened(AssertionError):
    """What a test waited for did not happen within its deadline."""


def _message(what: str, within: float, last: object, seen: Callable[[], object] | None) -> str:
    said = repr(last)
    if len(said) > 2000:
        said = said[:2000] + f"… ({len(said)} characters)"
    text = f"not within {within:g} s: {what}\nlast seen: {said}"
    if seen is not None:
        try:
            text += f"\nthen: {seen()}"
        except Exception as exc:  # the description must not hide the failure
            text += f"\nthen: (describing it failed: {exc!r})"
    return text


async def until(
    probe: Callable[[], T | Awaitable[T]],
    what: str,
    *,
    ok: Callable[[T], object] = bool,
    within: float = PATIENCE,
    every: float = 0.02,
    tick: Callable[[], Awaitable[object]] | None = None,
    seen: Callable[[], object] | None = None,
) -> T:
    """The value of `probe()` (awaited if it gives an awaitable) once `ok(value)` holds.

    Polls every `every` seconds (or by awaiting `tick()`: a Pilot test passes
    `pilot.pause`, so the app draws between looks) and fails after `within` seconds with
    `what`, the probe's last value and, given `seen`, what `seen()` describes then.
    """
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if ok(value):  # type: ignore[arg-type]
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise NeverHappened(_message(what, within, value, seen))
        if tick is not None:
            await tick()
        else:
            await anyio.sleep(every)


def until_sync(
    probe: Callable[[], T],
    what: str,
    *,
    ok: Callable[[T], object] = bool,
    within: float = PATIENCE,
    every: float = 0.05,
    seen: Callable[[], object] | None = None,
) -> T:
    """`until` for code that is not a coroutine (a test driving processes, a thread)."""
    deadline = time.monotonic() + within
    while True:
        value = probe()
        if ok(value):
            return value
        if time.monotonic() >= deadline:
            raise NeverHappened(_message(what, within, value, seen))
        time.sleep(every)
