"""The figures' colour scales, as fixed tables of hex stops, and the text colour that reads on each.

Everything is integer or Decimal arithmetic, so a colour is the same bytes on every run and machine.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, ROUND_HALF_UP, Context, Decimal
from functools import lru_cache

# Cividis (Nuñez, Anderton and Renslow 2018; Bokeh's Cividis11): made for colour-blind readers, and its
# lightness rises steadily from end to end, so a greyscale print keeps the order
CIVIDIS = ("00204C", "00316F", "31446B", "4D556B", "666870", "7B7B78", "958F78", "AEA373", "CAB969", "E6D059", "FFE945")
# ColorBrewer's RdBu (11 classes), safe for colour-blind readers: red below zero, white at zero, blue above
RED_BLUE = (
    *("67001F", "B2182B", "D6604D", "F4A582", "FDDBC7"),
    "F7F7F7",
    *("D1E5F0", "92C5DE", "4393C3", "2166AC", "053061"),
)

BLACK = "#000000"
WHITE = "#FFFFFF"
_CONTEXT = Context(prec=28, rounding=ROUND_HALF_UP)


def _rgb(stop: str) -> tuple[int, int, int]:
    return int(stop[0:2], 16), int(stop[2:4], 16), int(stop[4:6], 16)


def interpolate(stops: tuple[str, ...], t: Decimal) -> str:
    """The colour at ``t`` (0 to 1) along the stops, blended linearly, as ``#RRGGBB``."""
    t = min(max(t, Decimal(0)), Decimal(1))
    position = _CONTEXT.multiply(t, Decimal(len(stops) - 1))
    index = int(position.to_integral_value(rounding=ROUND_FLOOR))
    if index >= len(stops) - 1:
        return "#" + stops[-1]
    part = position - index
    low, high = _rgb(stops[index]), _rgb(stops[index + 1])
    mixed = (a + _CONTEXT.multiply(part, Decimal(b - a)) for a, b in zip(low, high))
    return "#" + "".join(f"{int(c.to_integral_value(rounding=ROUND_HALF_UP)):02X}" for c in mixed)


LEVELS = 64  # shades along a scale: more than the eye tells apart, few enough that TikZ fills each in one path


def _level(t: Decimal) -> Decimal:
    return (t * LEVELS).to_integral_value(rounding=ROUND_HALF_UP) / LEVELS


def weight_colour(w: Decimal) -> str:
    """A weight's fill: cividis reversed, so that 0 is pale and 1 is dark (more attention, more ink)."""
    return interpolate(CIVIDIS, _level(1 - w))


def signed_colour(x: Decimal, largest: Decimal) -> str:
    """A signed value's fill, for a gradient: white at 0, red or blue at ± ``largest``."""
    t = Decimal("0.5") if largest == 0 else (1 + _CONTEXT.divide(x, largest)) / 2
    return interpolate(RED_BLUE, _level(t))


@lru_cache(maxsize=1024)
def luminance(colour: str) -> Decimal:
    """WCAG's relative luminance of ``#RRGGBB``."""

    def linear(c: int) -> Decimal:
        s = Decimal(c) / 255
        if s <= Decimal("0.04045"):
            return s / Decimal("12.92")
        return _CONTEXT.power((s + Decimal("0.055")) / Decimal("1.055"), Decimal("2.4"))

    r, g, b = _rgb(colour[1:])
    return Decimal("0.2126") * linear(r) + Decimal("0.7152") * linear(g) + Decimal("0.0722") * linear(b)


def ink(colour: str) -> str:
    """Black or white text on ``colour``, whichever contrasts more (WCAG: at least 4.5 : 1 either way)."""
    # (L + 0.05)² < 0.0525 is where white's contrast 1.05/(L + 0.05) beats black's (L + 0.05)/0.05
    shade = luminance(colour) + Decimal("0.05")
    return WHITE if shade * shade < Decimal("0.0525") else BLACK


def legend_stops(count: int, colour) -> tuple[str, ...]:
    """``count`` colours across the scale (the middle of each of ``count`` equal steps), for a legend bar."""
    return tuple(colour(Decimal(2 * i + 1) / (2 * count)) for i in range(count))
