"""`agentdeck invoke`: any text on any thread is a turn (done or waiting) or one line, exit 2.

The offline model answers, so generated text reaches its tools: the ones that act outside
the room (shell, write_file, http_get) wait for approval, and nothing here approves.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.rooms import ROOMY, cli, integrity, one_line, scratch
from tests.fuzz.values import texts

# What the offline model acts on, followed by anything.
VERBS = st.sampled_from(["", "calc ", "read ", "list files ", "what time is it ", "write x to ",
                         "fetch http://127.0.0.1:9/ ", "run `ls` and "])  # fmt: skip
requests = st.tuples(VERBS, texts | st.text()).map("".join)
threads = st.sampled_from(["invoke:default", "t", "chat:main"]) | texts | st.text(max_size=600)


@ROOMY
@given(requests, threads)
@example("calc 1+1", "")  # found here: a traceback from SubmitBody (and at 600 characters)
@example("calc 1+1 \udcff", "t")  # found here: argv's undecodable byte, a traceback
@example("calc 9**9**9**9", "t")
@example("read ../../etc/passwd", "t")
def test_invoke_is_a_turn_or_one_line(text: str, thread: str) -> None:
    with scratch() as room:
        code, out, err = cli(
            "--room", str(room), "invoke", f"--thread={thread}", "--json", "--", text
        )
        assert code in (0, 2, 3), (code, err)
        if code == 2:
            one_line(err)
        else:
            assert err == "" and out.count("\n") == 1
        if (room / "execution.db").exists():
            assert integrity(room / "execution.db") == "ok"
