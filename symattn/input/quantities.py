"""The quantities a claim may name: where each lives, its shape, what its rows and columns are, and its
place in the order of the derivation.

One head without W_O is a layer of its own: every quantity is claimed without a prefix. With several
heads (or W_O) a head's own quantities take the prefix ``hN.`` (``h1.weights``), and the layer has
``Q``, ``K``, ``V`` (every head's columns side by side), ``concat``, ``output`` (after W_O), ``dO``,
``dconcat``, ``dW_O``, and ``dQ``, ``dK``, ``dV`` side by side with the projections' gradients.
``sqrt_dk`` and ``scale`` are one number for every head.
"""

from __future__ import annotations

from typing import Any

from symattn import variants
from symattn.input.spec import Spec


def _with_parts(core: tuple[str, ...], gradient: bool) -> tuple[str, ...]:
    """A head's quantities with the parts' own (symattn.variants) right before the one each names (at the end
    where it names none)."""
    out = list(core)
    for q in variants.QUANTITIES:
        if q.gradient == gradient:
            out.insert(out.index(q.before) if q.before in out else len(out), q.name)
    return tuple(out)


PART_QUANTITIES = {q.name: q for q in variants.QUANTITIES}  # the parts' own claimable quantities
INPUTS = ("Q", "K", "V")  # claimable when they are computed from X and W
SHARED = ("sqrt_dk", "scale")  # scalars, the same for every head
SHARED_PARTS = tuple(q.name for q in variants.QUANTITIES if q.shared)  # a part's matrix that every head shares
HEAD_FORWARD = _with_parts(("scores", "scaled", "shifted", "exp", "exp_sum", "weights", "percent", "output"), False)
HEAD_BACKWARD = _with_parts(("dO", "dV", "dA", "rowsum", "dZ", "dS", "dQ", "dK"), True)
LAYER_FORWARD = ("concat", "output")
LAYER_TOP = ("dO", "dW_O", "dconcat")  # the backward pass's start, before it splits into heads
PROJECTED_GRADIENTS = ("dW_Q", "dW_K", "dW_V", "dX")  # need X with W_Q, W_K, W_V
LAYER_BACKWARD = ("dQ", "dK", "dV") + PROJECTED_GRADIENTS  # after the heads: theirs side by side
OUTPUT_PROJECTION = ("concat", "dW_O", "dconcat")  # only with several heads or W_O
GRADIENTS = ("dO", "dW_O", "dconcat") + HEAD_BACKWARD[1:] + PROJECTED_GRADIENTS
# every name a claims file may use, in the order of the derivation ("percent" is the weights in percent)
QUANTITIES = (
    INPUTS + SHARED + HEAD_FORWARD + ("concat", "dO", "dW_O", "dconcat") + HEAD_BACKWARD[1:] + (PROJECTED_GRADIENTS)
)
# one number (a part's: per head)
SCALARS = SHARED + tuple(q.name for q in variants.QUANTITIES if q.rows is None)
# one number per query (or per a part's own rows: pairs of Q's columns): a row index, no column
COLUMNS = ("exp_sum", "rowsum") + tuple(q.name for q in variants.QUANTITIES if q.rows and q.cols is None)
# rows that are not the queries
NOT_IN_ROWS = (
    INPUTS
    + SHARED
    + tuple(q.name for q in variants.QUANTITIES if q.rows != "token" and q.gradient is False)
    + ("dV", "dK", "dW_O")
    + tuple(q.name for q in variants.QUANTITIES if q.rows != "token" and q.gradient)
    + PROJECTED_GRADIENTS
)

# what the rows and columns are: a query token, a key token, a column of the matrix (1-based), an input
# dimension (a column of X, a row of W)
TOKEN, KEY, DIM, INPUT, PAIR, BLOCK = "token", "key", "dim", "input", "pair", "block"
TOKEN_DIM = "token_dim"  # a (token, 1-based column) pair: a column of one query's row in a block
_AXES = {
    "Q": (TOKEN, DIM),
    "K": (KEY, DIM),
    **{q.name: (q.rows, q.cols) for q in variants.QUANTITIES if q.rows is not None and q.cols is not None},
    "V": (KEY, DIM),
    "output": (TOKEN, DIM),
    "concat": (TOKEN, DIM),
    "dO": (TOKEN, DIM),
    "dconcat": (TOKEN, DIM),
    "dW_O": (DIM, DIM),
    "dV": (KEY, DIM),
    "dQ": (TOKEN, DIM),
    "dK": (KEY, DIM),
    "dW_Q": (INPUT, DIM),
    "dW_K": (INPUT, DIM),
    "dW_V": (INPUT, DIM),
    "dX": (TOKEN, INPUT),
}


def is_multihead(spec: Spec) -> bool:
    """Several heads or W_O: the heads' quantities are claimed with a prefix."""
    return spec.heads > 1 or spec.W_O is not None


def axes(quantity: str) -> tuple[str | None, str | None]:
    """What the rows and the columns of a quantity are (None where it has none)."""
    if quantity in SCALARS:
        return None, None
    if quantity in COLUMNS:
        return (PART_QUANTITIES[quantity].rows if quantity in PART_QUANTITIES else TOKEN), None
    return _AXES.get(quantity, (TOKEN, KEY))


