"""The heatmap of a matrix as plain figure data: one panel per head, its cells coloured on a fixed scale
(cividis for the weights, red to blue for a gradient), the focus row outlined, masked cells hatched."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from symattn.exact.rounding import Num
from symattn.rendering import colours
from symattn.rendering.figure_parts import (
    CELL,
    INSET,
    LABEL_MIN,
    LABEL_PT,
    NUMBER_MIN,
    NUMBER_PT,
    PAD,
    Box,
    Cell,
    Fill,
    Heatmap,
    HeatPanel,
    Legend,
    Text,
    floor,
    labelled,
    moved,
    number_width,
    panels_across,
    place,
    q,
    room,
    shown_text,
    text_width,
)


def _heat_panel(
    matrix: tuple[tuple[Num, ...], ...],
    masked: Callable[[int, int], bool],
    fill: Callable[[Num], str],
    focus: int,
    rows: tuple[str, ...],
    cols: tuple[str, ...],
    width: Decimal,
    tall: Decimal,
    title: str | None,
    widest: Decimal,
) -> tuple[HeatPanel, bool, int]:
    """One heatmap inside ``width`` × ``tall``; and whether it holds its numbers, and its label step.

    Cells are as wide as they are high, or wider (up to 3 : 1, for many queries and few keys), never taller.
    ``widest``: the widest number of every panel at 1 pt, so that all panels set them alike.
    """
    n, m = len(matrix), len(matrix[0])
    label = LABEL_PT
    row_w = max(text_width(r, label, i == focus) for i, r in enumerate(rows))
    if row_w > width * Decimal("0.3"):  # long labels: smaller, down to the least that reads
        label = max(LABEL_MIN, label * width * Decimal("0.3") / row_w)
        row_w = max(text_width(r, label, i == focus) for i, r in enumerate(rows))
    title_h = LABEL_PT * 2 if title else Decimal(0)
    col_w = max(text_width(c, label) for c in cols)
    if col_w > tall * Decimal("0.3"):  # long labels standing upright over the columns: smaller too
        label = max(LABEL_MIN, label * tall * Decimal("0.3") / col_w)
        row_w = max(text_width(r, label, i == focus) for i, r in enumerate(rows))
        col_w = max(text_width(c, label) for c in cols)

    def cell_for(col_h: Decimal) -> tuple[Decimal, Decimal]:
        high = max(Decimal(1), min(CELL, (tall - title_h - col_h - PAD) / n))
        wide = floor(min(CELL, (width - row_w - PAD) / m, high * 3))
        return wide, floor(min(high, wide))

    w, h = cell_for(col_w)
    upright = col_w <= w - 2
    if upright:
        w, h = cell_for(label * Decimal("1.4"))
    if h < label * Decimal("1.15"):  # rows closer than the labels are high: smaller labels, then fewer
        label = max(LABEL_MIN, floor(h / Decimal("1.15")))
        row_w = max(text_width(r, label, i == focus) for i, r in enumerate(rows))
        col_w = max(text_width(c, label) for c in cols)
        upright = col_w <= w - 2
    step = max(1, math.ceil(label * Decimal("1.15") / h))
    col_step = 1 if upright else max(1, math.ceil(label * Decimal("1.15") / w))
    col_h = label * Decimal("1.4") if upright else col_w
    texts = [[shown_text(x) for x in row] for row in matrix]
    size = floor(min(NUMBER_PT, (w - 4) / widest, h * Decimal("0.5")))
    numbers = size >= NUMBER_MIN
    x0, y0 = q(row_w + PAD), q(title_h + col_h + PAD)
    cells = []
    for i, row in enumerate(matrix):
        for j, value in enumerate(row):
            x, y = x0 + w * j, y0 + h * i
            hidden = masked(i, j)
            colour = colours.WHITE if hidden else fill(value)
            text = None
            if numbers:
                digits, power = texts[i][j]
                ink = colours.BLACK if hidden else colours.ink(colour)
                at = (q(x + w / 2), q(y + h / 2 + size * Decimal("0.35")))
                text = Text(*at, digits, size, "middle", colour=ink, sup=power, number=value, role="number", index=j)
            cells.append(Cell(i, j, x, y, w, h, colour, hidden, text))
    labels = []
    for i in sorted(labelled(n, step, focus)):
        y = q(y0 + h * i + h / 2 + label * Decimal("0.35"))
        labels.append(Text(q(row_w), y, rows[i], label, "end", bold=i == focus, role="row", index=i))
    for j in sorted(labelled(m, col_step)):
        middle = x0 + w * j + w / 2
        if upright:
            at = (q(middle), q(y0 - PAD - label * Decimal("0.3")))
            labels.append(Text(*at, cols[j], label, "middle", role="col", index=j))
        else:
            at = (q(middle + label * Decimal("0.35")), q(y0 - PAD))
            labels.append(Text(*at, cols[j], label, rotate=True, role="col", index=j))
    if title:
        at = (q(x0 + w * m / 2), q(LABEL_PT * Decimal("1.2")))
        labels.append(Text(*at, title, LABEL_PT, "middle", bold=True, role="title"))
    border = Decimal("0.5") if h >= 8 else Decimal(0)
    top = y0 + h * focus
    panel = HeatPanel(
        Decimal(0),
        Decimal(0),
        q(x0 + w * m),
        q(y0 + h * n),
        h,
        border,
        tuple(cells),
        _fills(cells, m, merge=not border),
        tuple(labels),
        Box(x0, q(top), q(w * m), h),
        Box(q(x0 + INSET), q(top + INSET), q(w * m - 2 * INSET), q(h - 2 * INSET)),
    )
    return panel, numbers, max(step, col_step)


FILL_CHUNK = 200  # rectangles in one TikZ path: TeX holds a path in memory until it is drawn


def _fills(cells: list[Cell], m: int, merge: bool) -> tuple[Fill, ...]:
    """The cells by colour, in chunks; without borders, neighbours of one colour in a row are one rectangle
    (a heatmap of 128 × 128 cells is then a few hundred rectangles, which TeX's memory holds)."""
    runs: dict[str, list[Box]] = {}
    for start in range(0, len(cells), m):
        row = cells[start : start + m]
        j = 0
        while j < len(row):
            k = j + 1
            colour = "masked" if row[j].masked else row[j].fill
            while merge and k < len(row) and ("masked" if row[k].masked else row[k].fill) == colour:
                k += 1
            c = row[j]
            runs.setdefault(colour, []).append(Box(c.x, c.y, q(c.width * (k - j)), c.height))
            j = k
    return tuple(
        Fill(colour, tuple(boxes[i : i + FILL_CHUNK]))
        for colour, boxes in runs.items()
        for i in range(0, len(boxes), FILL_CHUNK)
    )


def heatmap(
    name: str,
    matrices: tuple[tuple[tuple[Num, ...], ...], ...],
    allowed: tuple[tuple[bool, ...], ...] | None,
    focus: int,
    rows: tuple[str, ...],
    cols: tuple[str, ...],
    lang: str,
    head_title: Callable[[int], str],
    masked_word: str,
) -> Heatmap:
    """The heatmap of ``name`` ("A" or "dZ"): one panel per matrix (per head)."""

    def masked(i: int, j: int) -> bool:
        return allowed is not None and not allowed[i][j]

    if name == "A":
        fill: Callable[[Num], str] = lambda x: colours.weight_colour(x.value)  # noqa: E731
    else:
        largest = max((abs(x.value) for mx in matrices for row in mx for x in row), default=Decimal(0))
        fill = lambda x: colours.signed_colour(x.value, largest)  # noqa: E731
    heads = len(matrices)
    legend_h = Decimal(24)

    widest = max(number_width(*shown_text(x), Decimal(1)) for mx in matrices for row in mx for x in row)

    def build(width: Decimal, tall: Decimal, k: int = 0) -> tuple[HeatPanel, bool, int]:
        title = head_title(k) if heads > 1 else None
        return _heat_panel(matrices[k], masked, fill, focus, rows, cols, width, tall, title, widest)

    def score(width: Decimal, tall: Decimal) -> tuple[HeatPanel, Decimal]:
        panel = build(width, tall)[0]
        return panel, panel.cell

    across = panels_across(heads, score, legend_h)
    width, tall = room(heads, across, legend_h)
    built = [build(width, tall, k) for k in range(heads)]
    panels = [p for p, _, _ in built]
    offsets, w, h = place(panels, across)
    panels = [moved(p, x, y) for p, (x, y) in zip(panels, offsets)]
    any_masked = allowed is not None and any(not a for row in allowed for a in row)
    legend = _legend(name, matrices, h + Decimal(8), any_masked, masked_word, w)
    total_w = max(w, legend.bar.x + legend.bar.width, max(t.x + text_width(t.text, t.size) for t in legend.ticks))
    return Heatmap(
        "weights" if name == "A" else "dz",
        name,
        lang,
        q(total_w),
        q(legend.bar.y + legend_h - 8),
        tuple(panels),
        legend,
        len(matrices[0]),
        len(matrices[0][0]),
        all(numbers for _, numbers, _ in built),
        max(step for _, _, step in built),
        any_masked,
    )


def _legend(name: str, matrices: Any, y: Decimal, masked: bool, masked_word: str, room: Decimal) -> Legend:
    """The colour bar under the heatmap, centred in ``room``: its ends and middle as ticks, and the hatch's
    swatch with its word."""
    count, bar_w, bar_h, size = 20, Decimal(120), Decimal(6), Decimal(6)
    if name == "A":
        ends = ("0", "0.5", "1")
        stops = colours.legend_stops(count, lambda t: colours.weight_colour(t))
    else:
        largest = max((x for mx in matrices for row in mx for x in row), key=lambda x: abs(x.value))
        top = shown_text(Num(abs(largest.value), largest.exact, largest.scientific))[0]
        ends = ("−" + top if top != "0" else "0", "0", top)
        stops = colours.legend_stops(count, lambda t: colours.signed_colour(2 * t - 1, Decimal(1)))
    whole = bar_w + (Decimal(27) + text_width(masked_word, size) if masked else 0)
    x0 = q(max(Decimal(0), (room - whole) / 2))
    step = bar_w / count
    segments = tuple((q(x0 + step * k), q(step), stop) for k, stop in enumerate(stops))
    base = q(y + bar_h + size * Decimal("1.1"))
    anchors = ("start", "middle", "end")
    ticks = [Text(q(x0 + bar_w * k / 2), base, end, size, anchors[k], role="tick") for k, end in enumerate(ends)]
    swatch = None
    if masked:
        swatch = Box(q(x0 + bar_w + 14), y, Decimal(10), bar_h)
        ticks.append(Text(q(x0 + bar_w + 27), q(y + bar_h), masked_word, size, role="tick"))
    return Legend(Box(x0, y, bar_w, bar_h), segments, tuple(ticks), swatch)
