"""Forks and replays in the history reader (engine/store/history/lineage.py): a page of threads
as a tree (the threads made from each beneath it, depth first, a listed one not repeated),
turn rows and a turn's detail saying where their thread came from and what was made from
the turn, and what a fork at a step would copy (as engine/api/forkbook.py copies it). On
SQLite and PostgreSQL; a room before forks reads as before (tests/test_kept_rooms.py)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from engine.api.fork_models import ForkBody, ReplayBody
from engine.api.history import History, UnknownTurn
from engine.api.local import LocalClient
from engine.domain.forks import branches, cut
from engine.store.history import lineage
from tests.helpers import msg, rows, runtime
from tests.test_forks import add, adding
from tests.wait import PATIENCE

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("store_backend")]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_branches_and_the_cut() -> None:
    depths = [0, 1, 2, 2, 1, 0, 1, 2]
    assert branches(depths) == ["", "├─ ", "│  ├─ ", "│  └─ ", "└─ ", "", "└─ ", "   └─ "]
    assert branches([]) == []
    roles = ["user", "assistant", "tool", "tool", "assistant"]
    assert cut(roles, 2) == 4  # an inference that made calls: with their results
    assert cut(roles, 4) == 4 and cut(roles, 1) == 1 and cut(roles, 5) == 5
    assert cut(["user", "tool"], 1) == 1  # results of no assistant's calls: not extended


async def test_the_tree_of_threads_and_where_each_came_from(tmp_path: Path) -> None:
    async with runtime(tmp_path, adding(1), tools=[add]) as rt:
        client = LocalClient(rt)
        out = await rt.run_turn(msg("go"))
        other = await rt.run_turn(msg("go", "t2"))
        [(first,), *_] = await rows(rt, "SELECT id FROM steps WHERE turn_id = ? ORDER BY id",
                                    out.turn_id)  # fmt: skip
        a = await client.fork(ForkBody(turn_id=out.turn_id, step_id=first, thread_id="a",
                                       edits={"2": "41"}))  # fmt: skip
        with anyio.fail_after(PATIENCE):
            a_out = await rt.wait_turn(a.turn_id or "")
        [(a_step,), *_] = await rows(rt, "SELECT id FROM steps WHERE turn_id = ? ORDER BY id",
                                     a_out.turn_id)  # fmt: skip
        ab = await client.fork(ForkBody(turn_id=a_out.turn_id, step_id=a_step, thread_id="a.b"))
        with anyio.fail_after(PATIENCE):
            await rt.wait_turn(ab.turn_id or "")
        r = await client.replay(ReplayBody(turn_id=out.turn_id, thread_id="r"))
        with anyio.fail_after(PATIENCE):
            await rt.wait_turn(r.turn_id or "")
        room = rt.room
    async with History(room) as h:
        page = await h.threads()
        tree = await h.tree(page.items)
        drawn = [(row["branch"] + row["thread_id"], row["depth"]) for row in tree]
        # t1's forks beneath it (a fork of a fork beneath that), each thread once; t2 alone
        assert sorted(drawn) == sorted([("t1", 0), ("├─ a", 1), ("│  └─ a.b", 2), ("└─ r", 1),
                                        ("t2", 0)])  # fmt: skip
        t1 = next(i for i, row in enumerate(tree) if row["thread_id"] == "t1")
        assert [row["thread_id"] for row in tree[t1 : t1 + 4]] == ["t1", "a", "a.b", "r"]
        said = {row["thread_id"]: row["origin"] and row["origin"]["said"] for row in tree}
        assert said == {"t1": None, "t2": None, "r": f"replay of turn {out.turn_id}",
                        "a": f"fork of t1 at step {first} (turn {out.turn_id})",
                        "a.b": f"fork of a at step {a_step} (turn {a_out.turn_id})"}  # fmt: skip
        assert tree[t1 + 1]["origin"]["edited"] == {"2": "41"}
        # a chain deeper than lineage.DEPTH is drawn at that depth (each says its origin)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(lineage, "DEPTH", 1)
            flat = {row["thread_id"]: (row["branch"], row["depth"])
                    for row in await h.tree(page.items)}  # fmt: skip
        assert flat["a.b"] == ("├─ ", 2) and flat["r"] == ("└─ ", 1)
        # one page of one thread: its forks are still drawn beneath it (read by their source)
        top = await h.threads(limit=1)
        assert len(await h.tree(top.items)) >= 1
        # turn rows and a turn's detail
        turns = {t["thread_id"]: t for t in (await h.turns()).items}
        assert turns["a"]["origin"]["from_step"] == first and turns["t1"]["origin"] is None
        detail = await h.turn(out.turn_id)
        assert detail["origin"] is None
        assert [(f["thread_id"], f["kind"]) for f in detail["forks"]] == [("a", "fork"),
                                                                          ("r", "replay")]  # fmt: skip
        assert (await h.turn(a_out.turn_id))["origin"]["thread_id"] == "a"
        assert (await h.turn(other.turn_id))["forks"] == []
        # what a fork at the first step would copy: the message, the call and its result
        preview = await h.fork_preview(out.turn_id, first)
        assert (preview["thread_id"], preview["upto"]) == ("t1", 3)
        assert [(e["seq"], e["role"], e["editable"]) for e in preview["entries"]] == [
            (0, "user", True), (1, "assistant", False), (2, "tool", True)]  # fmt: skip
        assert [e["seq"] for e in (await h.fork_preview(out.turn_id, first, show=1))["entries"]] \
            == [2]  # fmt: skip
        with pytest.raises(UnknownTurn):
            await h.fork_preview(out.turn_id, 10**6)
