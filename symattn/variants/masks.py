"""The modern masks, one part: a sliding ``window`` and where the causal diagonal lies (``causal_align``).
Both only restrict where a query may attend (FlexAttention's ``mask_mod``): the spec's reader ANDs what
they allow with the mask matrix and the key padding, and refuses a row left with no key.

    top-left (torch's ``is_causal``):    query i may attend key j ≤ i
    bottom-right (FlashAttention's):     query i may attend key j ≤ i + n_k − n_q
    window w, diagonal at i + offset:    i + offset − w < j ≤ i + offset
    window [left, right]:                i + offset − left ≤ j ≤ i + offset + right (−1: no bound that side)

The pair is FlashAttention's ``window_size``, as compare and a layout spec take it; it is not causal unless
the mask is (FlashAttention's ``causal=True`` sets right to 0). A window of n_k keys or more sets no lower
bound: it means no window, only its diagonal (j ≤ i + offset).
Everything it does is in ``spec.allowed``, so the exact model, the checker and compare's float64 path
take it as any mask; the masking step of a derivation says where the diagonal lies and how wide the
window is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from symattn.input.messages import said
from symattn.input.reader import brief, parse_index
from symattn.input.records import record
from symattn.variants.base import MASK, Part, Where
from symattn.variants.positions import read_positions

# --- limits of the masks --------------------------------------------------------------------
WINDOW = 2**31 - 1  # keys of a sliding window: window_size's int32 (no array is sized by it; a wider one: none)

# --- the setting ---------------------------------------------------------------------------

ALIGNMENTS = ("top-left", "bottom-right")


@record
class Diagonal:
    """Where the causal diagonal lies and how wide the window below it is."""

    align: str = "top-left"
    offset: int = 0  # query i's diagonal is key i + offset
    window: int | tuple[int, int] | None = None  # as given (keys, or window_size's pair); None: no window
    keys: int = 0  # n_k: a window of as many keys or more has no lower bound
    q_pos: tuple[int, ...] = ()  # the tokens' positions where the spec gives them (symattn.variants.positions)
    k_pos: tuple[int, ...] = ()

    def allows(self, causal: bool, i: int, j: int) -> bool:
        """Whether query i may attend key j under the causal mask (when ``causal``) and the window: by their
        positions where the spec gives them, else by their rows."""
        wide = type(self.window) is int and self.window >= self.keys  # as wide as the keys: no lower bound
        if self.q_pos:  # positions: a window counts them, however few the keys
            i, j, wide = self.q_pos[i], self.k_pos[j], False
        top = i + self.offset
        if self.window is None:
            return not causal or j <= top
        if isinstance(self.window, tuple):  # FlashAttention's window_size: −1 leaves a side without bound
            left, right = self.window
            return (not causal or j <= top) and (left < 0 or top - left <= j) and (right < 0 or j <= top + right)
        return j <= top and (wide or top - self.window < j)


# --- the step of a derivation ----------------------------------------------------------------


@record
class MaskDiagonal:
    """The causal diagonal and the window of a masking step, with the focus row's bounds (1-based):
    the focus query i may attend keys j with low < j ≤ high (no lower bound without a window)."""

    causal: bool  # mask = "causal"
    align: str  # "top-left" or "bottom-right"
    offset: int  # query i's diagonal is key i + offset
    n_queries: int
    n_keys: int
    window: int | tuple[int, int] | None
    wide: bool  # a window of n_k keys or more: only its diagonal bounds it
    query: int  # the focus query, 1-based
    high: int | None  # i + offset (i + offset + right for a pair without the causal mask; None: no bound)
    low: int | None  # i + offset − window (− left − 1 for a pair), or None without a lower bound
    keys: tuple[int, ...]  # the keys (0-based) the diagonal and the window leave the focus query


# --- the part -------------------------------------------------------------------------------------


class Masks(Part):
    name = "masks"
    keys = ("window", "causal_align")
    stage = MASK
    title = "masks"
    unstated = ("causal_align",)  # a sheet states the window, not the alignment
    web_fields = (
        {"key": "window", "kind": "number", "min": 1, "max": WINDOW, "default": ""},
        {"key": "causal_align", "kind": "select", "choices": list(ALIGNMENTS), "default": "top-left"},
    )
    facts = (("toy_vs_real", "window", None), ("toy_vs_real", "causal_align", "top-left"))
    attributes = ("window", "causal_align")
    rounded_inputs = True
    float64_in_mask = True
    grid_key = "window"

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Diagonal | None:
        """``causal_align`` and ``window`` for n_q queries and n_k keys (``where.causal``: mask = "causal");
        None where neither is given."""
        window: int | tuple[int, int] | None = None
        if "window" in data:
            raw = data["window"]
            if isinstance(raw, list):  # FlashAttention's window_size [left, right], as a layout spec takes it
                from symattn.input.errors import SpecError

                try:
                    window = window_size(raw)
                except SpecError as exc:
                    raise reader.error("window", exc.problem) from None
                window = None if window == (-1, -1) else window  # no bound on either side: no window
            else:
                window = parse_index(raw)
                if window is None or not 1 <= window <= WINDOW:
                    raise reader.error("window", said("window_range", most=WINDOW, got=brief(raw)))
        align = "top-left"
        if "causal_align" in data:
            align = reader.choice(data["causal_align"], "causal_align", ALIGNMENTS)
            if not where.causal and window is None:
                raise reader.error("causal_align", said("align_alone"))
        placed = read_positions(reader, data, where)
        if placed is not None:  # the diagonal and the window compare positions
            if align != "top-left":
                raise reader.error(
                    "causal_align", "with positions the causal mask compares them; leave causal_align out"
                )
            return Diagonal(align, 0, window, where.n_k, placed.queries, placed.keys)
        if window is None and align == "top-left":
            return None
        offset = where.n_k - where.n_q if align == "bottom-right" else 0
        return Diagonal(align, offset, window, where.n_k)

    def attribute(self, setting: Diagonal | None, name: str) -> Any:
        if name == "window":
            return None if setting is None else setting.window
        return "top-left" if setting is None else setting.align

    @staticmethod
    def restricts(setting: Diagonal | None) -> bool:
        """Whether it blocks keys beyond the causal mask's (a window)."""
        return setting is not None and setting.window is not None

    @staticmethod
    def allows(setting: Diagonal | None, causal: bool, i: int, j: int) -> bool:
        """Its mask_mod: whether query i may attend key j (with the causal mask when ``causal``)."""
        return (setting or Diagonal()).allows(causal, i, j)

    @staticmethod
    def empty_row(setting: Diagonal | None, i: int, n_k: int) -> tuple[str, str] | None:
        """The key to blame when row i (0-based) is left with no key, and why, when the diagonal alone
        explains it; else None."""
        diagonal = setting or Diagonal()
        if diagonal.q_pos:  # by positions: the row's own message says what it sees
            return None
        top = i + diagonal.offset
        if top < 0:
            return "causal_align", said("align_before", align=repr(diagonal.align))
        if isinstance(diagonal.window, tuple):
            left, right = diagonal.window
            return "window", said("window_size_past", left=left, right=right)
        if diagonal.window is not None and diagonal.window < n_k and top - diagonal.window + 1 >= n_k:
            return "window", said("window_past", window=diagonal.window, key=top + 1, last=n_k)
        return None

    def report(self, spec: Any, setting: Diagonal | None) -> dict[str, Any]:
        """The window and the causal alignment, where they are set."""
        out: dict[str, Any] = {}
        if spec.window is not None:
            out["window"] = list(spec.window) if isinstance(spec.window, tuple) else spec.window
        if spec.causal_align != "top-left":
            out["causal_align"] = spec.causal_align
        return out

    def toy(self, spec: Any, setting: Diagonal | None) -> tuple[tuple[str, Any], ...]:
        return (("window", spec.window), ("causal_align", spec.causal_align))

    def masking(self, spec: Any, setting: Diagonal | None) -> MaskDiagonal | None:
        """What the masking step says about the diagonal and the window; None where the plain causal
        sentence says it all (no window, top-left, as many queries as keys) or there is no diagonal."""
        n, m = len(spec.tokens), len(spec.keys)
        if setting is not None and setting.q_pos:  # positions: the step that places the tokens says it
            return None
        causal = spec.mask == "causal"
        window, align = spec.window, spec.causal_align
        if window is None and not (causal and (align != "top-left" or n != m)):
            return None
        offset = m - n if align == "bottom-right" else 0
        i = spec.focus + 1
        top = i + offset
        high: int | None = top
        if isinstance(window, tuple):  # window_size: top − left ≤ j ≤ top + right, −1 a side without bound
            left, right = window
            low = None if left < 0 else top - left - 1
            high = top if causal else None if right < 0 else top + right
            wide = False
        else:
            low = None if window is None or window >= m else top - window  # a window of n_k keys: none
            wide = window is not None and window >= m
        keys = tuple(j for j in range(m) if (high is None or j + 1 <= high) and (low is None or j + 1 > low))
        return MaskDiagonal(causal, align, offset, n, m, window, wide, i, high, low, keys)

    def kernel_mask(self, n: int, m: int, causal: bool, align: str, window: Any) -> Any:
        """Where query i may attend key j: the causal diagonal (top-left, or bottom-right: offset m − n) and the
        sliding window of ``window`` keys ending at it, as a spec's mask, causal_align and window say
        (:meth:`Diagonal.allows`, here for the whole matrix at once): its mask_mod on the float64 path, a numpy
        array of booleans or None where every key is allowed; a keyword out of range is refused in one line."""
        import numpy as np

        from symattn.input.errors import SpecError

        if align not in ALIGNMENTS:
            raise SpecError("causal_align", None, f"expected {' or '.join(map(repr, ALIGNMENTS))}, got {align!r}")
        sides = window_size(window)
        if not causal and (window is None or sides == (-1, -1)):
            return None
        offset = m - n if align == "bottom-right" else 0
        top = np.arange(n)[:, None] + offset
        j = np.arange(m)[None, :]
        allowed = j <= top if causal or type(window) is int else np.ones((n, m), dtype=bool)
        if type(window) is int and window < m:
            allowed &= top - window < j
        elif sides is not None:  # FlashAttention's window_size: i + offset − left ≤ j ≤ i + offset + right
            left, right = sides
            if left >= 0:
                allowed &= top - left <= j
            if right >= 0:
                allowed &= j <= top + right
        empty = np.flatnonzero(~allowed.any(axis=1))
        if empty.size:
            i = int(empty[0])
            if window is None or type(window) is int:
                key, why = self.empty_row(Diagonal(align, offset, window, m), i, m) or ("mask", "")
            else:
                key, why = "window", f" (window_size {sides})"
            raise SpecError(key, None, f"query {i} (0-based) may attend no key{why}; softmax is undefined there")
        return allowed

    def grid_refusal(self, entry: Any) -> str | None:
        if isinstance(entry, list):  # FlashAttention's window_size [left, right]
            from symattn.input.errors import SpecError

            try:
                window_size(entry)
            except SpecError as exc:
                return exc.problem
            return None
        if type(entry) is not int or not 0 <= entry <= WINDOW:
            return f"expected keys from 1 to {WINDOW}, or 0 for none, got {brief(entry)}"
        return None

    def grid_value(self, entry: Any) -> Any:
        return list(entry) if isinstance(entry, list) else entry  # a pair as a list: as its record reads back

    def score_mod(self, argument: Any, scores: Any, i: Any, j: Any, causal: bool, align: str) -> Any:
        """The causal diagonal (``align``: its alignment) and the window of ``argument`` keys ending at it, or
        FlashAttention's window_size (left, right) around it (causal only with the causal mask)."""
        if not causal and argument is None:
            return scores
        top = i + (scores.shape[-1] - scores.shape[-2] if align == "bottom-right" else 0)
        pair = isinstance(argument, (tuple, list))
        allowed = (j <= top) if causal or not pair else (j >= 0) & (top >= 0)
        if pair:
            left, right = argument
            if left >= 0:
                allowed = allowed & (top - left <= j)
            if right >= 0:
                allowed = allowed & (j <= top + right)
        elif argument is not None:
            allowed = allowed & (top - argument < j)
        return scores.masked_fill(~allowed, float("-inf"))


