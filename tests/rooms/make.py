"""Make the kept room of this release: `python -m tests.rooms.make NAME` writes
tests/rooms/NAME/ with a room made by today's agentdeck through its command line, as an
operator makes one, on the offline model:

- finished turns: a `calc` (react), a plan (plan_execute), a `write_file` that was
  approved, so the room holds a decision and a file in its workspace;
- a room rule (allow shell 'git status*');
- a turn waiting on a `shell` call (`echo kept from NAME`).

`room/` is the SQLite room (execution.db as the CLI left it, its workspace), and
`store.pg.sql` the same room's store on PostgreSQL (a throwaway server, tests/pg.py),
as pg_dump writes it. tests/test_kept_rooms.py opens every kept room with the current code
and resumes its waiting call: a schema change must keep them opening. Never rewrite a kept
room; make a new one for a new release.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
AGENTDECK = Path(sys.executable).parent / "agentdeck"


def cli(room: Path, env: dict[str, str], *args: str, code: int = 0) -> str:
    out = subprocess.run([str(AGENTDECK), "--room", str(room), *args], capture_output=True,
                         text=True, env=env, stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip
    if out.returncode != code:
        raise SystemExit(f"agentdeck {' '.join(args)} exited {out.returncode}:\n{out.stderr}")
    return out.stdout


def fill(room: Path, name: str, env: dict[str, str]) -> None:
    """The turns, the rule and the waiting call, in that order."""
    cli(room, env, "invoke", "calc 2+3")
    cli(room, env, "invoke", "--thread", "task:plan", "--strategy", "plan_execute",
        "calc 2**10 and list files")  # fmt: skip
    cli(room, env, "invoke", "--thread", "task:notes", f"write kept by {name} to notes.txt",
        code=3)  # fmt: skip
    [call] = json.loads(cli(room, env, "pending", "--json"))
    cli(room, env, "decide", call["call_id"], "approve")
    cli(room, env, "rules", "add", "--effect", "allow", "--tool", "shell",
        "--pattern", "git status*")  # fmt: skip
    cli(room, env, "invoke", "--thread", "ops", f"run `echo kept from {name}`", code=3)


def main() -> None:
    name = sys.argv[1]
    out = HERE / name
    if out.exists():
        raise SystemExit(f"{out} exists: a kept room is never rewritten")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("AGENTDECK_STORE_URL", None)
    with tempfile.TemporaryDirectory() as tmp:
        room = Path(tmp) / "room"
        fill(room, name, env)
        (out / "room").mkdir(parents=True)
        shutil.copy(room / "execution.db", out / "room" / "execution.db")
        shutil.copytree(room / "workspace", out / "room" / "workspace")

        from tests.pg import cluster

        with cluster() as server:
            url = server.database()
            fill(Path(tmp) / "pg-room", name, {**env, "AGENTDECK_STORE_URL": url})
            pg_dump = shutil.which("pg_dump") or str(server.bin / "pg_dump")
            dump = subprocess.run([pg_dump, "--no-owner", "--no-privileges",
                                   "--dbname", url], capture_output=True, text=True, check=True)  # fmt: skip
        (out / "store.pg.sql").write_text(dump.stdout)
    print(f"kept room written to {out}")


if __name__ == "__main__":
    main()
