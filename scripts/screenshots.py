"""Write SVG screenshots of the console in the states the README shows, into screenshots/.

    .venv/bin/python scripts/screenshots.py [SCENE ...]

Each screenshot is the real app on a fresh room, driven into its state by the same scenes
the snapshot tests use (fixed clock and ids, the offline model), so the pictures match
what the tests guard.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual._doc import take_svg_screenshot  # noqa: E402

from tests.console.conftest import build  # noqa: E402
from tests.console.history_scenes import HISTORY_PREPARE, HISTORY_SCENES  # noqa: E402
from tests.console.scenes import SCENES  # noqa: E402
from tests.console.scheduler_scenes import SCHEDULER_SCENES  # noqa: E402

ALL_SCENES = SCENES | SCHEDULER_SCENES | {"history": HISTORY_SCENES["history"]}


def main(names: list[str]) -> int:
    os.environ["TZ"] = "UTC"
    time.tzset()
    out = ROOT / "screenshots"
    out.mkdir(exist_ok=True)
    for name in names or list(ALL_SCENES):
        run_before, size, kw = ALL_SCENES[name]
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["XDG_CONFIG_HOME"] = tmp  # the user's theme choice stays out of it
            room = Path(tmp) / "room"
            if (prepare := HISTORY_PREPARE.get(name)) is not None:
                prepare(room)  # a room with a history, filled before the app opens it
            app = build(room, **kw)
            svg = take_svg_screenshot(app=app, terminal_size=size, run_before=run_before,
                                      title=f"agentdeck · {name}")  # fmt: skip
        (out / f"{name}.svg").write_text(svg, "utf-8")
        print(f"screenshots/{name}.svg  {size[0]}x{size[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
