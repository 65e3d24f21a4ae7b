"""Themes are data, the choice persists, built-ins work, borders and the selection show in
every theme, NO_COLOR stays readable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.color import Color as RichColor
from rich.style import Style
from rich.terminal_theme import DEFAULT_TERMINAL_THEME
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widget import Widget

import themes
from console import settings
from console.widgets.decision_queue import DecisionQueue
from console.widgets.timeline import Timeline
from tests.console.helpers import (
    SIZE,
    Recorder,
    call_waits,
    send,
    started,
    told,
    until,
    until_pending,
)
from tests.scripted import Reply, ScriptedModel
from themes.contrast import luminance, ratio, ratios

pytestmark = pytest.mark.anyio
STATES = ("running", "waiting", "succeeded", "failed", "cancelled", "suspended")


def test_own_themes_define_every_state() -> None:
    loaded = {t.name: t for t in themes.load_themes()}
    assert {themes.DARK, themes.LIGHT} <= set(loaded)
    assert loaded[themes.DARK].dark and not loaded[themes.LIGHT].dark
    for theme in loaded.values():
        for state in STATES:
            assert f"state-{state}" in theme.variables
        for name in themes.VISIBLE:  # set as data, not derived
            assert name in theme.variables


def test_contrast_is_wcag_s() -> None:
    """Known answers of WCAG 2's formulas (the W3C's own examples)."""
    assert luminance((255, 255, 255)) == pytest.approx(1.0)
    assert ratio((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert ratio((0x77, 0x77, 0x77), (255, 255, 255)) == pytest.approx(4.48, abs=0.01)
    assert ratio((0x12, 0x34, 0x56), (0x12, 0x34, 0x56)) == 1.0
    # 16 colours: a light grey is the palette's white, no border on a white background
    seen = ratios(RichColor.parse("#d0d0d0"), RichColor.parse("#ffffff"), DEFAULT_TERMINAL_THEME)
    assert seen["truecolor"] == pytest.approx(1.54, abs=0.01) and seen["16"] < 1.9


Cells = dict[tuple[int, int], tuple[str, Style]]


def drawn(pilot: Pilot) -> Cells:
    """Each cell of the screen on top as sent to the terminal: (its text, its style)."""
    update = pilot.app.screen._compositor.render_full_update()
    cells: Cells = {}
    for y, line in enumerate(update.strips):
        x = 0
        for strip in line:
            for seg in strip:
                if seg.control is None:
                    for char in seg.text:
                        cells[(x, y)] = (char, seg.style or Style())
                        x += cell_len(char)
    return cells


def pair(style: Style) -> tuple[RichColor, RichColor]:
    """A cell's (foreground, background) as the terminal paints it (none: its defaults)."""
    return style.color or RichColor.default(), style.bgcolor or RichColor.default()


def corner(cells: Cells, widget: Widget) -> Style:
    """The style of the top left corner of `widget`'s border."""
    char, style = cells[(widget.region.x, widget.region.y)]
    assert char.strip(), f"no border drawn at {widget}'s corner"
    return style


def row(cells: Cells, widget: Widget, line: int) -> Style:
    """The style of the first cell of `widget`'s content at its `line` (the selection's
    colours where the cursor is)."""
    region = widget.content_region
    return cells[(region.x, region.y + line)][1]


async def focus_drawn(pilot: Pilot, widget: Widget, other: Widget) -> Cells:
    """Focus `widget` and wait until the screen shows it: its pane's border drawn unlike
    that of `other`'s pane."""
    widget.focus()

    def corners() -> tuple[Style, Style]:
        cells = drawn(pilot)
        return corner(cells, widget.parent), corner(cells, other.parent)

    await until(pilot, corners, f"{widget} shown focused", ok=lambda two: two[0] != two[1])
    return drawn(pilot)


