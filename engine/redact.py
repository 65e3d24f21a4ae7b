"""Keys stay out of what tools start and out of the truth layer.

A tool's processes get the runtime's environment without the provider keys and without
any variable `[runtime] secret_env` names, so `env` in a shell call shows none of them.
A key can still reach a result some other way (a file that holds it, a user tool reading
the runtime's own environment), so every result and error is also searched for those
variables' values, which are masked before the call is committed: once in execution.db, a
key would be in the messages, the search index and every history export.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

PROVIDER_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
MIN_MASKED = 8  # shorter values are not searched for: they would mask ordinary text


@dataclass(frozen=True)
class Secrets:
    """The variables tools must not see, and their values now (longest first)."""

    names: frozenset[str]
    values: tuple[tuple[str, str], ...]  # (name, value)

    @classmethod
    def from_env(cls, extra: Iterable[str] = (), env: Mapping[str, str] | None = None) -> Secrets:
        """The provider keys and the `extra` names, with their values in `env` (default:
        this process's environment)."""
        env = os.environ if env is None else env
        names = frozenset((*PROVIDER_KEYS, *extra))
        found = {(n, env[n]) for n in names if len(env.get(n, "")) >= MIN_MASKED}
        return cls(names, tuple(sorted(found, key=lambda nv: (-len(nv[1]), nv[0]))))

    def tool_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """`env` (default: this process's) without the secret variables."""
        env = os.environ if env is None else env
        return {k: v for k, v in env.items() if k not in self.names}

    def mask(self, text: str) -> str:
        """`text` with each secret value, as is or as JSON escapes it, replaced by a mark
        that names its variable."""
        for name, value in self.values:
            for form in (
                value,
                json.dumps(value)[1:-1],
                json.dumps(value, ensure_ascii=False)[1:-1],
            ):
                if form in text:
                    text = text.replace(form, f"[{name} masked]")
        return text
