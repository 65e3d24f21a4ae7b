"""Build a room with 1,000,000 steps for the history benchmark, quickly and deterministically.

    .venv/bin/python -m tests.bench.gen_history [--fresh] [--steps N] [--seed S] [--path DIR]

The shape of a busy agent over 90 days: ~50k turns across ~1k threads in 4 groups (chat,
task, chore, will), ~20 steps a turn (inference and tool rounds, a replay where a call was
decided), ~half a million tool calls of 12 tools (a few failed, some approved or denied by a
decision, a few still suspended), a message per user text, inference and call result, and
a checkpoint per step. Rows go in by direct SQL through the real schema, so its triggers
fill turn_marks and counters as the runtime's writes would, one transaction per 250 turns,
each followed by the runtime's batch (engine.store.sqlite.INDEX_BATCH: the calls' marks
and the full-text indexes), so the FTS indexes grow by segments as they would in life.

The room is cached under /tmp/agentdeck-bench-history (its `gen.json` names the seed and
size); it is reused unless --fresh or the parameters differ.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import sqlite3
import sys
import time
from importlib import resources
from pathlib import Path

from engine.store.sqlite import INDEX_BATCH

DEFAULT_PATH = Path("/tmp/agentdeck-bench-history")
VERSION = 4  # bump when the schema or the shape changes
BASE = 1_735_689_600.0  # 2025-01-01T00:00:00Z: the history covers the 90 days after it
DAYS = 90
GROUPS = {"chat": 0.55, "task": 0.25, "chore": 0.15, "will": 0.05}  # share of threads
TOOLS = {"read_file": 30, "shell": 18, "search": 14, "write_file": 10, "http_get": 8,
         "list_dir": 6, "python": 5, "sql_query": 3, "git": 2.5, "send_email": 1.5,
         "calendar": 1, "deploy": 0.4}  # fmt: skip
APPROVAL = {"shell", "send_email", "deploy", "write_file"}
WORDS = (
    "invoice report deploy cluster error timeout retry user order payment refund "
    "kubernetes pod node disk memory cpu latency queue backlog ticket customer email "
    "calendar meeting budget forecast summary draft review merge branch commit test "
    "failure warning config secret token permission denied approve schedule backup "
    "restore database index query migration rollback release version metric alert "
    "incident postmortem owner team weekly daily monthly quarter revenue churn"
).split()
BATCH = 250  # turns per transaction


def sentences(rng: random.Random, n: int) -> list[str]:
    """A pool of texts: common words, some numbers, and now and then a rare token."""
    out = []
    for i in range(n):
        words = rng.choices(WORDS, k=rng.randint(4, 14))
        if i % 50 == 0:
            words.append(f"needle{i // 50}")  # ~1 in 50 texts has a rare word
        if i % 7 == 0:
            words.append(str(rng.randint(100, 99999)))
        out.append(" ".join(words))
    return out


def schema() -> str:
    return resources.files("engine.store").joinpath("schema.sql").read_text()


def build(db: Path, steps_total: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    pool = sentences(rng, 20_000)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("PRAGMA cache_size=-262144")
    conn.executescript(schema())
    n_turns = steps_total // 20
    runs = [(f"r{i:04d}", rng.choice(["console", "run", "invoke"]), 1000 + i,
             BASE + i * DAYS * 86400 / 200, BASE + (i + 1) * DAYS * 86400 / 200, "ended")
            for i in range(200)]  # fmt: skip
    threads = []
    for i in range(1000):
        group = rng.choices(list(GROUPS), weights=list(GROUPS.values()))[0]
        threads.append((f"{group}:{i:04d}", group))
    tools, weights = list(TOOLS), list(TOOLS.values())
    busy = list(itertools.accumulate(1 / (i + 20) for i in range(len(threads))))  # a few busy
    # steps per turn: mean 20 (1..59), the last turn takes up the rest to hit steps_total
    sizes = [max(1, min(59, int(rng.expovariate(1 / 19)) + 1)) for _ in range(n_turns)]
    scale = steps_total / sum(sizes)
    sizes = [max(1, round(s * scale)) for s in sizes]
    sizes[-1] = max(1, sizes[-1] + steps_total - sum(sizes))
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO runs VALUES (?,?,?,?,?,?)", runs)
    conn.executemany("INSERT INTO thread_groups(name) VALUES (?)", [(g,) for g in GROUPS])
    conn.executemany(
        "INSERT INTO threads(id, group_name, created_at, updated_at) VALUES (?,?,?,?)",
        [(t, g, BASE, BASE) for t, g in threads],
    )
    conn.execute("COMMIT")
    step_id = call_n = dec_n = 0
    seq: dict[str, int] = {}
    counts = {"turns": 0, "steps": 0, "calls": 0, "messages": 0, "decisions": 0}
    span = DAYS * 86400 / n_turns
    for start in range(0, n_turns, BATCH):
        turns, steps, calls, decisions, messages, checkpoints = [], [], [], [], [], []
        for k in range(start, min(start + BATCH, n_turns)):
            thread, group = rng.choices(threads, cum_weights=busy)[0]
            origin = {"chat": rng.choice(["chat", "chat", "invoke"]), "task": "task",
                      "chore": "chore", "will": "will"}[group]  # fmt: skip
            at = BASE + k * span + rng.random() * span * 0.5
            run = runs[min(199, int(k * 200 / n_turns))][0]
            turn = f"t_{k:06x}"
            roll = rng.random()
            status, reason = ("done", "natural")
            if k >= n_turns - 40 and roll < 0.2:
                status, reason = "waiting", "suspended"
            elif roll < 0.005:
                reason = "error"
            elif roll < 0.008:
                reason = "cancelled"
            n = seq.get(thread, 0)
            text = pool[rng.randrange(len(pool))]
            messages.append(
                (thread, turn, n, "user", text, json.dumps({"role": "user", "text": text}), at)
            )
            n += 1
            t = at
            n_steps = sizes[k]
            for s in range(n_steps):
                step_id += 1
                kind = "inference" if s % 2 == 0 else "tool_round"
                t += rng.random() * 2
                summary = ""
                if kind == "inference":
                    text = pool[rng.randrange(len(pool))]
                    messages.append((thread, turn, n, "assistant", text,
                                     json.dumps({"role": "assistant", "text": text}), t))  # fmt: skip
                    n += 1
                    summary = text[:60]
                else:
                    last = s >= n_steps - 2 and status == "waiting"
                    for i in range(1 if rng.random() < 0.85 else 2):
                        call_n += 1
                        tool = rng.choices(tools, weights)[0]
                        args = json.dumps({"path": f"/srv/{rng.choice(WORDS)}/{call_n}.txt"}
                                          if tool != "shell" else
                                          {"command": f"{rng.choice(WORDS)} --{rng.choice(WORDS)}"})  # fmt: skip
                        cid, cstatus, result, error, dec = (
                            f"c_{call_n:07x}",
                            "succeeded",
                            pool[rng.randrange(len(pool))],
                            None,
                            None,
                        )
                        r = rng.random()
                        if last:
                            cstatus, result = "suspended", None
                        elif r < 0.015:
                            cstatus, result, error = (
                                "failed",
                                None,
                                f"error: {rng.choice(WORDS)} timeout after 30s",
                            )
                        elif tool in APPROVAL and r < 0.30:
                            dec_n += 1
                            dec = f"d_{dec_n:06x}"
                            cancel = rng.random() < 0.1
                            decisions.append((dec, cid, "cancel" if cancel else "resume", None, None, 0,
                                              "not now" if cancel else "", None,
                                              rng.choice(["operator", "alice", "bob", "policy"]),
                                              "applied", None, t, t + 1))  # fmt: skip
                            if cancel:
                                cstatus, result, error = (
                                    "cancelled",
                                    None,
                                    "denied by operator: not now",
                                )
                        calls.append((cid, f"m{call_n}", turn, thread, step_id - 1, i, tool, args,
                                      cstatus, result, error, "needs approval" if dec or last else None,
                                      dec, 2, t, t + 0.5, None if last else t + 0.5))  # fmt: skip
                        if not last:
                            messages.append((thread, turn, n, "tool", result or error,
                                             json.dumps({"role": "tool", "text": result or error}), t))  # fmt: skip
                            n += 1
                    summary = "tool round"
                steps.append((step_id, turn, run, s // 2, kind, "succeeded", summary, t, t + 0.3))
                checkpoints.append((turn, run, "assistant_turn_committed" if kind == "inference"
                                    else "tool_results_committed", t))  # fmt: skip
            seq[thread] = n
            ended = None if status == "waiting" else t + 0.5
            turns.append((turn, thread, run, origin, "console" if origin == "chat" else None,
                          "self" if origin in ("task", "chore", "will") else "operator",
                          pool[rng.randrange(len(pool))], status, reason, n_steps // 2 + 1,
                          pool[rng.randrange(len(pool))], at, ended or t, ended))  # fmt: skip
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO turns(id, thread_id, run_id, origin, channel, sender, text, status,"
            " reason, rounds, final_text, created_at, updated_at, ended_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", turns)  # fmt: skip
        conn.executemany("INSERT INTO steps(id, turn_id, run_id, idx, kind, status, summary,"
                         " started_at, ended_at) VALUES (?,?,?,?,?,?,?,?,?)", steps)  # fmt: skip
        conn.executemany(
            "INSERT INTO decisions(id, call_id, action, args, result, use_result, reason,"
            " remember, decided_by, status, note, created_at, applied_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", decisions)  # fmt: skip
        conn.executemany(
            "INSERT INTO tool_calls(id, model_call_id, turn_id, thread_id, step_id, idx, tool,"
            " args, status, result, error, suspend_reason, decision_id, has_message,"
            " created_at, updated_at, ended_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            calls)  # fmt: skip
        conn.executemany("INSERT INTO messages(thread_id, turn_id, seq, role, text, body,"
                         " created_at) VALUES (?,?,?,?,?,?,?)", messages)  # fmt: skip
        conn.executemany("INSERT INTO checkpoints(turn_id, run_id, kind, created_at)"
                         " VALUES (?,?,?,?)", checkpoints)  # fmt: skip
        conn.execute("COMMIT")
        conn.execute("BEGIN")
        for sql, params in INDEX_BATCH:
            conn.execute(sql, params)
        conn.execute("COMMIT")
        for key, rows in (("turns", turns), ("steps", steps), ("calls", calls),
                          ("messages", messages), ("decisions", decisions)):  # fmt: skip
            counts[key] += len(rows)
    conn.execute("UPDATE threads SET updated_at = ? + id % 1000 * 7000", (BASE,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return counts


def ensure(path: Path = DEFAULT_PATH, *, steps: int = 1_000_000, seed: int = 6,
           fresh: bool = False, quiet: bool = False) -> Path:  # fmt: skip
    """The room (built if missing, stale or `fresh`); returns its folder."""
    stamp = path / "gen.json"
    want = {"version": VERSION, "steps": steps, "seed": seed}
    if not fresh and stamp.exists() and (path / "execution.db").exists():
        have = json.loads(stamp.read_text())
        if {k: have.get(k) for k in want} == want:
            return path
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    began = time.perf_counter()
    counts = build(path / "execution.db", steps, seed)
    took = time.perf_counter() - began
    stamp.write_text(json.dumps({**want, **counts, "seconds": round(took, 1)}, indent=2))
    if not quiet:
        size = (path / "execution.db").stat().st_size / 1e6
        print(f"built {path} in {took:.0f} s: {counts} ({size:.0f} MB)", file=sys.stderr)
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true", help="rebuild even if cached")
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--path", type=Path, default=DEFAULT_PATH)
    args = parser.parse_args()
    print(ensure(args.path, steps=args.steps, seed=args.seed, fresh=args.fresh))
