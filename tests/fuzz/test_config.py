"""agentdeck.toml: any file is a Config or one ConfigError line, also through `agentdeck info`."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from engine.config import ConfigError, load_config
from tests.fuzz.rooms import ROOMY, cli, one_line, scratch
from tests.fuzz.values import mangled, texts, toml_document, toml_values

KEYS = {
    "store": ["synchronous"],
    "model": ["provider", "model", "base_url", "offline_delay", "connect_timeout",
              "read_timeout", "request_timeout", "retry_after_max", "max_event_bytes"],
    "runtime": ["max_running_turns", "tool_concurrency", "max_rounds", "plan_max_rounds",
                "turn_timeout", "max_consecutive_errors", "shell_timeout", "tool_timeout",
                "tool_timeouts", "max_result_bytes", "secret_env"],
    "pulse": ["interval", "will_interval", "agent"],
    "server": ["listen", "allow_remote", "max_body", "event_buffer"],
}  # fmt: skip
GROUP_KEYS = ["priority", "max_running_turns", "max_queued_turns", "overflow_policy",
              "coalesce", "paused", "strategy"]  # fmt: skip
# Values a real file holds, so that generated files get past the first check often.
PLAUSIBLE = st.sampled_from([
    "FULL", "NORMAL", "offline", "openai", "anthropic", "gpt-4o", "http://127.0.0.1:9/v1",
    "not a url", "127.0.0.1:8700", "[::1]:8700", "localhost:99999", "10.0.0.5", "react",
    "direct", "plan_execute", "reject", "drop_oldest", "newest", "none", True, False,
    0, 1, 2, -1, 5, 1024, 0.0, 0.5, 30.0, 1e9, ["GH_TOKEN"], [""], {"shell": 60},
    {"shell": 0},
])  # fmt: skip
values = PLAUSIBLE | toml_values


@st.composite
def documents(draw: st.DrawFn) -> str:
    """A TOML document of the sections agentdeck.toml knows (and some it does not)."""
    doc = {}
    for section in draw(st.lists(st.sampled_from([*KEYS, "groups", "threads"]), max_size=4)):
        if section in KEYS:
            keys = st.sampled_from(KEYS[section]) | texts
            doc[section] = draw(st.dictionaries(keys, values, max_size=4))
        else:
            names = st.sampled_from(["chat", "task", "chore", "will", "chat:main"]) | texts
            inner = st.dictionaries(st.sampled_from(GROUP_KEYS) | texts, values, max_size=3)
            doc[section] = draw(st.dictionaries(names, inner | values, max_size=3))
    doc |= draw(st.dictionaries(texts, values, max_size=2))  # stray top-level keys
    return toml_document(doc)


files = (
    documents().map(str.encode)
    | mangled(documents()).map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.text().map(lambda t: t.encode("utf-8", "surrogatepass"))
    | st.binary(max_size=200)
)


@given(files)
@example(b'"\\n" = "FULL"\n')  # found here: a key with a newline broke the line
@example(b"[groups.chat]\npriority = " + b"9" * 4301 + b"\n")  # found here: a traceback
def test_load_config_returns_a_config_or_one_line_error(raw: bytes) -> None:
    with scratch() as room:
        path = room / "agentdeck.toml"
        path.write_bytes(raw)
        try:
            load_config(path)  # a Config (its type says so), or one of:
        except ConfigError as exc:
            text = str(exc)
            assert text.startswith(f"{path}: ") and "\n" not in text and "\r" not in text, text


@ROOMY
@given(files)
@example(b"[model]\nprovider = 'openai'\nbase_url = 'nope'\n")
def test_info_on_any_config_exits_0_or_2_with_one_line(raw: bytes) -> None:
    with scratch() as room:
        (room / "agentdeck.toml").write_bytes(raw)
        code, out, err = cli("--room", str(room), "info")
        assert code in (0, 2), (code, err)
        assert "Traceback" not in out
        if code == 2:
            assert "agentdeck.toml" in one_line(err)
        else:
            assert err == "" and out.startswith("agentdeck ")
