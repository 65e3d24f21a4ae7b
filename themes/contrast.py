"""How far apart two colours look, as the terminal shows them (WCAG's contrast ratio).

A colour that is plain in truecolor can vanish where the terminal has fewer colours: Rich
turns each into the nearest of the 256 or 16 (`rich.color.Color.downgrade`). `least` is
the lowest ratio of a pair over truecolor, 256 and 16 colours, which is what a border or
a selection must clear (3:1, WCAG 1.4.11) to be seen whatever the terminal. A colour the
terminal itself names (an ANSI colour, or its default) is the terminal's: it is read
through the terminal palette given (Textual's `App.ansi_theme`), in every colour system.
"""

from __future__ import annotations

from rich.color import Color as RichColor
from rich.color import ColorSystem, ColorType
from rich.terminal_theme import TerminalTheme

RGB = tuple[int, int, int]

# The colour systems a terminal may have (None: truecolor, as is).
SYSTEMS: dict[str, ColorSystem | None] = {
    "truecolor": None,
    "256": ColorSystem.EIGHT_BIT,
    "16": ColorSystem.STANDARD,
}


def luminance(rgb: RGB) -> float:
    """WCAG 2's relative luminance of an sRGB colour."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = rgb
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b)


def ratio(a: RGB, b: RGB) -> float:
    """WCAG 2's contrast ratio of two colours, from 1 (the same) to 21 (black on white)."""
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def shown(color: RichColor, system: ColorSystem | None, terminal: TerminalTheme,
          foreground: bool = True) -> RGB:  # fmt: skip
    """The RGB a terminal with `system` shows for `color`: a truecolor one downgraded as
    Rich does it; an ANSI one, or the default, from the `terminal` palette."""
    if color.type in (ColorType.STANDARD, ColorType.DEFAULT):
        return tuple(color.get_truecolor(terminal, foreground))  # type: ignore[return-value]
    seen = color if system is None else color.downgrade(system)
    return tuple(seen.get_truecolor())  # type: ignore[return-value]


def least(fg: RichColor, bg: RichColor, terminal: TerminalTheme) -> float:
    """The lowest contrast ratio of `fg` over `bg` in truecolor, 256 and 16 colours."""
    return min(ratios(fg, bg, terminal).values())


def ratios(fg: RichColor, bg: RichColor, terminal: TerminalTheme,
           *, backgrounds: bool = False) -> dict[str, float]:  # fmt: skip
    """The contrast ratio of `fg` over `bg` in each colour system (SYSTEMS); `backgrounds`:
    `fg` is a background too (a selected row's, over the list's)."""
    return {
        name: ratio(
            shown(fg, system, terminal, foreground=not backgrounds),
            shown(bg, system, terminal, foreground=False),
        )
        for name, system in SYSTEMS.items()
    }
