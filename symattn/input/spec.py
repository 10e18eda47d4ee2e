"""Read and validate a spec: the inputs of one attention derivation.

A spec comes from a TOML file, a JSON file or a Python mapping. Numbers are
read from their text (see :mod:`symattn.input.numeral`); every problem raises a
:class:`~symattn.input.errors.SpecError` naming the source, the key and the position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from symattn.input import limits
from symattn.input.choices import CJK_FONTS, ENGINES, EXPANDS, MASKS, NOTATIONS, PAPERS, ROUNDINGS, SOFTMAXES
from symattn.input.errors import ShapeError
from symattn.input.files import read_table
from symattn.input.formula import Formula, terms
from symattn.input.numeral import Numeral
from symattn.input.projection import Projection, project
from symattn.input.reader import Matrix, Reader, Scale, brief, check_keys, did_you_mean, kind_of, parse_index


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Backward:
    """The ``[backward]`` table: where dL/dO comes from.

    ``sum``: L = Σ O, so dL/dO is all ones; ``mse``: L = ½ Σ (O − T)², so dL/dO = O − T;
    ``given``: dL/dO written out as ``grad_output``.
    """

    loss: str = "sum"
    grad_output: Matrix | None = None
    target: Matrix | None = None


@dataclass(frozen=True)
class Spec:
    """Validated inputs and settings. Build it with :func:`load_spec`."""

    Q: Matrix
    K: Matrix
    V: Matrix
    tokens: tuple[str, ...]
    focus: int  # 0-based row of Q
    title: str | None = None
    lang: str = "en"
    scale: Scale = "sqrt"
    rounding: str = "exact"
    expand: str = "focus"
    decimals: Decimals = field(default_factory=Decimals)
    source: str = "<dict>"
    key_tokens: tuple[str, ...] = ()  # labels of the keys; empty: the same tokens
    mask: str = "none"  # "none", "causal" or "matrix"
    allowed: tuple[tuple[bool, ...], ...] | None = None  # mask and key padding: True = may attend
    key_padding: tuple[bool, ...] | None = None  # True = a padding key, never attended
    softmax: str = "plain"  # "stable" subtracts the row maximum first
    projection: Projection | None = None  # Q, K, V computed from X and W
    heads: int = 1
    W_O: Matrix | None = None
    b_O: tuple[Numeral, ...] | None = None
    subs: tuple[tuple[str, Numeral], ...] = ()  # values for symbols
    notation: str = "auto"  # "auto", "fixed" or "scientific"
    paper: str | None = None  # "a4" or "letter"; None: A4 for Chinese, Letter for English
    engine: str | None = None  # TeX engine for PDF; None: xelatex for Chinese text, else pdflatex
    cjk_font: str | None = None  # ctex's fontset for Chinese; None: ctex's own choice
    backward: Backward | None = None  # the backward pass, when asked for

    @property
    def page(self) -> str:
        """The paper a document is set on."""
        from symattn.input.choices import default_paper

        return self.paper or default_paper(self.lang)

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbol used in the entries (Q, K, V, or X, W and b), sorted."""
        matrices = [self.Q, self.K, self.V]
        if self.projection is not None:
            matrices += self.projection.inputs()
        names = {name for m in matrices for row in m for x in row if isinstance(x, Formula) for name in x.symbols}
        return tuple(sorted(names))

    @property
    def is_symbolic(self) -> bool:
        return any(isinstance(x, Formula) for m in (self.Q, self.K, self.V) for row in m for x in row)

    @property
    def d_k(self) -> int:
        """Width of one head's queries and keys."""
        return len(self.Q[0]) // self.heads

    @property
    def keys(self) -> tuple[str, ...]:
        return self.key_tokens or self.tokens

    @property
    def is_cross(self) -> bool:
        return bool(self.key_tokens)

    def head(self, index: int) -> Spec:
        """The single-head spec of one head (0-based): its slice of Q, K and V columns."""
        width = len(self.Q[0]) // self.heads

        def columns(m: Matrix) -> Matrix:
            return tuple(row[index * width : (index + 1) * width] for row in m)

        return replace(
            self,
            Q=columns(self.Q),
            K=columns(self.K),
            V=columns(self.V),
            heads=1,
            projection=None,
            W_O=None,
            b_O=None,
            title=None,
            backward=None,
        )

    def with_options(self, **options: Any) -> Spec:
        """Override settings (as the CLI flags do), validated like the spec keys."""
        raw = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(raw) - _OVERRIDABLE)
        if unknown:
            raise TypeError(f"Unknown setting {unknown[0]!r}.")
        reader = Reader(self.source)
        changes: dict[str, Any] = {}
        if "lang" in raw:
            changes["lang"] = reader.lang(raw["lang"], "--lang")
        if "rounding" in raw:
            changes["rounding"] = reader.choice(raw["rounding"], "--rounding", ROUNDINGS)
        if "expand" in raw:
            changes["expand"] = reader.choice(raw["expand"], "--expand", EXPANDS)
        if "focus" in raw:
            changes["focus"] = reader.focus(raw["focus"], self.tokens, "--focus")
        if "notation" in raw:
            changes["notation"] = reader.choice(raw["notation"], "--notation", NOTATIONS)
        for key, options in (("paper", PAPERS), ("engine", ENGINES), ("cjk_font", CJK_FONTS)):
            if key in raw:
                changes[key] = reader.choice(raw[key], "--" + key.replace("_", "-"), options)
        if "subs" in raw:
            given = dict(self.subs)
            given.update(dict(reader.subs(raw["subs"], "--subs", self.symbols)))
            changes["subs"] = tuple(sorted(given.items()))
        if raw.get("backward") and self.backward is None:  # --backward: L = Σ O unless the spec says otherwise
            changes["backward"] = Backward("sum")
        return replace(self, **changes)


