"""The figures' plain data (cells, labels, lines, in points to the hundredth), how wide text is, and how
panels are laid across the line: shared by the heatmap and the token diagram.

Sizes: a figure is at most one line wide (``LINE``) and ``TALL`` high, so that it and its caption stay
on a page. Below ``NUMBER_MIN`` pt the numbers would not be read, so they are left out (and the caption
says so); below ``LABEL_MIN`` pt a label, only every k-th token is labelled.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

from symattn.exact.rounding import Num
from symattn.input.records import record
from symattn.rendering import colours
from symattn.rendering.font_metrics import char_width
from symattn.rendering.layout import TEXT_WIDTH

LINE = Decimal(str(TEXT_WIDTH))  # pt: the line width the math layout fits
TALL = Decimal(400)  # pt: the most a figure is high, to leave its caption room on the page
CELL = Decimal(34)  # pt: the largest cell
GAP = Decimal(16)  # pt: between panels
PAD = Decimal(3)  # pt: between labels and cells
NUMBER_PT = Decimal(8)
NUMBER_MIN = Decimal("4.5")  # pt: smaller numbers are left out
LABEL_PT = Decimal(8)
LABEL_MIN = Decimal("4.5")  # pt: smaller labels are thinned out instead
INSET = Decimal("0.9")  # pt: the focus outline's white inner line, inside its black one (1.4 pt)
LINE_MAX = Decimal(6)  # pt: the thickness of a line of weight 1
LINE_COLOUR = "#" + colours.CIVIDIS[0]
MUTED = "#6B6B6B"  # masked labels: 5.3 : 1 on white
_HUNDREDTH = Decimal("0.01")


def q(x: Decimal | int) -> Decimal:
    """A length to the hundredth of a point."""
    return Decimal(x).quantize(_HUNDREDTH, rounding=ROUND_HALF_UP)


def floor(x: Decimal) -> Decimal:
    return x.quantize(_HUNDREDTH, rounding=ROUND_FLOOR)


# --- widths ----------------------------------------------------------------


def text_width(text: str, size: Decimal, bold: bool = False) -> Decimal:
    """The width of text at ``size`` pt, from the widest common sans face's metrics (:mod:`.font_metrics`)."""
    return Decimal(sum(char_width(ch, bold) for ch in text)) * size / 1000


def number_width(text: str, sup: str, size: Decimal) -> Decimal:
    return text_width(text, size) + text_width(sup, size * Decimal("0.7"))


# --- the data ----------------------------------------------------------------


@record
class Text:
    """A label or a number, at its baseline."""

    x: Decimal
    y: Decimal
    text: str  # a user's label (escaped by each template), or a number's digits with − and ×
    size: Decimal
    anchor: str = "start"  # "start", "middle" or "end"
    rotate: bool = False  # reads upwards
    bold: bool = False
    colour: str = colours.BLACK
    sup: str = ""  # a number's power of ten
    number: Num | None = None  # the shown number: TikZ sets it as math, as the document does
    role: str = "label"  # "row", "col", "title", "tick", "number", "source", "key"
    index: int | None = None  # the row or column (key) it belongs to

    @property
    def sup_size(self) -> Decimal:
        return q(self.size * Decimal("0.7"))

    @property
    def sup_rise(self) -> Decimal:
        return q(self.size * Decimal("0.4"))


@record
class Cell:
    row: int
    col: int
    x: Decimal
    y: Decimal
    width: Decimal
    height: Decimal
    fill: str
    masked: bool
    text: Text | None  # the shown number, or None where cells are too small for it


@record
class Box:
    x: Decimal
    y: Decimal
    width: Decimal
    height: Decimal


@record
class Fill:
    """Cells of one colour (or the masked ones, hatched), as one TikZ path."""

    colour: str  # "#RRGGBB", or "masked"
    boxes: tuple[Box, ...]


