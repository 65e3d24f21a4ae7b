"""Keys stay out of what tools start and out of the truth layer.

A tool's processes get the runtime's environment without the provider keys, without any
variable `[runtime] secret_env` names and without the variables the room's channels take
their tokens and signing secrets from (every `*_env` of channels.toml and hooks.toml), so
`env` in a shell call shows none of them.
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
from urllib.parse import quote, quote_plus

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
        """`text` with each secret value replaced by a mark that names its variable: as is,
        as JSON escapes it, URL-encoded, upper- or lower-cased, and each half of a long one
        (services echo a token so: in a URL, an upper-cased header, split over two lines)."""
        for whole in (True, False):  # every value whole before any by its halves
            for name, value in self.values:
                for form in _forms(value) if whole else _halves(value):
                    if form in text:
                        text = text.replace(form, f"[{name} masked]")
        return text


def _forms(value: str) -> list[str]:
    """The spellings of `value` that are masked, longest first, each once."""
    forms = [value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             quote(value, safe=""), quote_plus(value), value.upper(), value.lower()]  # fmt: skip
    return sorted(dict.fromkeys(forms), key=len, reverse=True)


def _halves(value: str) -> list[str]:
    """A long value's two halves (a service that splits it over two lines)."""
    if len(value) < 2 * MIN_MASKED:
        return []
    half = len(value) // 2
    return [value[:half], value[half:]]
