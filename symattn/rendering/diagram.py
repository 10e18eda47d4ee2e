"""The token diagram of the focus row as plain figure data, as BertViz's head view draws it: the focus token
on the left, every key on the right, a line to each as thick as its weight (none to a masked key)."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

from symattn.exact.rounding import Num
from symattn.input.records import record
from symattn.rendering import colours
from symattn.rendering.figure_parts import (
    LABEL_MIN,
    LABEL_PT,
    LINE_MAX,
    MUTED,
    NUMBER_MIN,
    PAD,
    Diagram,
    DiagramPanel,
    Stroke,
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


@record
class _Built:
    panel: DiagramPanel
    pitch: Decimal
    size: Decimal  # of the labels
    numbers: bool
    step: int


def _diagram_panel(
    weights: tuple[Num, ...],
    masked: tuple[bool, ...],
    source: str,
    keys: tuple[str, ...],
    width: Decimal,
    tall: Decimal,
    title: str | None,
) -> _Built:
    m = len(keys)
    title_h = LABEL_PT * 2 if title else Decimal(0)
    pitch = floor(min(Decimal(18), (tall - title_h) / m))
    label = min(LABEL_PT, floor(pitch / Decimal("1.15")))
    step = 1
    if label < LABEL_MIN:
        label, step = LABEL_MIN, math.ceil(LABEL_MIN * Decimal("1.15") / pitch)
    numbers = step == 1 and label >= NUMBER_MIN
    texts = [shown_text(w) for w in weights]
    shown = sorted(labelled(m, step))

    def widths(size: Decimal) -> tuple[Decimal, Decimal, Decimal]:
        left = text_width(source, size, True)
        right = max(text_width(keys[j], size) for j in shown)
        nums = max(number_width(t, s, size) for t, s in texts) if numbers else Decimal(0)
        return left, right, nums

    left, right, nums = widths(label)
    spare = width - left - right - nums - PAD * 6
    if spare < 60:  # long labels: smaller, to leave the lines room
        label = max(LABEL_MIN, floor(label * (width - 60 - PAD * 6) / (left + right + nums)))
        left, right, nums = widths(label)
        spare = width - left - right - nums - PAD * 6
    span = q(max(Decimal(40), min(Decimal(140), spare)))  # the lines' length
    x1 = q(left + PAD * 2)
    x2 = q(x1 + span)
    middle = q(title_h + pitch * m / 2)
    thick = min(LINE_MAX, pitch * Decimal("0.9"))
    lines = []
    labels = [Text(q(left), q(middle + label * Decimal("0.35")), source, label, "end", bold=True, role="source")]
    for j, key in enumerate(keys):
        y = q(title_h + pitch * j + pitch / 2)
        base = q(y + label * Decimal("0.35"))
        line = q(thick * weights[j].value)
        if not masked[j] and line > 0:
            lines.append(Stroke(j, x1, middle, x2, y, line))
        if j in shown:
            ink = MUTED if masked[j] else colours.BLACK
            labels.append(Text(q(x2 + PAD * 2), base, key, label, colour=ink, role="key", index=j))
        if numbers and not masked[j]:
            digits, power = texts[j]
            right_x = q(x2 + PAD * 4 + right + nums)
            number = weights[j]
            labels.append(Text(right_x, base, digits, label, "end", sup=power, number=number, role="number", index=j))
    if title:
        centre = (q(x1 + span / 2), q(LABEL_PT * Decimal("1.2")))
        labels.append(Text(*centre, title, LABEL_PT, "middle", bold=True, role="title"))
    total = q(x2 + PAD * 4 + right + nums)
    panel = DiagramPanel(Decimal(0), Decimal(0), total, q(title_h + pitch * m), tuple(lines), tuple(labels))
    return _Built(panel, pitch, label, numbers, step)


def diagram(
    rows: tuple[tuple[Num, ...], ...],
    allowed: tuple[bool, ...] | None,
    source: str,
    keys: tuple[str, ...],
    lang: str,
    head_title: Callable[[int], str],
) -> Diagram:
    """Lines from the focus token to every key, as thick as the weight: one panel per head's row."""
    masked = tuple(allowed is not None and not a for a in (allowed or [True] * len(keys)))
    heads = len(rows)

    def build(width: Decimal, tall: Decimal, k: int = 0) -> _Built:
        return _diagram_panel(rows[k], masked, source, keys, width, tall, head_title(k) if heads > 1 else None)

    def score(width: Decimal, tall: Decimal) -> tuple[DiagramPanel, Decimal]:
        b = build(width, tall)
        return b.panel, min(b.pitch / Decimal("1.15"), b.size)

    across = panels_across(heads, score, Decimal(0))
    width, tall = room(heads, across, Decimal(0))
    built = [build(width, tall, k) for k in range(heads)]
    offsets, w, h = place([b.panel for b in built], across)
    panels = tuple(moved(b.panel, x, y) for b, (x, y) in zip(built, offsets))
    return Diagram("tokens", "A", lang, w, h, panels, built[0].numbers, built[0].step, any(masked))