async def test_borders_and_the_selection_show_in_every_theme(deck_app) -> None:
    """Issue 30: the light theme's pane borders were white on near-white. In every theme the
    console offers (its own and Textual's), a pane's border, focused or not, and the
    selected row, in a list with the focus or without, stand out 3:1 from the background
    (WCAG 1.4.11) in truecolor and as Rich shows them in 256 and 16 colours; the text on
    the selection stays readable on it (4.5:1 in truecolor, 3:1 in fewer colours)."""
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await call_waits(pilot, "run `echo hi`")  # steps in the timeline, a queued call
        timeline, queue = main.query_one(Timeline), main.query_one(DecisionQueue)
        calls, chat, field = (
            main.query_one("#calls"),
            main.query_one("#chat"),
            main.query_one("#chat-input"),
        )
        timeline.action_first()
        measured: dict[str, dict[str, dict[str, float]]] = {}
        for name in sorted(app.available_themes):
            app.theme = name
            terminal = app.ansi_theme
            seen: dict[str, dict[str, float]] = {}
            for focused, blurred in ((timeline, queue), (queue, timeline)):
                cells = await focus_drawn(pilot, focused, calls)
                for what, style in (
                    ("border focused", corner(cells, focused.parent)),
                    ("border", corner(cells, calls.parent)),
                    ("border of the chat", corner(cells, chat)),
                    ("border of the chat input", corner(cells, field)),
                ):
                    seen[what] = ratios(*pair(style), terminal)
                for widget, state in ((focused, "focused"), (blurred, "blurred")):
                    kind = "table" if widget is queue else "line"
                    at = (widget.cursor_row + 1) if widget is queue else timeline.cursor_index
                    cursor, empty = row(cells, widget, at), row(cells, widget, at + 3)
                    seen[f"{kind} selection {state}"] = ratios(
                        pair(cursor)[1], pair(empty)[1], terminal, backgrounds=True)  # fmt: skip
                    seen[f"{kind} selection {state}: text"] = ratios(*pair(cursor), terminal)
            measured[name] = seen
        await app.shutdown()
    bad = []
    for name, seen in measured.items():
        for what, by_system in seen.items():
            for system, value in by_system.items():
                text = what.endswith(": text")
                floor = 4.5 if text and system == "truecolor" else 3.0
                if value < floor:
                    bad.append(f"{name}: {what} {value:.2f} in {system} (< {floor})")
    assert not bad, "\n".join(bad)


def test_stylesheet_uses_only_variables() -> None:
    css = Path(themes.__file__).with_name("app.tcss").read_text()
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    assert not re.search(r"#[0-9a-fA-F]{3,8}\b(?![\w-]*\s*[{,])", css), "a literal colour"
    assert not re.search(r"\b(rgb|hsl)\(", css)


async def test_theme_choice_persists(deck_app) -> None:
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        assert app.theme == themes.DARK
        app.theme = themes.LIGHT
        await until(pilot, lambda: settings.load().get("theme") == themes.LIGHT, "saved")
        app.theme = "nord"  # a Textual built-in has no state variables: defaults fill in
        await pilot.pause()
        await until(pilot, lambda: settings.load().get("theme") == "nord", "saved built-in")
        await app.shutdown()
    again = deck_app()
    assert again.theme == "nord"


def test_saving_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    """The operator's other settings, tables and comments survive a theme change."""
    path = tmp_path / "config.toml"
    settings.save({"theme": "nord"}, path)
    assert settings.load(path) == {"theme": "nord"}
    path.write_text('# mine\nfps = 30\n  theme = "no\\"rd"  # fav\n\n[keys]\nquit = "q"\n')
    settings.save({"theme": themes.LIGHT}, path)  # the value changes, its line's rest stays
    assert path.read_text() == (
        f'# mine\nfps = 30\n  theme = "{themes.LIGHT}"  # fav\n\n[keys]\nquit = "q"\n'
    )
    path.write_text('[keys]\nquit = "q"\n')  # no top-level key yet: it goes above the tables
    settings.save({"theme": "nord"}, path)
    assert settings.load(path) == {"theme": "nord", "keys": {"quit": "q"}}
    path.write_text('"theme" = "nord"\n')  # a form it does not rewrite: left as it is
    with pytest.raises(ValueError, match="could not set theme"):
        settings.save({"theme": themes.LIGHT}, path)
    assert path.read_text() == '"theme" = "nord"\n'