_OVERRIDABLE = {"lang", "rounding", "expand", "focus", "subs", "notation", "paper", "engine", "cjk_font", "backward"}
SPEC_KEYS = (
    "title",
    "lang",
    "tokens",
    "focus",
    "Q",
    "K",
    "V",
    "scale",
    "rounding",
    "expand",
    "decimals",
    "key_tokens",
    "mask",
    "key_padding",
    "softmax",
    "X",
    "X_kv",
    "W_Q",
    "W_K",
    "W_V",
    "b_Q",
    "b_K",
    "b_V",
    "heads",
    "W_O",
    "b_O",
    "subs",
    "notation",
    "paper",
    "engine",
    "cjk_font",
    "backward",
)


def _terms(x: object) -> int:
    return terms(x.expr) if isinstance(x, Formula) else 1


def _has_symbols(m: Matrix | None) -> bool:
    return m is not None and any(isinstance(x, Formula) for row in m for x in row)


def _check_symbolic(reader: Reader, matrices: list[tuple[str, Matrix | None]]) -> None:
    """Formulas are for small teaching examples; their products grow fast."""
    for key, m in matrices:
        if _has_symbols(m) and max(len(m), len(m[0])) > limits.SYMBOLIC_SIZE:
            raise reader.limit(
                key,
                f"{len(m)}×{len(m[0])} with symbols; at most {limits.SYMBOLIC_SIZE} rows and columns may hold formulas",
            )


def _check_products(reader: Reader, name: str, A: Matrix, B: Matrix) -> None:
    """Refuse rows·rows products of formulas that would multiply out past the limit (before SymPy does)."""
    if not (_has_symbols(A) or _has_symbols(B)) or len(A[0]) != len(B[0]):
        return
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


def _mismatch(source: str, key: str, a: str, A: Matrix, b: str, B: Matrix, need: str) -> ShapeError:
    return ShapeError(source, key, f"shape mismatch: {a} is {_shape(A)} and {b} is {_shape(B)}; {need}")


