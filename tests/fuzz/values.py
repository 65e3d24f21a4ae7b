"""Generators of wild input, shared by the properties: JSON and TOML values and their text.

Each leans on what broke the room before (issue 13): integers past the 4,300 digits Python
prints, nesting past the recursion limit, inf and nan, unicode and control characters,
the wrong type where a string or a table belongs. Deep nesting and huge numbers are built
as text, because Python's own encoders refuse them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from hypothesis import strategies as st

# Depths around the limits: decided arguments stop at 64, the recursion limit near 1,000.
DEPTHS = st.sampled_from([2, 63, 64, 65, 100, 600, 999, 1000, 1500, 5000])
HUGE_INTS = st.sampled_from([2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**100, -(10**300)])
DIGITS = st.sampled_from([19, 20, 309, 4300, 4301, 5000])  # lengths of numbers sent as text

texts = st.text(max_size=40) | st.sampled_from(["", " ", "\n", "\x00", "\u2028", "é", "🦜"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | HUGE_INTS
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(texts, json_values, max_size=5)


@st.composite
def deep_json(draw: st.DrawFn) -> str:
    """JSON text nested DEPTHS deep in arrays, objects or both, maybe inside an object."""
    depth = draw(DEPTHS)
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}"), ('[{"a":', "}]")]))
    leaf = draw(st.sampled_from(["1", '"x"', "null", "[]", "{}"]))
    text = opener * depth + leaf + closer * depth
    return '{"k": ' + text + "}" if draw(st.booleans()) else text


@st.composite
def huge_number_json(draw: st.DrawFn) -> str:
    """A JSON object holding an integer (or float) of DIGITS digits."""
    digits = "7" * draw(DIGITS)
    number = draw(st.sampled_from([digits, "-" + digits, digits + ".5", "1e" + digits[:4]]))
    return draw(st.sampled_from(['{"a": %s}', "[%s]", "%s", '{"a": 1, "b": {"c": %s}}'])) % number


@st.composite
def mangled(draw: st.DrawFn, base: st.SearchStrategy[str]) -> str:
    """`base` text cut short, or with a piece of noise spliced in somewhere."""
    text = draw(base)
    at = draw(st.integers(0, len(text)))
    noise = draw(st.sampled_from(["", "{", "}", "[", "]", '"', ",", ":", "\\", "\x00", "🦜"]))
    return text[:at] + noise if draw(st.booleans()) else text[:at] + noise + text[at:]


def dumps(value: Any) -> str:
    """JSON text of `value` as Python writes it (NaN and Infinity included), or null if
    Python cannot write it."""
    try:
        return json.dumps(value)
    except (ValueError, RecursionError):
        return "null"


json_texts = (
    json_values.map(dumps)
    | json_objects.map(dumps)
    | deep_json()
    | huge_number_json()
    | mangled(json_objects.map(dumps))
    | st.text(max_size=60)
)


# -- TOML -----------------------------------------------------------------------------------


class Raw(str):
    """A TOML value written as this text exactly (a number past 4,300 digits, a deep array)."""


toml_scalars = (
    st.booleans()
    | st.integers()
    | HUGE_INTS
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
    | st.datetimes(timezones=st.none() | st.just(dt.UTC))
    | st.dates()
    | st.times()
    | DIGITS.map(lambda n: Raw("9" * n))
    | DEPTHS.map(lambda n: Raw("[" * n + "1" + "]" * n))
)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (JSON's escapes, but astral characters as they are:
    TOML refuses the surrogate pairs JSON would write for them)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_key(key: str) -> str:
    bare = key.isascii() and key.replace("_", "a").replace("-", "a").isalnum()
    return key if bare else toml_string(key)


def toml_value(value: Any) -> str:
    """`value` as TOML text (inline tables for dictionaries)."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return ("-inf" if value < 0 else "inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml_document(data: dict[str, Any]) -> str:
    """`data` as a TOML document: scalars at the top, then one table per dictionary."""
    tables = {k: v for k, v in data.items() if isinstance(v, dict) and not isinstance(v, Raw)}
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in data.items() if k not in tables]
    for name, table in tables.items():
        lines.append(f"[{toml_key(name)}]")
        lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
