"""The step benchmark's loop on LangGraph, for `bench_steps --peer`.

The same loop as agentdeck's: a zero-latency model that calls the no-op tool `noop` while
it has calls left, then answers "done"; a tool step that runs the call (LangGraph's own
`ToolNode`, routed by `tools_condition`, as its docs build an agent). The state is the
conversation (`MessagesState`), checkpointed by `SqliteSaver` after every step with
durability "sync" (each checkpoint is written before the next step starts), on a WAL
database with the same synchronous setting as agentdeck's room.

A loop is timed from one tool step's update to the next (perf_counter, taken when the
stream hands the update over, after its checkpoint), as agentdeck's from one tool-round
commit to the next.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

INSTALL = "pip install -e '.[bench]'  (langgraph, langgraph-checkpoint-sqlite)"


def available() -> bool:
    """LangGraph and its SQLite checkpointer are installed."""
    try:
        import langgraph.checkpoint.sqlite  # noqa: F401
        import langgraph.graph  # noqa: F401
    except ImportError:
        return False
    return True


class Peer:
    """One LangGraph agent graph over a SqliteSaver database in `root`."""

    def __init__(self, root: Path, synchronous: str) -> None:
        from langchain_core.messages import AIMessage
        from langchain_core.tools import tool
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode, tools_condition

        @tool
        def noop() -> str:
            """Does nothing."""
            return "ok"

        self.remaining = 0
        self.n = 0

        def model(state: MessagesState) -> dict[str, Any]:
            if self.remaining > 0:
                self.remaining -= 1
                self.n += 1
                call = {"name": "noop", "args": {}, "id": f"n{self.n}", "type": "tool_call"}
                return {"messages": [AIMessage(content="", tool_calls=[call])]}
            return {"messages": [AIMessage(content="done")]}

        self.conn = sqlite3.connect(root / "langgraph.db", check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={synchronous}")
        self.saver = SqliteSaver(self.conn)
        builder = StateGraph(MessagesState)
        builder.add_node("model", model)
        builder.add_node("tools", ToolNode([noop]))
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
        self.graph = builder.compile(checkpointer=self.saver)

    def close(self) -> None:
        self.conn.close()

    def turn(self, thread_id: str, steps: int) -> list[tuple[int, float]]:
        """One turn of `steps` loops; (conversation length at loop start, seconds) per loop
        between two tool steps."""
        from langchain_core.messages import HumanMessage

        self.remaining = steps
        config: Any = {"configurable": {"thread_id": thread_id}, "recursion_limit": 4 * steps + 10}
        marks: list[tuple[float, int]] = []
        length = self.length(thread_id) + 1
        for update in self.graph.stream(
            {"messages": [HumanMessage(content="go")]}, config, stream_mode="updates",
            durability="sync",
        ):  # fmt: skip
            for node, value in update.items():
                length += len(value["messages"]) if value else 0
                if node == "tools":
                    marks.append((time.perf_counter(), length))
        return [(n0, t1 - t0) for (t0, n0), (t1, _) in zip(marks, marks[1:], strict=False)]

    def length(self, thread_id: str) -> int:
        state = self.graph.get_state({"configurable": {"thread_id": thread_id}})
        return len(state.values.get("messages", ()))

    def prefill(self, thread_id: str, length: int, per_turn: int) -> None:
        """Short turns until the conversation has about `length` messages."""
        while (have := self.length(thread_id)) < length:
            self.turn(thread_id, min(per_turn, max(0, (length - have - 2) // 2)))