def _projection(reader: Reader, data: Mapping[str, Any]) -> Projection:
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
            raise _mismatch(source, key, name, inputs, key, W[key], f"{key} needs one row per column of {name}")
    if len(W["W_K"][0]) != len(W["W_Q"][0]):
        raise _mismatch(
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


def _mask(reader: Reader, data: Mapping[str, Any], tokens: tuple[str, ...], keys: tuple[str, ...]):
    n, m = len(tokens), len(keys)
    raw = data.get("mask", "none")
    if isinstance(raw, str):
        kind = reader.choice(raw, "mask", MASKS)
        allowed = [[kind == "none" or j <= i for j in range(m)] for i in range(n)]  # causal: top-left aligned
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
                    raise reader.error("mask", f"expected 0 or 1, got {x!r}", (i, j))
            allowed.append(out)
    padding = None
    if "key_padding" in data:
        pad = data["key_padding"]
        if not isinstance(pad, (list, tuple)):
            raise reader.error("key_padding", f"expected a list of true/false over the keys, got {kind_of(pad)}")
        if len(pad) != m:
            raise ShapeError(reader.source, "key_padding", f"{len(pad)} entries for {m} keys")
        for j, x in enumerate(pad, 1):
            if not isinstance(x, bool):
                raise reader.error("key_padding", f"expected true or false, got {x!r}", (j,))
        padding = tuple(pad)
        allowed = [[a and not padding[j] for j, a in enumerate(row)] for row in allowed]
    for i, row in enumerate(allowed):
        if not any(row):
            raise reader.error("mask", f"row {i + 1} ({tokens[i]}) may attend to no key; softmax is undefined there")
    full = all(all(row) for row in allowed)
    return kind, (None if full else tuple(tuple(row) for row in allowed)), padding


def spec_from_mapping(data: Mapping[str, Any], source: str = "<dict>") -> Spec:
    """Validate a mapping of spec keys (as read from TOML/JSON, or written in Python)."""
    reader = Reader(source)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table of spec keys, got {kind_of(data)}")
    check_keys(reader, data, SPEC_KEYS)
    projection = None
    if "X" in data:
        given = [k for k in ("Q", "K", "V") if k in data]
        if given:
            raise reader.error(given[0], "give Q, K, V or X with W_Q, W_K, W_V, not both")
        projection = _projection(reader, data)
        _check_symbolic(
            reader,
            [("X", projection.X), ("X_kv", projection.X_kv)]
            + [(k, getattr(projection, k)) for k in ("W_Q", "W_K", "W_V")],
        )
        for name in ("Q", "K", "V"):
            X, W, _ = projection.weights(name)
            _check_products(reader, f"X W_{name}", X, tuple(zip(*W)))
        Q, K, V = (project(projection, name) for name in ("Q", "K", "V"))
        rows_of = "X"
    else:
        for key in ("Q", "K", "V"):
            if key not in data:
                raise reader.error(key, "missing")
        for key in ("X_kv", "W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"):
            if key in data:
                raise reader.error(key, "needs X (the inputs that W projects)")
        Q = reader.matrix(data["Q"], "Q", symbolic=True)
        K = reader.matrix(data["K"], "K", symbolic=True)
        V = reader.matrix(data["V"], "V", symbolic=True)
        if len(Q[0]) != len(K[0]):
            raise _mismatch(source, "K", "Q", Q, "K", K, "Q and K need the same number of columns (d_k)")
        if len(V) != len(K):
            raise _mismatch(source, "V", "K", K, "V", V, "V needs one row per row of K")
        rows_of = "Q"
        _check_symbolic(reader, [("Q", Q), ("K", K), ("V", V)])
    _check_products(reader, "Q Kᵀ", Q, K)
    cross = len(Q) != len(K) or (projection is not None and projection.X_kv is not None)
    tokens = reader.labels(data.get("tokens"), "tokens", len(Q), rows_of)
    if cross:
        key_tokens = reader.labels(
            data.get("key_tokens"), "key_tokens", len(K), "X_kv" if projection is not None else "K", default="k"
        )
    elif "key_tokens" in data:
        raise reader.error(
            "key_tokens", "only for cross-attention (X_kv, or Q with a different number of rows from K and V)"
        )
    else:
        key_tokens = ()
    heads, W_O, b_O = _heads(reader, data, projection, len(V[0]), len(Q[0]))
    if heads > 1 and any(isinstance(x, Formula) for m in (Q, K, V) for row in m for x in row):
        raise reader.error("heads", "symbols are supported with one head only")
    mask, allowed, padding = _mask(reader, data, tokens, key_tokens or tokens)
    focus = reader.focus(data["focus"], tokens, "focus") if "focus" in data else len(tokens) - 1
    title = reader.title(data["title"], "title") if "title" in data else None
    spec = Spec(
        Q=Q,
        K=K,
        V=V,
        tokens=tokens,
        focus=focus,
        title=title,
        lang=reader.lang(data["lang"], "lang") if "lang" in data else "en",
        scale=reader.scale(data["scale"], "scale") if "scale" in data else "sqrt",
        rounding=reader.choice(data.get("rounding", "exact"), "rounding", ROUNDINGS),
        expand=reader.choice(data.get("expand", "focus"), "expand", EXPANDS),
        decimals=_decimals(reader, data["decimals"], "decimals") if "decimals" in data else Decimals(),
        source=source,
        key_tokens=key_tokens,
        mask=mask,
        allowed=allowed,
        key_padding=padding,
        softmax=reader.choice(data.get("softmax", "plain"), "softmax", SOFTMAXES),
        notation=reader.choice(data.get("notation", "auto"), "notation", NOTATIONS),
        paper=reader.choice(data["paper"], "paper", PAPERS) if "paper" in data else None,
        engine=reader.choice(data["engine"], "engine", ENGINES) if "engine" in data else None,
        cjk_font=reader.choice(data["cjk_font"], "cjk_font", CJK_FONTS) if "cjk_font" in data else None,
        projection=projection,
        heads=heads,
        W_O=W_O,
        b_O=b_O,
    )
    if "subs" in data:
        spec = replace(spec, subs=reader.subs(data["subs"], "subs", spec.symbols))
    if "backward" in data:
        spec = replace(
            spec,
            backward=_backward(reader, data["backward"], len(tokens), len(W_O[0]) if W_O is not None else len(V[0])),
        )
    return spec


def _backward(reader: Reader, raw: object, rows: int, cols: int) -> Backward:
    """``[backward]``: loss = "sum" | "mse" (with target), or grad_output; dL/dO has the shape of O."""
    if not isinstance(raw, Mapping):
        raise reader.error("backward", f"expected a table, got {kind_of(raw)}")
    names = ("loss", "grad_output", "target")
    check_keys(reader, {f"backward.{k}": v for k, v in raw.items()}, tuple(f"backward.{n}" for n in names))
    given = "grad_output" in raw
    loss = reader.choice(raw.get("loss", "given" if given else "sum"), "backward.loss", LOSSES)

    def matrix(name: str) -> Matrix:
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


def _heads(reader: Reader, data: Mapping[str, Any], projection: Projection | None, d_v: int, d_q: int):
    heads = parse_index(data.get("heads", 1))
    if heads is None or not 1 <= heads <= limits.HEADS:
        raise reader.error("heads", f"expected an integer from 1 to {limits.HEADS}, got {brief(data.get('heads'))}")
    if heads > 1 and projection is None:
        raise reader.error("heads", "several heads need X with W_Q, W_K, W_V (d_model × d_model)")
    if heads > 1:
        d_model = len(projection.X[0])
        for key in ("W_Q", "W_K", "W_V"):
            W = getattr(projection, key)
            if len(W[0]) != d_model:
                raise ShapeError(
                    reader.source,
                    key,
                    f"shape mismatch: {key} is {_shape(W)}; with heads "
                    f"it must be d_model × d_model = {d_model}×{d_model}",
                )
        if d_model % heads:
            raise reader.error("heads", f"d_model = {d_model} is not divisible by heads = {heads}")
    W_O = b_O = None
    if "W_O" in data and projection is None:
        raise reader.error("W_O", "needs X with W_Q, W_K, W_V (the output projection follows the input projections)")
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


def _decimals(reader: Reader, raw: object, key: str) -> Decimals:
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


def load_spec(spec: str | Path | Mapping[str, Any] | Spec) -> Spec:
    """Load a spec from a TOML/JSON path, a mapping, or pass a Spec through."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return spec_from_mapping(spec)
    return spec_from_mapping(read_table(spec), str(spec))
