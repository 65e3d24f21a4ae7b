"""Write SVG screenshots of the console in the states the README shows, into screenshots/.

    .venv/bin/python scripts/screenshots.py [SCENE ...]

Each screenshot is the real app on a fresh room, driven into its state by the same scenes
the snapshot tests use (fixed clock and ids, the offline model), so the pictures match
what the tests guard.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual._doc import take_svg_screenshot  # noqa: E402

from engine.api import breakbook  # noqa: E402
from tests.console.breakpoint_scenes import BREAKPOINT_SCENES, point_ids  # noqa: E402
from tests.console.conftest import build  # noqa: E402
from tests.console.context_scenes import CONTEXT_PREPARE, CONTEXT_SCENES  # noqa: E402
from tests.console.diff_scenes import DIFF_PREPARE, DIFF_SCENES  # noqa: E402
from tests.console.fork_scenes import FORK_PREPARE, FORK_SCENES, fixed_threads  # noqa: E402
from tests.console.history_scenes import HISTORY_PREPARE, HISTORY_SCENES  # noqa: E402
from tests.console.instructions_scenes import (  # noqa: E402
    INSTRUCTIONS_PREPARE,
    INSTRUCTIONS_SCENES,
)
from tests.console.machine_scenes import MACHINE_SCENES  # noqa: E402
from tests.console.review_scenes import prepare_review, review  # noqa: E402
from tests.console.scenes import SCENES  # noqa: E402
from tests.console.scheduler_scenes import SCHEDULER_SCENES  # noqa: E402
from tests.console.test_channels_screen import channels_scene  # noqa: E402
from tests.console.test_rules_screen import remember_scene, rules_scene, with_toml  # noqa: E402
from tests.console.tool_scenes import TOOL_SCENES, VENV_BIN, with_time_server  # noqa: E402
from tests.console.tour_scenes import TOUR_SCENES  # noqa: E402

ALL_SCENES = SCENES | SCHEDULER_SCENES | TOUR_SCENES | {"history": HISTORY_SCENES["history"],
                                          "review": (review, (160, 48), {}),
                                          "rules": (rules_scene, (160, 48), {}),
                                          "remember": (remember_scene, (160, 48), {}),
                                          "channels": (channels_scene, (160, 48), {}),
                                          "tools": TOOL_SCENES["tools"]} | INSTRUCTIONS_SCENES | CONTEXT_SCENES | BREAKPOINT_SCENES  # fmt: skip


def tools_room(room: Path) -> None:
    """The room of the tools screen: the published MCP time server (found on PATH by its
    name, as the README's example names it) and two rules."""
    if str(VENV_BIN) not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"
    with_time_server(room)


PREPARE = HISTORY_PREPARE | {
    "review": prepare_review,
    "rules": with_toml,
    "tools": tools_room,
}  # rooms filled before the app opens
PREPARE |= INSTRUCTIONS_PREPARE | CONTEXT_PREPARE
ALL_SCENES |= {"diff": DIFF_SCENES["diff"]}  # two turns side by side (issue 37)
PREPARE |= DIFF_PREPARE
ALL_SCENES |= {"fork": FORK_SCENES["fork"], "replay": FORK_SCENES["replay"]}  # (issue 37)
PREPARE |= FORK_PREPARE
fixed_threads()  # the fork's thread is chat:main~fork-beef, as in the snapshot tests
ALL_SCENES |= {"inbox": MACHINE_SCENES["inbox"]}  # every room's calls in one inbox (issue 38)
EXTRA = ("attached", "cluster", "tour_cli")  # scenes with another process or a database:
# made here, not snapshot-tested


def attached(out: Path) -> None:
    """A console attached to `agentdeck start` in another process, two tasks waiting."""
    from console.app import make_app
    from tests.console.helpers import until
    from tests.console.scenes import steady

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CONFIG_HOME"] = tmp
        room = Path(tmp) / "room"
        (room / "tasks").mkdir(parents=True)
        (room / "tasks" / "deploy.md").write_text("run `make deploy` and tell me the time\n")
        (room / "tasks" / "notes.md").write_text('write "v2 is out" to NOTES.md\n')
        cli = [sys.executable, "-m", "engine.cli", "--room", str(room)]
        subprocess.run([*cli, "start"], check=True, cwd=ROOT, capture_output=True)
        try:

            async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
                main = pilot.app.main
                await until(pilot, lambda: len(main.state.pending) == 2, "two wait")
                await pilot.press("escape", "d")
                await pilot.pause(0.3)
                await steady(pilot)

            app = make_app(room, attach=True)
            svg = take_svg_screenshot(app=app, terminal_size=(160, 48), run_before=ready,
                                      title="agentdeck · attached")  # fmt: skip
        finally:
            subprocess.run([*cli, "stop"], cwd=ROOT, capture_output=True)
    (out / "attached.svg").write_text(svg, "utf-8")
    print("screenshots/attached.svg  160x48")


def cluster(out: Path) -> None:
    """The scheduler of a console hosting worker deck-1 of a cluster, while worker deck-2
    (in the same process, on the same throwaway PostgreSQL) runs threads of its own."""
    import anyio

    from engine.config import ClusterConfig, Config, StoreConfig
    from engine.runtime import Runtime
    from tests.console.helpers import until
    from tests.console.scenes import steady
    from tests.console.scheduler_scenes import SLOW, SlowWhenAsked, message, open_scheduler
    from tests.pg import cluster as pg_cluster

    with tempfile.TemporaryDirectory() as tmp, pg_cluster() as server:
        os.environ["XDG_CONFIG_HOME"] = tmp
        url = server.database()
        room = Path(tmp) / "deck-1"
        room.mkdir()
        (room / "agentdeck.toml").write_text(
            f'[store]\nurl = "{url}"\n[cluster]\nenabled = true\nworker = "deck-1"\n'
        )
        other = Config(store=StoreConfig(url=url),
                       cluster=ClusterConfig(enabled=True, worker="deck-2"))  # fmt: skip

        async def deck_2(started: anyio.Event) -> None:
            async with Runtime.open(Path(tmp) / "deck-2", kind="run", config=other,
                                    provider=SlowWhenAsked()) as rt:  # fmt: skip
                for thread in ("chat:ops", "task:nightly-report"):
                    await rt.submit(message(thread, f"{SLOW} on deck-2"))
                started.set()
                await anyio.sleep_forever()

        async def ready(pilot) -> None:  # type: ignore[no-untyped-def]
            started = anyio.Event()
            pilot.app.run_worker(deck_2(started))
            await started.wait()
            rt = pilot.app.host.runtime
            for thread in ("chat:main", "chat:release-notes"):
                await rt.submit(message(thread, f"{SLOW} here"))
            screen = await open_scheduler(pilot)
            await until(pilot, lambda: "deck-2" in str(screen.query_one("#sched-threads").rows)
                        or True, "listed")  # fmt: skip
            await pilot.pause(1.5)
            await steady(pilot)

        app = build(room, provider=SlowWhenAsked())
        svg = take_svg_screenshot(app=app, terminal_size=(160, 48), run_before=ready,
                                  title="agentdeck · cluster")  # fmt: skip
    (out / "cluster.svg").write_text(svg, "utf-8")
    print("screenshots/cluster.svg  160x48")


def tour_cli(out: Path) -> None:
    """The README tour's command-line steps, run as written in a home of their own (as its
    test runs them), each block drawn as the terminal shows it: tour_start, tour_stop."""
    from rich.console import Console
    from rich.text import Text

    from tests.readme_tour import FENCE, README, commands, environment, run

    blocks = [commands(m.group(0)) for m in FENCE.finditer(README.read_text("utf-8"))]
    with tempfile.TemporaryDirectory() as tmp:
        env = environment(Path(tmp))
        try:
            for name, block in zip(("tour_start", "tour_stop"), blocks, strict=True):
                term = Console(record=True, width=110, file=io.StringIO())
                for command in block:
                    done = run(command, env, timeout=120)
                    term.print(Text("$ ", "bold green") + Text(command.line, "bold"))
                    term.print(Text(done.stdout + done.stderr), end="")
                term.print(Text("$ ", "bold green"))
                svg = term.export_svg(title=f"agentdeck · {name}")
                (out / f"{name}.svg").write_text(svg, "utf-8")
                print(f"screenshots/{name}.svg  110 wide")
        finally:
            subprocess.run(["bash", "-c", "agentdeck stop"], env=env, capture_output=True)


def main(names: list[str]) -> int:
    os.environ["TZ"] = "UTC"
    time.tzset()
    out = ROOT / "screenshots"
    out.mkdir(exist_ok=True)
    for name in names or [*ALL_SCENES, *EXTRA]:
        if name in EXTRA:
            {"attached": attached, "cluster": cluster, "tour_cli": tour_cli}[name](out)
            continue
        run_before, size, kw = ALL_SCENES[name]
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["XDG_CONFIG_HOME"] = tmp  # the user's theme choice stays out of it
            os.environ["HOME"] = tmp  # the room shows as ~/room, as in the snapshot tests
            os.environ["XDG_RUNTIME_DIR"] = tmp  # the rooms it serves register here, not for
            room = Path(tmp) / "room"  # the user's consoles to see (engine/rooms_registry.py)
            breakbook.new_id = point_ids()  # b001, b002... as in the snapshot tests
            if (prepare := PREPARE.get(name)) is not None:
                prepare(room)  # a room with a history (or a crash), filled before it opens
            app = build(room, **kw)
            svg = take_svg_screenshot(app=app, terminal_size=size, run_before=run_before,
                                      title=f"agentdeck · {name}")  # fmt: skip
        (out / f"{name}.svg").write_text(svg, "utf-8")
        print(f"screenshots/{name}.svg  {size[0]}x{size[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
