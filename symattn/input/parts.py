"""The compound parts of a spec, each read and checked on its own: the projection (X and the W), the mask,
several heads with W_O, the backward pass's loss, and the decimals shown."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from symattn.input import limits
from symattn.input.choices import MASKS
from symattn.input.errors import ShapeError
from symattn.input.filematrix import has_formulas
from symattn.input.groups import check_kv_heads
from symattn.input.messages import said
from symattn.input.projection import Projection
from symattn.input.reader import Matrix, Numerals, Reader, brief, check_keys, did_you_mean, kind_of, parse_index
from symattn.input.records import record


@record
class Decimals:
    """Digits after the point shown for each quantity."""

    scores: int = 3  # used only where a score does not terminate
    sqrt_dk: int = 3
    scaled: int = 3
    exp: int = 3  # also the row sums of exps
    weights: int = 3
    percent: int = 1
    output: int = 3
    gradients: int = 3  # every gradient of the backward pass


LOSSES = ("sum", "mse", "given")


@record
class Backward:
    """The ``[backward]`` table: where dL/dO comes from.

    ``sum``: L = Σ O, so dL/dO is all ones; ``mse``: L = ½ Σ (O − T)², so dL/dO = O − T;
    ``given``: dL/dO written out as ``grad_output``.
    """

    loss: str = "sum"
    grad_output: Numerals | None = None
    target: Numerals | None = None


def _has_symbols(m: Matrix | None) -> bool:
    return m is not None and has_formulas(m)


def check_symbolic(reader: Reader, matrices: list[tuple[str, Matrix | None]]) -> None:
    """Formulas are for small teaching examples; their products grow fast."""
    for key, m in matrices:
        if m is not None and _has_symbols(m) and max(len(m), len(m[0])) > limits.SYMBOLIC_SIZE:
            raise reader.limit(
                key,
                f"{len(m)}×{len(m[0])} with symbols; at most {limits.SYMBOLIC_SIZE} rows and columns may hold formulas",
            )


def check_products(reader: Reader, name: str, A: Matrix, B: Matrix) -> None:
    """Refuse rows·rows products of formulas that would multiply out past the limit (before SymPy does)."""
    if not (_has_symbols(A) or _has_symbols(B)) or len(A[0]) != len(B[0]):
        return
    from symattn.input.formula import Formula, terms  # SymPy: only where a matrix holds a formula

    def _terms(x: object) -> int:
        return terms(x.expr) if isinstance(x, Formula) else 1

    a_terms = [[_terms(x) for x in row] for row in A]
    b_terms = [[_terms(x) for x in row] for row in B]
    for i, a in enumerate(a_terms, 1):
        for j, b in enumerate(b_terms, 1):
            if sum(x * y for x, y in zip(a, b)) > limits.FORMULA_TERMS:
                raise reader.limit(
                    name, f"more than {limits.FORMULA_TERMS} terms once multiplied out (the limit)", (i, j)
                )


def _shape(m: Matrix) -> str:
    return f"{len(m)}×{len(m[0])}"


def mismatch(source: str, key: str, a: str, A: Matrix, b: str, B: Matrix, need: str) -> ShapeError:
    return ShapeError(source, key, f"shape mismatch: {a} is {_shape(A)} and {b} is {_shape(B)}; {need}")


def read_projection(reader: Reader, data: Mapping[str, Any]) -> Projection:
    source = reader.source
    for key in ("W_Q", "W_K", "W_V"):
        if key not in data:
            raise reader.error(key, "missing (X needs W_Q, W_K and W_V)")
    X = reader.matrix(data["X"], "X", symbolic=True)
    X_kv = reader.matrix(data["X_kv"], "X_kv", symbolic=True) if "X_kv" in data else None
    W = {k: reader.matrix(data[k], k, max_rows=limits.DIMS, symbolic=True) for k in ("W_Q", "W_K", "W_V")}
    for key, inputs, name in (
        ("W_Q", X, "X"),
        ("W_K", X_kv or X, "X_kv" if X_kv else "X"),
        ("W_V", X_kv or X, "X_kv" if X_kv else "X"),
    ):
        if len(W[key]) != len(inputs[0]):
            raise mismatch(source, key, name, inputs, key, W[key], f"{key} needs one row per column of {name}")
    if len(W["W_K"][0]) != len(W["W_Q"][0]) and "kv_heads" not in data:  # grouped: see read_heads
        raise mismatch(
            source, "W_K", "W_Q", W["W_Q"], "W_K", W["W_K"], "W_Q and W_K need the same number of columns (d_k)"
        )
    biases = {}
    for name in ("Q", "K", "V"):
        key = f"b_{name}"
        if key in data:
            row = reader.vector(data[key], key, symbolic=True)
            width = len(W[f"W_{name}"][0])
            if len(row) != width:
                raise ShapeError(source, key, f"{len(row)} entries for the {width} columns of W_{name}")
            biases[key] = row
    return Projection(X, X_kv, W["W_Q"], W["W_K"], W["W_V"], **biases)


def read_mask(reader: Reader, data: Mapping[str, Any], tokens: tuple[str, ...], keys: tuple[str, ...], where: Any):
    """mask, key_padding and the mask parts (symattn.variants: the causal diagonal's alignment, a window):
    (kind, allowed or None where every key is, padding, the mask parts' (name, setting) pairs)."""
    n, m = len(tokens), len(keys)
    raw = data.get("mask", "none")
    if isinstance(raw, str):
        kind = reader.choice(raw, "mask", MASKS)
        # the mask parts' mask_mod (the causal diagonal and its alignment, a window), ANDed with the mask
        parts, settings, pairs, restricted = _mask_parts(reader, data, where, kind == "causal")
        if kind == "none" and not restricted and "key_padding" not in data:  # every key: no n×m lists
            return kind, None, None, pairs
        allowed = [[True] * m for _ in range(n)]
    else:
        kind = "matrix"
        if not isinstance(raw, (list, tuple)) or not raw or not all(isinstance(r, (list, tuple)) for r in raw):
            raise reader.error("mask", f"expected 'none', 'causal' or a matrix of 0 and 1, got {kind_of(raw)}")
        if len(raw) != n or any(len(r) != m for r in raw):
            cols = len(raw[0]) if all(len(r) == len(raw[0]) for r in raw) else "?"
            raise ShapeError(
                reader.source, "mask", f"shape mismatch: expected {n}×{m} (queries × keys), got {len(raw)}×{cols}"
            )
        allowed = []
        for i, r in enumerate(raw, 1):
            out = []
            for j, x in enumerate(r, 1):
                if x in (0, 1, "0", "1") and not isinstance(x, float):
                    out.append(x in (1, "1"))
                elif isinstance(x, bool):
                    out.append(x)
                else:
                    raise reader.error("mask", said("zero_or_one", got=brief(x)), (i, j))
            allowed.append(out)
    if kind == "matrix":  # its mask parts come after it (a string mask's before its n×m lists)
        parts, settings, pairs, restricted = _mask_parts(reader, data, where, False)
    causal = kind == "causal"
    allowed = [
        [a and all(p.allows(s, causal, i, j) for p, s in zip(parts, settings)) for j, a in enumerate(row)]
        for i, row in enumerate(allowed)
    ]
    padding = None
    if "key_padding" in data:
        pad = data["key_padding"]
        if not isinstance(pad, (list, tuple)):
            raise reader.error("key_padding", f"expected a list of true/false over the keys, got {kind_of(pad)}")
        if len(pad) != m:
            raise ShapeError(reader.source, "key_padding", f"{len(pad)} entries for {m} keys")
        for j, x in enumerate(pad, 1):
            if not isinstance(x, bool):
                raise reader.error("key_padding", f"expected true or false, got {brief(x)}", (j,))
        padding = tuple(pad)
        allowed = [[a and not padding[j] for j, a in enumerate(row)] for row in allowed]
    for i, row in enumerate(allowed):
        if not any(row):
            blame = (p.empty_row(s, i, m) for p, s in zip(parts, settings))
            key, why = next((b for b in blame if b is not None), ("mask", ""))
            raise reader.error(key, said("attends_nothing", row=i + 1, token=tokens[i], why=why))
    full = all(all(row) for row in allowed)
    return kind, (None if full else tuple(tuple(row) for row in allowed)), padding, pairs


def _mask_parts(reader: Reader, data: Mapping[str, Any], where: Any, causal: bool) -> tuple[Any, list, tuple, bool]:
    """The mask parts, their settings, the (name, setting) pairs of those the spec has, and whether one may
    block a key where the mask does not."""
    from dataclasses import replace

    from symattn import variants

    parts = variants.mask_parts()
    settings = [p.read(reader, data, replace(where, causal=causal)) for p in parts]
    pairs = tuple((p.name, s) for p, s in zip(parts, settings) if s is not None)
    return parts, settings, pairs, any(p.restricts(s) for p, s in zip(parts, settings))


def read_backward(reader: Reader, raw: object, rows: int, cols: int) -> Backward:
    """``[backward]``: loss = "sum" | "mse" (with target), or grad_output; dL/dO has the shape of O."""
    if not isinstance(raw, Mapping):
        raise reader.error("backward", f"expected a table, got {kind_of(raw)}")
    names = ("loss", "grad_output", "target")
    check_keys(reader, {f"backward.{k}": v for k, v in raw.items()}, tuple(f"backward.{n}" for n in names))
    given = "grad_output" in raw
    loss = reader.choice(raw.get("loss", "given" if given else "sum"), "backward.loss", LOSSES)

    def matrix(name: str) -> Numerals:
        key = f"backward.{name}"
        m = reader.matrix(raw[name], key)
        if len(m) != rows or len(m[0]) != cols:
            raise ShapeError(
                reader.source,
                key,
                f"shape mismatch: the output O is {rows}×{cols} and {name} is {_shape(m)}; {name} needs the shape of O",
            )
        return m

    if loss == "given":
        if not given:
            raise reader.error("backward.grad_output", 'missing (loss = "given" takes dL/dO as grad_output)')
        if "target" in raw:
            raise reader.error("backward.target", 'only with loss = "mse"')
        return Backward("given", grad_output=matrix("grad_output"))
    if given:
        raise reader.error("backward.grad_output", f'give loss = "{loss}" or grad_output, not both')
    if loss == "mse":
        if "target" not in raw:
            raise reader.error("backward.target", 'missing (loss = "mse" needs the target T)')
        return Backward("mse", target=matrix("target"))
    if "target" in raw:
        raise reader.error("backward.target", 'only with loss = "mse"')
    return Backward("sum")


def heads_count(reader: Reader, data: Mapping[str, Any], most: int | None = None) -> int:
    """``heads``: a whole number from 1 to the limit (1 where it is not given); ``most``: another limit."""
    most = limits.HEADS if most is None else most
    heads = parse_index(data.get("heads", 1))
    if heads is None or not 1 <= heads <= most:
        raise reader.error("heads", said("integer_range", most=most, got=brief(data.get("heads"))))
    return heads


def read_heads(
    reader: Reader,
    data: Mapping[str, Any],
    projection: Projection | None,
    d_v: int,
    d_q: int,
    kv_heads: int | None = None,
    d_k: int | None = None,
    most: int | None = None,
):
    """``heads``, W_O and b_O; with ``kv_heads`` (grouped-query), K and V have kv_heads head blocks
    (``d_k``: the columns of K); ``most``: heads_count's."""
    heads = heads_count(reader, data, most)
    check_kv_heads(reader, kv_heads, heads)
    groups = kv_heads or heads
    if projection is None and (heads > 1 or kv_heads is not None):
        # Q, K, V given directly, as torch's multi-head attention sees them after identity projections:
        # each head takes its own columns
        if d_q % heads:
            which = "qk_columns" if kv_heads is None else "q_columns"
            raise reader.error("heads", said(which, n=d_q, heads=heads))
        if kv_heads is not None and d_k != d_q // heads * kv_heads:
            need = d_q // heads * kv_heads
            raise reader.error("K", said("k_columns", n=d_k, kv_heads=kv_heads, d_k=d_q // heads, need=need))
        if d_v % groups:
            by = f"heads = {heads}" if kv_heads is None else f"kv_heads = {kv_heads}"
            raise reader.error("heads" if kv_heads is None else "kv_heads", said("v_columns", n=d_v, by=by))
    elif heads > 1 or kv_heads is not None:
        assert projection is not None  # the branch above takes Q, K, V given directly
        d_model = len(projection.X[0])
        if d_model % heads:
            raise reader.error("heads", said("d_model_heads", d_model=d_model, heads=heads))
        for key in ("W_Q", "W_K", "W_V"):
            W = getattr(projection, key)
            width = d_model if key == "W_Q" else d_model // heads * groups
            if len(W[0]) != width:
                form = "d_model × d_model" if width == d_model else "d_model × (kv_heads · d_model / heads)"
                raise ShapeError(
                    reader.source,
                    key,
                    f"shape mismatch: {key} is {_shape(W)}; with heads it must be {form} = {len(W)}×{width}",
                )
    d_v = d_v // groups * heads  # the heads' outputs side by side
    W_O = b_O = None
    if "W_O" in data:
        W_O = reader.matrix(data["W_O"], "W_O", max_rows=limits.DIMS)
        if len(W_O) != d_v:
            raise ShapeError(
                reader.source,
                "W_O",
                f"shape mismatch: the heads give {d_v} columns and W_O is {_shape(W_O)}; W_O needs one row per column",
            )
    if "b_O" in data:
        if W_O is None:
            raise reader.error("b_O", "needs W_O")
        b_O = reader.vector(data["b_O"], "b_O")
        if len(b_O) != len(W_O[0]):
            raise ShapeError(reader.source, "b_O", f"{len(b_O)} entries for the {len(W_O[0])} columns of W_O")
    return heads, W_O, b_O


def read_decimals(reader: Reader, raw: object, key: str) -> Decimals:
    if not isinstance(raw, Mapping):
        raise reader.error(key, f"expected a table of integers, got {kind_of(raw)}")
    names = [f.name for f in fields(Decimals)]
    values = {}
    for name, value in raw.items():
        if name not in names:
            raise reader.error(
                f"{key}.{name}", "unknown key; expected one of " + ", ".join(names) + did_you_mean(name, names)
            )
        number = parse_index(value)
        if number is None or not 0 <= number <= limits.DECIMALS:
            raise reader.error(f"{key}.{name}", f"expected an integer from 0 to {limits.DECIMALS}, got {brief(value)}")
        values[name] = number
    return Decimals(**values)
