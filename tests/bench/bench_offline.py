"""The offline model's cost per step at thread lengths 50, 200 and 800 messages.

    .venv/bin/python -m tests.bench.bench_offline [--rounds N]

Two parts, each at every length, measured in the same run:

- the model alone: microseconds per inference of `OfflineModel.events` on a thread's
  requests as a turn sends them (`calc 1+1`: a call, then its answer), by a model that
  carries its reading of the thread from one request to the next (as the runtime's one
  model does), beside a fresh model per request, which reads the whole thread each time
  (what every inference cost before issue 35);
- end to end: microseconds per step of `calc 1+1` turns through one runtime with the
  offline model (SQLite, synchronous=NORMAL), the thread pre-filled by such turns.

Target (information only; the exit status never depends on time): the offline model
costs O(1) per step, so a step at 800 messages within 1.2x of one at 50, both alone and
end to end. Medians of `--rounds` rounds are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `engine` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from engine.config import Config, StoreConfig
from engine.domain.messages import ConvMessage, Message
from engine.providers.base import AssistantAccumulator, ModelRequest
from engine.providers.offline import OfflineModel
from engine.runtime import Runtime

LENGTHS = (50, 200, 800)
TOOLS = [{"name": "calc"}, {"name": "clock"}]
MEASURED = 12  # turns per length and round (4 messages each: centred on the length)
MAX_GROWTH = 1.2


def _reply(model: OfflineModel, msgs: list[ConvMessage]) -> ConvMessage:
    acc = AssistantAccumulator()
    for event in model.events(ModelRequest(list(msgs), TOOLS, system="be brief")):
        acc.add(event)
    return acc.message()


def _turn(model: OfflineModel, msgs: list[ConvMessage], timed: list[float] | None) -> None:
    """One `calc 1+1` turn appended to `msgs`: a call, its result, the answer."""
    msgs.append(ConvMessage(role="user", text="calc 1+1"))
    for _ in range(2):
        start = time.perf_counter()
        answer = _reply(model, msgs)
        if timed is not None:
            timed.append(time.perf_counter() - start)
        msgs.append(answer)
        for call in answer.tool_calls:
            msgs.append(ConvMessage(role="tool", text="2", tool_call_id=call.id,
                                    tool_name=call.name))  # fmt: skip


def alone(length: int) -> tuple[float, float]:
    """Microseconds per inference at about `length` messages: carried on, and fresh."""
    model, msgs = OfflineModel(), []
    while len(msgs) < length - 2 * MEASURED:  # (then the measured turns: +/- 2 * MEASURED)
        _turn(model, msgs, None)
    carried: list[float] = []
    for _ in range(MEASURED):
        _turn(model, msgs, carried)
    fresh: list[float] = []
    for _ in range(MEASURED):  # (a fresh model per request: the whole thread read)
        start = time.perf_counter()
        OfflineModel().events(ModelRequest(list(msgs), TOOLS, system="be brief"))
        fresh.append(time.perf_counter() - start)
    return statistics.median(carried) * 1e6, statistics.median(fresh) * 1e6


async def end_to_end(root: Path) -> dict[int, float]:
    """Microseconds per step of `calc 1+1` turns at each length, through one runtime."""
    config = Config(store=StoreConfig(synchronous="NORMAL"))  # type: ignore[arg-type]
    out: dict[int, float] = {}
    async with Runtime.open(root, kind="run", provider=OfflineModel(), config=config) as rt:

        async def turn(thread: str) -> None:
            msg = Message(origin="invoke", sender="bench", thread_id=thread, text="calc 1+1")
            assert (await rt.run_turn(msg)).status == "done"

        await turn("warmup")
        for length in LENGTHS:
            thread = f"t{length}"
            conv = await rt.conversation(thread)
            while len(conv.messages) < length - 2 * MEASURED:
                await turn(thread)
            start = time.perf_counter()
            for _ in range(MEASURED):
                await turn(thread)
            out[length] = (time.perf_counter() - start) / (2 * MEASURED) * 1e6  # 2 steps
    return out


def main(rounds: int) -> None:
    print(f"offline model per step at {', '.join(map(str, LENGTHS))} messages; medians of "
          f"{rounds} rounds, {MEASURED} turns of `calc 1+1` (two inferences each) per length "
          f"and round, centred on it")  # fmt: skip
    ours: dict[int, list[float]] = {n: [] for n in LENGTHS}
    fresh: dict[int, list[float]] = {n: [] for n in LENGTHS}
    runs: dict[int, list[float]] = {n: [] for n in LENGTHS}
    with tempfile.TemporaryDirectory(prefix="agentdeck-bench-") as tmp:
        for r in range(rounds):
            for length in LENGTHS:
                a, b = alone(length)
                ours[length].append(a)
                fresh[length].append(b)
            for length, us in anyio.run(end_to_end, Path(tmp) / f"room-{r}").items():
                runs[length].append(us)
    med = {k: {n: statistics.median(v[n]) for n in LENGTHS} for k, v in
           (("ours", ours), ("fresh", fresh), ("runs", runs))}  # fmt: skip
    header = (f"{'length':>7}{'model us/inference':>20}{'fresh model us':>16}"
              f"{'runtime us/step':>17}")  # fmt: skip
    print(header)
    print("-" * len(header))
    for n in LENGTHS:
        print(f"{n:>7}{med['ours'][n]:>20.1f}{med['fresh'][n]:>16.1f}{med['runs'][n]:>17.0f}")
    print()
    print("fresh model: one that never saw the thread, so it reads all of it (the cost of")
    print("every inference before the model carried its reading from one request on)")
    print()
    print("targets (information only):")
    top, low = max(LENGTHS), min(LENGTHS)
    for what, key in (("model alone", "ours"), ("runtime step", "runs")):
        growth = med[key][top] / med[key][low]
        verdict = "PASS" if growth <= MAX_GROWTH else "MISS"
        print(f"  {verdict}  {what}: at {top} / at {low} = {growth:.2f}x <= {MAX_GROWTH}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    main(parser.parse_args().rounds)
