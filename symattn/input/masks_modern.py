"""The modern masks of a spec: a sliding ``window`` and the causal diagonal's ``causal_align``
(issue 20). Both only restrict where a query may attend; :func:`symattn.input.parts.read_mask` ANDs
what they allow with the mask and the key padding, and refuses a row left with no key.

    top-left (torch's ``is_causal``):    query i may attend key j ≤ i
    bottom-right (FlashAttention's):     query i may attend key j ≤ i + n_k − n_q
    window w, diagonal at i + offset:    i + offset − w < j ≤ i + offset

A window of n_k keys or more sets no lower bound: it means no window, only its diagonal (j ≤ i + offset).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from symattn.input import limits
from symattn.input.messages import said
from symattn.input.reader import Reader, brief, parse_index

ALIGNMENTS = ("top-left", "bottom-right")


@dataclass(frozen=True)
class Diagonal:
    """Where the causal diagonal lies and how wide the window below it is."""

    align: str = "top-left"
    offset: int = 0  # query i's diagonal is key i + offset
    window: int | None = None  # as given; None: no window
    keys: int = 0  # n_k: a window of as many keys or more has no lower bound

    def allows(self, causal: bool, i: int, j: int) -> bool:
        """Whether query i may attend key j under the causal mask (when ``causal``) and the window."""
        top = i + self.offset
        if self.window is None:
            return not causal or j <= top
        return j <= top and (self.window >= self.keys or top - self.window < j)


def read_diagonal(reader: Reader, data: Mapping[str, Any], causal: bool, n_q: int, n_k: int) -> Diagonal:
    """``causal_align`` and ``window`` for n_q queries and n_k keys (``causal``: mask = "causal")."""
    window = None
    if "window" in data:
        raw = data["window"]
        window = parse_index(raw)
        if window is None or not 1 <= window <= limits.WINDOW:
            raise reader.error("window", said("window_range", most=limits.WINDOW, got=brief(raw)))
    align = "top-left"
    if "causal_align" in data:
        align = reader.choice(data["causal_align"], "causal_align", ALIGNMENTS)
        if not causal and window is None:
            raise reader.error("causal_align", said("align_alone"))
    offset = n_k - n_q if align == "bottom-right" else 0
    return Diagonal(align, offset, window, n_k)


def empty_row_reason(diagonal: Diagonal, i: int, n_k: int) -> tuple[str, str]:
    """The key to blame when row i (0-based) is left with no key, and why, when the diagonal alone
    explains it; else ("mask", "")."""
    top = i + diagonal.offset
    if top < 0:
        return "causal_align", said("align_before", align=repr(diagonal.align))
    if diagonal.window is not None and diagonal.window < n_k and top - diagonal.window + 1 >= n_k:
        return "window", said("window_past", window=diagonal.window, key=top + 1, last=n_k)
    return "mask", ""
