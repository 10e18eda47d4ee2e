"""Where an entry of a comparison lies in the result as its author holds it (issue 28): named axes with
numpy's 0-based indices, ``o[1, 2, 77, 5]`` in text and ``{"batch": 1, "head": 2, "query": 77, "column": 5}``
in JSON, the axes in the result's own order.

compare works on one matrix. A result with batch and head axes is lined up as the float64 path lines its
heads up (``batched.arrange``): O as a block of columns per head, batch by batch, (N, B·H·D); the LSE as a
row per head, (B·H, N). A matrix result (two axes once leading axes of one are dropped) is its own: one
head's O, weights, gradients or log-sum-exps, or several heads' O side by side in columns, or their LSE
a row each. A :class:`Places` turns a place of compare's matrix into the result's axes, and tells which
entries are one (batch, head)'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from symattn.input.records import record

SYMBOLS = {"output": "o", "weights": "a", "lse": "lse", "lse2": "lse", "dQ": "dq", "dK": "dk", "dV": "dv"}
SYMBOLS["dsink"] = "dsink"
# a matrix result's (row, column) axes
_MATRIX = {"output": ("query", "column"), "weights": ("query", "key"), "dQ": ("query", "column")}
_MATRIX |= {"dK": ("key", "column"), "dV": ("key", "column"), "lse": ("head", "query"), "lse2": ("head", "query")}
_MATRIX["dsink"] = ("row", "head")  # one row: a number per query head
# a result with batch and head axes: its axes in each layout, with the batch axis and without
_AXES = {
    ("bhnd", 4): ("batch", "head", "query", "column"),
    ("bhnd", 3): ("head", "query", "column"),
    ("bnhd", 4): ("batch", "query", "head", "column"),
    ("bnhd", 3): ("query", "head", "column"),
}


@record
class Places:
    symbol: str  # o, a, lse, dq, dk, dv
    axes: tuple[str, ...]  # the result's axes, in its order
    lined: str = "matrix"  # "matrix"; "columns": O's heads side by side; "rows": the LSE's heads a row each
    heads: int = 1  # query heads lined up (per batch)
    width: int = 0  # "columns": each head's columns
    segment: int | None = None  # the columns of a row that are one head's own (row-relative figures); None: all
    matrix: tuple[str, str] = ("query", "column")  # "matrix": what its rows and columns are
    layout: str = "bhnd"  # the order of a result's batch and head axes (bnhd: batch, query, head, column)
    batch: int = 1
    starts: tuple[int, ...] = ()  # varlen's cu_seqlens_q: the axis "token" is a query of a packed sequence
    sequences: tuple[int, ...] = ()  # varlen: the offsets of the sequences along the rows (O, dQ: cu_seqlens_q;
    # dK, dV: cu_seqlens_k) or the LSE's columns; each (sequence, head) has a summary of its own

    def index(self, i: int, j: int) -> dict[str, int]:
        """The place of entry (i, j) of compare's matrix in the result: {axis: 0-based index}, in its order."""
        if self.lined == "columns":
            k, column = divmod(j, self.width)
            named = {"batch": k // self.heads, "head": k % self.heads, "query": i, "key": i, "column": column}
        elif self.lined == "rows":
            named = {"batch": i // self.heads, "head": i % self.heads, "query": j}
        else:
            named = dict(zip(self.matrix, (i, j)))
        if "query" in named:
            named["token"] = named["query"]
        return {axis: named.get(axis, 0) for axis in self.axes}  # an axis of length one: as_given's, at 0

    def text(self, i: int, j: int) -> str:
        """``o[1, 2, 77, 5]``; varlen's ``out[37, 2, 5] (sequence 1, query 5)``, dK's and dV's ``(sequence 1,
        key 3)``."""
        place = self.index(i, j)
        text = f"{self.symbol}[{', '.join(str(v) for v in place.values())}]"
        if self.starts and ("token" in place or ("key" in place and self.sequences)):
            from bisect import bisect_right

            t, starts, word = (
                (place["token"], self.starts, "query") if "token" in place else (place["key"], self.sequences, "key")
            )
            s = bisect_right(starts, t) - 1
            text += f" (sequence {s}, {word} {t - starts[s]})"
        return text

    @property
    def convention(self) -> str:
        """``o[batch, head, query, column]``: the axes a place names, in order."""
        return f"{self.symbol}[{', '.join(self.axes)}]"

    @property
    def has_heads(self) -> bool:
        """Whether the result has batch and head axes: then each (batch, head) has a summary of its own."""
        return self.lined != "matrix"

    def line_up(self, result: Any) -> Any:
        """A result as read, lined up as compare lines its heads up (a matrix result as it is)."""
        if not self.has_heads:
            return result
        from symattn.input.batched import arrange

        return arrange(result, self.layout, "lse" if self.lined == "rows" else "output", self.batch, self.heads)

    @property
    def measured(self) -> str:
        """What |… − exact| measures: ``out`` for an output (``o``, ``a``, the API's ``out``), else the
        quantity's own symbol (``dq``, ``lse``), as its places name it."""
        return "out" if self.symbol in ("o", "a") else self.symbol

    @property
    def unit(self) -> str:
        """What a head's summary is of beside its head: a ``batch``, or varlen's ``sequence``."""
        return "sequence" if self.sequences else "batch"

    def head_of(self, i: int, j: int) -> tuple[int, int]:
        """The (batch, head) of entry (i, j), 0-based; varlen's (sequence, head)."""
        k = j // self.width if self.lined == "columns" else i
        if self.sequences:  # one batch of packed sequences: the token (a row of O, a column of the LSE) says which
            from bisect import bisect_right

            return bisect_right(self.sequences, i if self.lined == "columns" else j) - 1, k % self.heads
        return k // self.heads, k % self.heads

    def regions(self, shape: tuple[int, int]) -> Iterator[tuple[tuple[int, int], tuple[slice, slice]]]:
        """Each (batch, head) and its block of compare's matrix, in order (none for a matrix result); varlen's
        (sequence, head), sequence by sequence (one without queries has none)."""
        rows, cols = shape
        if self.sequences:
            tokens = rows if self.lined == "columns" else cols
            for s, (first, stop) in enumerate(zip(self.sequences, (*self.sequences[1:], tokens))):
                for h in range(self.heads) if first < stop else ():
                    if self.lined == "columns":
                        yield (s, h), (slice(first, stop), slice(h * self.width, (h + 1) * self.width))
                    else:
                        yield (s, h), (slice(h, h + 1), slice(first, stop))
        elif self.lined == "columns":
            for k in range(cols // self.width):
                yield divmod(k, self.heads), (slice(0, rows), slice(k * self.width, (k + 1) * self.width))
        elif self.lined == "rows":
            for k in range(rows):
                yield divmod(k, self.heads), (slice(k, k + 1), slice(0, cols))


def matrix_places(quantity: str, heads: int = 1, segment: int | None = None) -> Places:
    """A matrix result's places: (query, column), (query, key) for the weights, (key, column) for dK and dV;
    the log-sum-exp's (head, query), or only the query for one head."""
    axes = _MATRIX[quantity]
    if quantity == "dsink":  # dsink[head]: each head's number is its own row
        return Places(SYMBOLS[quantity], ("head",), segment=1, matrix=axes)
    one = quantity in ("lse", "lse2") and heads == 1
    return Places(SYMBOLS[quantity], ("query",) if one else axes, segment=segment, matrix=axes)


def as_given(places: Places, quantity: str, shape: tuple[int, ...], layout: str) -> Places:
    """The places of the array as its author gave it (``shape``): the axes of length one that compare drops to
    line heads up (a batch of one, one head) come back, each at index 0, so that a file and a tensor of one
    shape name one place: (1, 4, N, D) ``o[0, 2, 77, 5]``, (1, 1, N, D) ``o[0, 0, 77, 5]``, (N, D) ``o[77, 5]``."""
    if len(shape) <= len(places.axes):
        return places
    if quantity in ("lse", "lse2"):
        axes = ("batch", "head", "query")[-len(shape) :]
    elif len(shape) == 2:
        axes = _MATRIX[quantity]
    else:
        axes = _AXES[(layout, len(shape))]
        row, column = _MATRIX.get(quantity, ("query", "column"))
        axes = tuple(row if a == "query" else column if a == "column" else a for a in axes)
    return replace(places, axes=axes)


def lined_places(quantity: str, layout: str, dims: int, batch: int, heads: int, width: int) -> Places:
    """The places of a result with batch and head axes (``dims`` of them: 3 or 4 for O and the gradients, 3
    for the LSE), lined up by ``batched.arrange``."""
    if quantity in ("lse", "lse2"):
        return Places(SYMBOLS[quantity], ("batch", "head", "query"), "rows", heads, layout=layout, batch=batch)
    axes = _AXES[(layout, dims)]
    if quantity in ("dK", "dV"):  # a row of dK or dV is a key's
        axes = tuple("key" if a == "query" else a for a in axes)
    return Places(SYMBOLS[quantity], axes, "columns", heads, width, width, layout=layout, batch=batch)


__all__ = ["SYMBOLS", "Places", "as_given", "lined_places", "matrix_places"]