def labels(spec: Spec, quantity: str, row: int | None, col: int | None) -> tuple[Any, Any, str | None, str | None]:
    """(row label, column label, row axis, column axis) of an entry: a token or key label, or a 1-based number."""
    row_axis, col_axis = axes(quantity)
    q = PART_QUANTITIES.get(quantity)
    if q is not None and q.inner is not None and row is not None and col is not None:
        block, i = divmod(row, len(spec.Q))  # [b][i][c], held as row b·n + i: the block, then (token, column)
        return block + 1, (spec.tokens[i], col + 1), BLOCK, TOKEN_DIM
    return _label(spec, row_axis, row), _label(spec, col_axis, col), row_axis, col_axis


def _label(spec: Spec, axis: str | None, index: int | None) -> str | int | None:
    if axis is None or index is None:
        return None
    if axis == BLOCK:
        return index + 1
    if axis == TOKEN:
        return spec.tokens[index]
    if axis == KEY:
        return spec.keys[index]
    assert axis in (DIM, INPUT, PAIR)  # the other axes are numbered
    return index + 1


def is_per_head(quantity: str, spec: Spec, prefixed: bool) -> bool:
    """Whether a claim names one head's quantity (prefixed ``output`` is the head's, plain the layer's)."""
    if not is_multihead(spec) or quantity not in HEAD_FORWARD + HEAD_BACKWARD or quantity in SHARED_PARTS:
        return False
    return prefixed or quantity not in LAYER_FORWARD + LAYER_TOP + LAYER_BACKWARD


def shape(quantity: str, spec: Spec, per_head: bool) -> tuple[int, ...]:
    """The shape of a quantity claimed for the whole matrix: one head's, or the layer's."""
    n, m = len(spec.Q), len(spec.K)
    heads = spec.heads if per_head else 1
    groups = spec.kv_groups if per_head else 1  # grouped-query: K and V have fewer head blocks than Q
    d_q, d_k, d_v = len(spec.Q[0]) // heads, len(spec.K[0]) // groups, len(spec.V[0]) // groups
    if quantity in SCALARS:
        return ()
    if quantity in PART_QUANTITIES and PART_QUANTITIES[quantity].rows == PAIR:  # one number per pair of Q's columns
        return variants.shape(spec, quantity) or (d_q // 2,)
    if quantity in COLUMNS:  # one number per query (or per key)
        return (m if quantity in PART_QUANTITIES and PART_QUANTITIES[quantity].rows == KEY else n,)
    if quantity in INPUTS:
        matrix = getattr(spec, quantity)
        return (len(matrix), len(matrix[0]) // (heads if quantity == "Q" else groups))
    if quantity in ("output", "dO") and not per_head and spec.W_O is not None:
        return (n, len(spec.W_O[0]))
    if quantity in ("output", "concat", "dO", "dconcat"):
        return (n, d_v if per_head else spec.concat_width)
    if quantity == "dW_O":
        assert spec.W_O is not None  # refused without W_O (see the claims reader)
        return (len(spec.W_O), len(spec.W_O[0]))
    if quantity == "dQ":
        return (n, d_q)
    sized = variants.shape(spec, quantity) if quantity in PART_QUANTITIES else None
    if sized is not None:  # a part's own shape (blocks of keys)
        return sized
    if quantity in PART_QUANTITIES:  # a part's own matrix: queries or keys by its width
        q = PART_QUANTITIES[quantity]
        return (n if q.rows == TOKEN else m, {"d_q": d_q, "pairs": d_q // 2}.get(q.width, m))
    if quantity in ("dV", "dK"):
        return (m, d_v if quantity == "dV" else d_k)
    if quantity in PROJECTED_GRADIENTS:
        p = spec.projection
        assert p is not None  # claims on these are refused without a projection (see the claims reader)
        if quantity == "dX":
            return (len(p.X), len(p.X[0]))
        W = getattr(p, "W_" + quantity[-1])
        return (len(W), len(W[0]))
    return (n, m)


def order(quantity: str, head: int | None, multihead: bool) -> tuple[int, int, int]:
    """Where a quantity comes in the derivation: the inputs, each head's forward steps, concat and the
    output, the backward pass's start, each head's gradients, then the gradients after the heads."""
    stage = QUANTITIES.index("weights" if quantity == "percent" else quantity)
    if quantity in SHARED_PARTS:  # made from the layer's input before any head (MLA's c_KV: K and V come from it)
        block, stage = 0, SHARED_PARTS.index(quantity) - len(SHARED_PARTS)
    elif quantity in INPUTS + SHARED:
        block = 0
    elif head is not None:
        block = 1 if quantity in HEAD_FORWARD else 4
    elif not multihead:  # one head without W_O: the head's quantities are the layer's
        block = 1 if quantity in HEAD_FORWARD else 3 if quantity == "dO" else 4 if quantity in HEAD_BACKWARD else 5
    elif quantity in LAYER_FORWARD:  # concat, then the output after W_O
        block, stage = 2, LAYER_FORWARD.index(quantity)
    else:
        block = 3 if quantity in LAYER_TOP else 5
    return (block, -1 if head is None else head, stage)


__all__ = [
    "GRADIENTS",
    "INPUTS",
    "PART_QUANTITIES",
    "QUANTITIES",
    "SHARED_PARTS",
    "axes",
    "is_multihead",
    "is_per_head",
    "labels",
    "order",
    "shape",
]