@pytest.mark.parametrize(
    "text",
    [
        "# a\u2028b\nfps = 30\n",  # a line separator TOML allows in a comment
        'x = [\n  [1, 2],\n]\nnotes = """\n[not a table]\n"""\n',  # [ lines inside values
        "a = 1\r\nb = 2\r\n",  # CRLF line ends: the new line has them too
        "\ufeffa = 1\n",  # a BOM, kept in front
    ],
)
def test_saving_writes_only_the_theme_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(text.encode())
    settings.save({"theme": "nord"}, path)
    end = "\r\n" if "\r\n" in text else "\n"
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    assert path.read_bytes().decode() == bom + 'theme = "nord"' + end + text.lstrip("\ufeff")
    assert settings.load(path)["theme"] == "nord"


def test_saving_keeps_a_symlink_and_the_mode(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "agentdeck.toml"
    real.parent.mkdir()
    real.write_text("fps = 30\n")
    real.chmod(0o600)
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    settings.save({"theme": "nord"}, link)
    assert link.is_symlink() and settings.load(real) == {"theme": "nord", "fps": 30}
    assert real.stat().st_mode & 0o777 == 0o600


def test_a_file_nested_too_deeply_is_read_as_empty_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    assert settings.load(path) == {}
    with pytest.raises(ValueError, match="nested too deeply"):
        settings.save({"theme": "nord"}, path)


async def test_a_config_that_is_not_toml_is_left_alone(deck_app) -> None:
    path = settings.config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("theme = [unclosed\nmy notes\n")
    rec = Recorder(Notify)
    app = deck_app()
    async with app.run_test(size=SIZE, message_hook=rec) as pilot:
        await started(pilot)
        app.theme = themes.LIGHT  # applies for this session
        await until(pilot, lambda: any("not remembered" in n for n in told(rec)), "told")
        assert app.theme == themes.LIGHT
        await app.shutdown()
    assert path.read_text() == "theme = [unclosed\nmy notes\n"


async def test_no_color_is_monochrome_with_words(deck_app, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = deck_app()
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        assert app.no_color
        await send(pilot, "run `echo hi`")
        await until_pending(pilot, main)
        timeline = main.query_one(Timeline)

        def drawn() -> tuple[list[str], str]:
            return [timeline.render_line(y).text for y in range(3)], app.export_screenshot()

        def both(d: tuple[list[str], str]) -> bool:
            return "✔ succeeded" in d[0][0] and "◆&#160;suspended" in d[1]

        lines, svg = await until(pilot, drawn, "the timeline draws both steps", ok=both)
        assert "✔ succeeded" in lines[0]
        assert "◆&#160;suspended" in svg
        await app.shutdown()


async def test_no_color_draws_an_answer_with_blank_lines(deck_app, monkeypatch) -> None:
    """Real models answer in paragraphs: a blank line is drawn in the monochrome console too."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = deck_app(provider=ScriptedModel(lambda request: Reply(text="first\n\nsecond")))
    async with app.run_test(size=SIZE) as pilot:
        main = await started(pilot)
        await send(pilot, "hello")
        await until(pilot, lambda: main.state.counts() == (0, 0) and main.state.turns, "answer")
        svg = await until(pilot, app.export_screenshot, "the answer drawn",
                          ok=lambda svg: "first" in svg and "second" in svg)  # fmt: skip
        assert "first" in svg and "second" in svg
        await app.shutdown()