@record
class HeatPanel:
    """One heatmap: its cells, its row and column labels, and the focus row's outline."""

    x: Decimal
    y: Decimal
    width: Decimal
    height: Decimal
    cell: Decimal  # the cells' height (their width is the same or more)
    border: Decimal  # the white line between cells (none between tiny ones)
    cells: tuple[Cell, ...]
    fills: tuple[Fill, ...]  # the cells again, by colour, for TikZ
    labels: tuple[Text, ...]
    focus: Box  # the focus row's outline, black
    inner: Box  # a white line just inside it, so that the outline shows on dark cells too


@record
class Legend:
    bar: Box
    segments: tuple[tuple[Decimal, Decimal, str], ...]  # x, width, fill
    ticks: tuple[Text, ...]
    masked: Box | None  # the hatched swatch; its word follows as the last tick


@record
class Heatmap:
    kind = "heatmap"
    id: str  # "weights" or "dz": the name of its SVG file and of its place in HTML
    name: str  # "A" or "dZ"
    lang: str
    width: Decimal
    height: Decimal
    panels: tuple[HeatPanel, ...]
    legend: Legend
    rows: int
    cols: int
    numbers: bool  # the cells hold their numbers
    label_step: int  # every k-th token is labelled
    masked: bool


@record
class Stroke:
    key: int
    x1: Decimal
    y1: Decimal
    x2: Decimal
    y2: Decimal
    width: Decimal


@record
class DiagramPanel:
    x: Decimal
    y: Decimal
    width: Decimal
    height: Decimal
    lines: tuple[Stroke, ...]
    labels: tuple[Text, ...]


@record
class Diagram:
    kind = "diagram"
    colour = LINE_COLOUR  # of the lines
    id: str  # "tokens"
    name: str
    lang: str
    width: Decimal
    height: Decimal
    panels: tuple[DiagramPanel, ...]
    numbers: bool
    label_step: int
    masked: bool


Figure = Heatmap | Diagram


# --- numbers as shown ------------------------------------------------------------


def shown_text(x: Num) -> tuple[str, str]:
    """A shown number as plain text and its power of ten: ("0.598", ""), ("2.0×10", "−29")."""
    from symattn.rendering.numbers import plain_number

    text = plain_number(x).replace("-", "−")
    digits, _, power = text.partition("^")
    return digits, power


# --- panels across the line -----------------------------------------------------


def labelled(count: int, step: int, keep: int | None = None) -> set[int]:
    """Which of ``count`` labels are shown: every ``step``-th, and ``keep`` with its neighbours made room."""
    shown = {i for i in range(0, count, step) if keep is None or abs(i - keep) >= step}
    return shown | ({keep} if keep is not None else set())


def room(count: int, across: int, below: Decimal) -> tuple[Decimal, Decimal]:
    """The width and height of each of ``count`` panels laid ``across`` to a row, above ``below`` pt."""
    down = math.ceil(count / across)
    return (LINE - GAP * (across - 1)) / across, (TALL - below - GAP * (down - 1)) / down


def panels_across(count: int, build: Callable[[Decimal, Decimal], tuple[Any, Decimal]], below: Decimal) -> int:
    """How many panels to a row: as many as give the largest print (ties: more). ``build`` makes a panel in
    the room it is given and says how large its print is; a panel that outgrows its room scores less, as
    much as it would be scaled down to fit."""
    best = (Decimal(-1), 1)
    for across in range(1, count + 1):
        width, tall = room(count, across, below)
        panel, size = build(width, tall)
        size *= min(Decimal(1), width / panel.width, tall / panel.height)
        if size >= best[0]:
            best = (size, across)
    return best[1]


def place(panels: list[Any], across: int) -> tuple[list[tuple[Decimal, Decimal]], Decimal, Decimal]:
    """Offsets of panels laid out ``across`` to a row; the width and height they take."""
    pitch_x = max(p.width for p in panels) + GAP
    pitch_y = max(p.height for p in panels) + GAP
    offsets = [(q(pitch_x * (k % across)), q(pitch_y * (k // across))) for k in range(len(panels))]
    width = max(x + p.width for (x, _), p in zip(offsets, panels))
    height = max(y + p.height for (_, y), p in zip(offsets, panels))
    return offsets, q(width), q(height)


def moved(panel: Any, x: Decimal, y: Decimal) -> Any:
    return replace(panel, x=x, y=y)