def window_size(window: Any) -> tuple[int, int] | None:
    """compare's ``window`` as FlashAttention's window_size (left, right): w keys ending at the diagonal is
    (w − 1, 0), and causal; a pair is FlashAttention's own, −1 a side without bound. None: no window."""
    from symattn.input.errors import SpecError, clip
    from symattn.input.errors import brief as shown

    if window is None:
        return None
    if type(window) is int and 1 <= window <= WINDOW:
        return window - 1, 0
    if isinstance(window, (tuple, list)) and len(window) == 2 and all(type(x) is int for x in window):
        if all(-1 <= x <= WINDOW for x in window):
            return window[0], window[1]
    if isinstance(window, (tuple, list)):  # a TOML float keeps its text (a str subclass): shown as the number
        got = clip(str(tuple(float(x) if isinstance(x, str) and type(x) is not str else x for x in window)), 40)
    else:
        got = shown(window)
    raise SpecError(
        "window",
        None,
        f"expected keys from 1 to {WINDOW} (a causal window ending at the diagonal) or FlashAttention's "
        f"window_size (left, right), each -1 (no bound) or 0 to {WINDOW}; got {got}",
    )


PART = Masks()

__all__ = ["ALIGNMENTS", "PART", "WINDOW", "Diagonal", "MaskDiagonal", "Masks", "window_size"]
