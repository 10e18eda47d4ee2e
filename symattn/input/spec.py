"""Read and validate a spec: the inputs of one attention derivation.

A spec comes from a TOML file, a JSON file or a Python mapping. Numbers are
read from their text (see :mod:`symattn.input.numeral`); every problem raises a
:class:`~symattn.input.errors.SpecError` naming the source, the key and the position.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

from symattn.input import limits
from symattn.input.choices import CJK_FONTS, ENGINES, EXPANDS, MASKS, NOTATIONS, PAPERS, ROUNDINGS, SCALES, SOFTMAXES
from symattn.input.errors import LimitError, ShapeError, SpecError, shown
from symattn.input.text import math_problem, unsupported_character
from symattn.input.numeral import NotFiniteError, Numeral, NumeralError, parse_numeral
from symattn.input.formula import Formula, FormulaError, is_symbol_name, parse_formula, terms
from symattn.input.projection import Projection, project

_INDEX = re.compile(r"[0-9]{1,9}")  # a 1-based index as text: ASCII digits, never '²'


def parse_index(raw: object) -> int | None:
    """A whole number given as an int or as ASCII digits; None for anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and _INDEX.fullmatch(raw.strip()):
        return int(raw.strip())
    return None

Matrix = tuple[tuple[Numeral, ...], ...]


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
    grad_output: "Matrix | None" = None
    target: "Matrix | None" = None


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
    scale: str | Numeral = "sqrt"
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

    def head(self, index: int) -> "Spec":
        """The single-head spec of one head (0-based): its slice of Q, K and V columns."""
        width = len(self.Q[0]) // self.heads

        def columns(m: Matrix) -> Matrix:
            return tuple(row[index * width:(index + 1) * width] for row in m)

        return replace(self, Q=columns(self.Q), K=columns(self.K), V=columns(self.V), heads=1, projection=None,
                       W_O=None, b_O=None, title=None, backward=None)

    def with_options(self, **options: Any) -> "Spec":
        """Override settings (as the CLI flags do), validated like the spec keys."""
        raw = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(raw) - _OVERRIDABLE)
        if unknown:
            raise TypeError(f"Unknown setting {unknown[0]!r}.")
        reader = _Reader(self.source)
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
SPEC_KEYS = ("title", "lang", "tokens", "focus", "Q", "K", "V", "scale", "rounding", "expand", "decimals",
         "key_tokens", "mask", "key_padding", "softmax", "X", "X_kv", "W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V",
         "heads", "W_O", "b_O", "subs", "notation", "paper", "engine", "cjk_font", "backward")


def _kind(value: object) -> str:
    # in the words of TOML and JSON (a JSON number arrives as FloatText); a Python name only for Python input
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number", FloatText: "a number",
             dict: "a table", list: "a list", tuple: "a list", type(None): "null"}
    return names.get(type(value), type(value).__name__)


class _Reader:
    """Validation helpers that know the source name for error messages."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str | None, problem: str, position: tuple[int, ...] = ()) -> SpecError:
        return SpecError(self.source, key, problem, position)

    def limit(self, key: str | None, problem: str, position: tuple[int, ...] = ()) -> LimitError:
        return LimitError(self.source, key, problem, position)

    def matrix(self, raw: object, key: str, *, max_rows: int = limits.TOKENS, symbolic: bool = False) -> Matrix:
        if not isinstance(raw, (list, tuple)):
            raise self.error(key, f"expected a matrix (a list of rows), got {_kind(raw)}")
        if not raw:
            raise self.error(key, "empty matrix")
        if len(raw) > max_rows:
            raise self.limit(key, f"{len(raw)} rows; at most {max_rows} are supported")
        rows = []
        for i, row in enumerate(raw, 1):
            if not isinstance(row, (list, tuple)):
                raise self.error(key, f"expected a row (a list of numbers), got {_kind(row)}", (i,))
            if not row:
                raise self.error(key, "empty row", (i,))
            if len(row) > limits.DIMS:
                raise self.limit(key, f"{len(row)} columns; at most {limits.DIMS} are supported", (i,))
            if rows and len(row) != len(rows[0]):
                raise self.error(key, f"row has {len(row)} entries but row 1 has {len(rows[0])}", (i,))
            rows.append(tuple(self.entry(x, key, (i, j)) if symbolic else self.number(x, key, (i, j))
                              for j, x in enumerate(row, 1)))
        return tuple(rows)

    def entry(self, raw: object, key: str, position: tuple[int, ...]) -> Numeral | Formula:
        """A number, or (for text that is not one) a formula with symbols."""
        try:
            return parse_numeral(raw)
        except NumeralError as exc:
            if isinstance(exc, NotFiniteError) or not isinstance(raw, str) or isinstance(raw, FloatText) or \
                    not any(ch.isalpha() or ch in "()^*" for ch in raw):
                raise self.error(key, str(exc), position) from None
        try:
            return parse_formula(raw)
        except FormulaError as exc:
            raise self.error(key, str(exc), position) from None

    def number(self, raw: object, key: str, position: tuple[int, ...] = (), **kw: Any) -> Numeral:
        try:
            return parse_numeral(raw, **kw)
        except NumeralError as exc:
            raise self.error(key, str(exc), position) from None

    def text(self, raw: object, key: str, limit: int, position: tuple[int, ...] = ()) -> str:
        if not isinstance(raw, str):
            raise self.error(key, f"expected a string, got {_kind(raw)}", position)
        if not raw.strip():
            raise self.error(key, "empty text", position)
        if len(raw) > limit:
            raise self.limit(key, f"longer than {limit} characters", position)
        bad = unsupported_character(raw)
        if bad is not None:
            raise self.error(key, bad, position)
        return raw

    def title(self, raw: object, key: str) -> str:
        """Text with optional inline math ``$...$``, checked before any client sees it."""
        text = self.text(raw, key, limits.TITLE)
        problem = math_problem(text)
        if problem:
            raise self.error(key, problem)
        return text

    def vector(self, raw: object, key: str, symbolic: bool = False) -> tuple[Numeral, ...]:
        if not isinstance(raw, (list, tuple)) or not raw:
            raise self.error(key, f"expected a non-empty list of numbers, got {_kind(raw)}")
        if len(raw) > limits.DIMS:
            raise self.limit(key, f"{len(raw)} entries; at most {limits.DIMS} are supported")
        read = self.entry if symbolic else self.number
        return tuple(read(x, key, (j,)) for j, x in enumerate(raw, 1))

    def labels(self, raw: object, key: str, count: int, rows_of: str, default: str = "t") -> tuple[str, ...]:
        if raw is None:
            return tuple(f"{default}{i}" for i in range(1, count + 1))
        if not isinstance(raw, (list, tuple)):
            raise self.error(key, f"expected a list of labels, got {_kind(raw)}")
        if len(raw) != count:
            raise self.error(key, f"{len(raw)} labels for {count} rows of {rows_of}")
        seen: dict[str, int] = {}
        for i, label in enumerate(raw, 1):
            self.text(label, key, limits.LABEL, (i,))
            if label in seen:
                raise self.error(key, f"duplicate label {label!r} (also {key}[{seen[label]}])", (i,))
            seen[label] = i
        return tuple(raw)

    def choice(self, raw: object, key: str, options: tuple[str, ...]) -> str:
        if not isinstance(raw, str) or raw not in options:
            listed = ", ".join(repr(o) for o in options)
            raise self.error(key, f"expected one of {listed}, got {_brief(raw)}{_did_you_mean(raw, options)}")
        return raw

    def lang(self, raw: object, key: str) -> str:
        from symattn.input.languages import languages
        known = languages()
        if not (isinstance(raw, str) and raw in known):
            raise self.error(key, f"expected {' or '.join(known)}, got {_brief(raw)}{_did_you_mean(raw, known)}")
        return raw

    def focus(self, raw: object, tokens: tuple[str, ...], key: str) -> int:
        if isinstance(raw, str) and raw in tokens:
            return tokens.index(raw)
        index = parse_index(raw)
        if index is not None:
            if 1 <= index <= len(tokens):
                return index - 1
            raise self.error(key, f"{_brief(index)} is out of range 1..{len(tokens)}")
        known = ", ".join(tokens)
        raise self.error(key, f"no token labelled {_brief(raw)}; tokens are {known}")

    def scale(self, raw: object, key: str) -> str | Numeral:
        if raw in SCALES:
            return raw  # type: ignore[return-value]
        if isinstance(raw, str) and raw.strip() in SCALES:
            return raw.strip()
        try:
            number = parse_numeral(raw)
        except NumeralError:
            raise self.error(key, f"expected 'sqrt', 'none' or an exact number such as '1/2', "
                                  f"got {_brief(raw)}") from None
        if number.value <= 0:
            raise self.error(key, f"must be positive, got {number.text!r}")
        return number

    def subs(self, raw: object, key: str, symbols: tuple[str, ...]) -> tuple[tuple[str, Numeral], ...]:
        if not isinstance(raw, Mapping):
            raise self.error(key, f"expected a table of symbol = value, got {_kind(raw)}")
        out = []
        for name, value in raw.items():
            if not is_symbol_name(name):
                raise self.error(f"{key}.{name}", "not a symbol name (a letter, then letters, digits or _)")
            if name not in symbols:
                used = ", ".join(symbols) or "none"
                raise self.error(f"{key}.{name}", f"no entry uses this symbol; symbols: {used}")
            out.append((name, self.number(value, f"{key}.{name}")))
        return tuple(sorted(out))

    def decimals(self, raw: object, key: str) -> Decimals:
        if not isinstance(raw, Mapping):
            raise self.error(key, f"expected a table of integers, got {_kind(raw)}")
        names = [f.name for f in fields(Decimals)]
        values = {}
        for name, value in raw.items():
            if name not in names:
                raise self.error(f"{key}.{name}", "unknown key; expected one of " + ", ".join(names)
                                 + _did_you_mean(name, names))
            number = parse_index(value)
            if number is None or not 0 <= number <= limits.DECIMALS:
                raise self.error(f"{key}.{name}", f"expected an integer from 0 to {limits.DECIMALS}, "
                                                  f"got {_brief(value)}")
            values[name] = number
        return Decimals(**values)


def _brief(raw: object) -> str:
    """A value the user gave, for a message: repr-escaped and cut short."""
    text = repr(raw) if isinstance(raw, str) else (str(raw) if isinstance(raw, (int, float)) else _kind(raw))
    if isinstance(raw, int) and raw.bit_length() > 64:
        return "a number too large"
    return text if len(text) <= 60 else text[:57] + "…"


def _did_you_mean(raw: object, options: tuple[str, ...] | list[str]) -> str:
    if not isinstance(raw, str) or len(raw) > 40:
        return ""
    close = difflib.get_close_matches(raw, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _terms(x: object) -> int:
    return terms(x.expr) if isinstance(x, Formula) else 1


def _has_symbols(m: Matrix | None) -> bool:
    return m is not None and any(isinstance(x, Formula) for row in m for x in row)


def _check_symbolic(reader: _Reader, matrices: list[tuple[str, Matrix | None]]) -> None:
    """Formulas are for small teaching examples; their products grow fast."""
    for key, m in matrices:
        if _has_symbols(m) and max(len(m), len(m[0])) > limits.SYMBOLIC_SIZE:
            raise reader.limit(key, f"{len(m)}×{len(m[0])} with symbols; at most {limits.SYMBOLIC_SIZE} rows and "
                                    f"columns may hold formulas")


def _check_products(reader: _Reader, name: str, A: Matrix, B: Matrix) -> None:
    """Refuse rows·rows products of formulas that would multiply out past the limit (before SymPy does)."""
    if not (_has_symbols(A) or _has_symbols(B)) or len(A[0]) != len(B[0]):
        return
    a_terms = [[_terms(x) for x in row] for row in A]
    b_terms = [[_terms(x) for x in row] for row in B]
    for i, a in enumerate(a_terms, 1):
        for j, b in enumerate(b_terms, 1):
            if sum(x * y for x, y in zip(a, b)) > limits.FORMULA_TERMS:
                raise reader.limit(name, f"more than {limits.FORMULA_TERMS} terms once multiplied out (the limit)",
                                   (i, j))


def check_keys(reader: _Reader, data: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for key in data:
        if key not in allowed:
            raise reader.error(str(key), "unknown key; expected one of " + ", ".join(sorted(allowed))
                               + _did_you_mean(key, allowed))


def _shape(m: Matrix) -> str:
    return f"{len(m)}×{len(m[0])}"


def _mismatch(source: str, key: str, a: str, A: Matrix, b: str, B: Matrix, need: str) -> ShapeError:
    return ShapeError(source, key, f"shape mismatch: {a} is {_shape(A)} and {b} is {_shape(B)}; {need}")


def _projection(reader: _Reader, data: Mapping[str, Any]) -> Projection:
    source = reader.source
    for key in ("W_Q", "W_K", "W_V"):
        if key not in data:
            raise reader.error(key, "missing (X needs W_Q, W_K and W_V)")
    X = reader.matrix(data["X"], "X", symbolic=True)
    X_kv = reader.matrix(data["X_kv"], "X_kv", symbolic=True) if "X_kv" in data else None
    W = {k: reader.matrix(data[k], k, max_rows=limits.DIMS, symbolic=True) for k in ("W_Q", "W_K", "W_V")}
    for key, inputs, name in (("W_Q", X, "X"), ("W_K", X_kv or X, "X_kv" if X_kv else "X"),
                              ("W_V", X_kv or X, "X_kv" if X_kv else "X")):
        if len(W[key]) != len(inputs[0]):
            raise _mismatch(source, key, name, inputs, key, W[key], f"{key} needs one row per column of {name}")
    if len(W["W_K"][0]) != len(W["W_Q"][0]):
        raise _mismatch(source, "W_K", "W_Q", W["W_Q"], "W_K", W["W_K"],
                        "W_Q and W_K need the same number of columns (d_k)")
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


def _mask(reader: _Reader, data: Mapping[str, Any], tokens: tuple[str, ...], keys: tuple[str, ...]):
    n, m = len(tokens), len(keys)
    raw = data.get("mask", "none")
    if isinstance(raw, str):
        kind = reader.choice(raw, "mask", MASKS)
        allowed = [[kind == "none" or j <= i for j in range(m)] for i in range(n)]  # causal: top-left aligned
    else:
        kind = "matrix"
        if not isinstance(raw, (list, tuple)) or not raw or not all(isinstance(r, (list, tuple)) for r in raw):
            raise reader.error("mask", f"expected 'none', 'causal' or a matrix of 0 and 1, got {_kind(raw)}")
        if len(raw) != n or any(len(r) != m for r in raw):
            cols = len(raw[0]) if all(len(r) == len(raw[0]) for r in raw) else "?"
            raise ShapeError(reader.source, "mask", f"shape mismatch: expected {n}×{m} (queries × keys), "
                             f"got {len(raw)}×{cols}")
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
            raise reader.error("key_padding", f"expected a list of true/false over the keys, got {_kind(pad)}")
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
    reader = _Reader(source)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table of spec keys, got {_kind(data)}")
    check_keys(reader, data, SPEC_KEYS)
    projection = None
    if "X" in data:
        given = [k for k in ("Q", "K", "V") if k in data]
        if given:
            raise reader.error(given[0], "give Q, K, V or X with W_Q, W_K, W_V, not both")
        projection = _projection(reader, data)
        _check_symbolic(reader, [("X", projection.X), ("X_kv", projection.X_kv)] +
                        [(k, getattr(projection, k)) for k in ("W_Q", "W_K", "W_V")])
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
        key_tokens = reader.labels(data.get("key_tokens"), "key_tokens", len(K),
                                   "X_kv" if projection is not None else "K", default="k")
    elif "key_tokens" in data:
        raise reader.error("key_tokens", "only for cross-attention (X_kv, or Q with a different number of rows "
                                         "from K and V)")
    else:
        key_tokens = ()
    heads, W_O, b_O = _heads(reader, data, projection, len(V[0]), len(Q[0]))
    if heads > 1 and any(isinstance(x, Formula) for m in (Q, K, V) for row in m for x in row):
        raise reader.error("heads", "symbols are supported with one head only")
    mask, allowed, padding = _mask(reader, data, tokens, key_tokens or tokens)
    focus = reader.focus(data["focus"], tokens, "focus") if "focus" in data else len(tokens) - 1
    title = reader.title(data["title"], "title") if "title" in data else None
    spec = Spec(
        Q=Q, K=K, V=V, tokens=tokens, focus=focus, title=title,
        lang=reader.lang(data["lang"], "lang") if "lang" in data else "en",
        scale=reader.scale(data["scale"], "scale") if "scale" in data else "sqrt",
        rounding=reader.choice(data.get("rounding", "exact"), "rounding", ROUNDINGS),
        expand=reader.choice(data.get("expand", "focus"), "expand", EXPANDS),
        decimals=reader.decimals(data["decimals"], "decimals") if "decimals" in data else Decimals(),
        source=source, key_tokens=key_tokens, mask=mask, allowed=allowed, key_padding=padding,
        softmax=reader.choice(data.get("softmax", "plain"), "softmax", SOFTMAXES),
        notation=reader.choice(data.get("notation", "auto"), "notation", NOTATIONS),
        paper=reader.choice(data["paper"], "paper", PAPERS) if "paper" in data else None,
        engine=reader.choice(data["engine"], "engine", ENGINES) if "engine" in data else None,
        cjk_font=reader.choice(data["cjk_font"], "cjk_font", CJK_FONTS) if "cjk_font" in data else None,
        projection=projection, heads=heads, W_O=W_O, b_O=b_O,
    )
    if "subs" in data:
        spec = replace(spec, subs=reader.subs(data["subs"], "subs", spec.symbols))
    if "backward" in data:
        spec = replace(spec, backward=_backward(reader, data["backward"], len(tokens),
                                                len(W_O[0]) if W_O is not None else len(V[0])))
    return spec


def _backward(reader: _Reader, raw: object, rows: int, cols: int) -> Backward:
    """``[backward]``: loss = "sum" | "mse" (with target), or grad_output; dL/dO has the shape of O."""
    if not isinstance(raw, Mapping):
        raise reader.error("backward", f"expected a table, got {_kind(raw)}")
    names = ("loss", "grad_output", "target")
    check_keys(reader, {f"backward.{k}": v for k, v in raw.items()}, tuple(f"backward.{n}" for n in names))
    given = "grad_output" in raw
    loss = reader.choice(raw.get("loss", "given" if given else "sum"), "backward.loss", LOSSES)

    def matrix(name: str) -> Matrix:
        key = f"backward.{name}"
        m = reader.matrix(raw[name], key)
        if len(m) != rows or len(m[0]) != cols:
            raise ShapeError(reader.source, key, f"shape mismatch: the output O is {rows}×{cols} and {name} is "
                                                 f"{_shape(m)}; {name} needs the shape of O")
        return m

    if loss == "given":
        if not given:
            raise reader.error("backward.grad_output", "missing (loss = \"given\" takes dL/dO as grad_output)")
        if "target" in raw:
            raise reader.error("backward.target", "only with loss = \"mse\"")
        return Backward("given", grad_output=matrix("grad_output"))
    if given:
        raise reader.error("backward.grad_output", f"give loss = \"{loss}\" or grad_output, not both")
    if loss == "mse":
        if "target" not in raw:
            raise reader.error("backward.target", "missing (loss = \"mse\" needs the target T)")
        return Backward("mse", target=matrix("target"))
    if "target" in raw:
        raise reader.error("backward.target", "only with loss = \"mse\"")
    return Backward("sum")


def _heads(reader: _Reader, data: Mapping[str, Any], projection: Projection | None, d_v: int, d_q: int):
    heads = parse_index(data.get("heads", 1))
    if heads is None or not 1 <= heads <= limits.HEADS:
        raise reader.error("heads", f"expected an integer from 1 to {limits.HEADS}, got {_brief(data.get('heads'))}")
    if heads > 1 and projection is None:
        raise reader.error("heads", "several heads need X with W_Q, W_K, W_V (d_model × d_model)")
    if heads > 1:
        d_model = len(projection.X[0])
        for key in ("W_Q", "W_K", "W_V"):
            W = getattr(projection, key)
            if len(W[0]) != d_model:
                raise ShapeError(reader.source, key, f"shape mismatch: {key} is {_shape(W)}; with heads "
                                 f"it must be d_model × d_model = {d_model}×{d_model}")
        if d_model % heads:
            raise reader.error("heads", f"d_model = {d_model} is not divisible by heads = {heads}")
    W_O = b_O = None
    if "W_O" in data and projection is None:
        raise reader.error("W_O", "needs X with W_Q, W_K, W_V (the output projection follows the input projections)")
    if "W_O" in data:
        W_O = reader.matrix(data["W_O"], "W_O", max_rows=limits.DIMS)
        if len(W_O) != d_v:
            raise ShapeError(reader.source, "W_O", f"shape mismatch: the heads give {d_v} columns and W_O is "
                             f"{_shape(W_O)}; W_O needs one row per column")
    if "b_O" in data:
        if W_O is None:
            raise reader.error("b_O", "needs W_O")
        b_O = reader.vector(data["b_O"], "b_O")
        if len(b_O) != len(W_O[0]):
            raise ShapeError(reader.source, "b_O", f"{len(b_O)} entries for the {len(W_O[0])} columns of W_O")
    return heads, W_O, b_O


class FloatText(str):
    """The text of a TOML or JSON float: a number, never a formula."""


def _toml_float(text: str) -> str:
    return FloatText(text.replace("_", ""))


def read_table(path: str | Path) -> dict[str, Any]:
    """Read a TOML or JSON file with every float kept as its text.

    The size is checked (see :func:`read_text`), and so is the nesting of lists and tables.
    """
    path = Path(path)
    return parse_text(read_text(path), str(path), json_=path.suffix.lower() == ".json")


def read_text(path: str | Path, what: str = "a spec or claims file") -> str:
    """A file's UTF-8 text (a BOM allowed), at most ``limits.FILE_BYTES``; ``what`` names the file in the error.

    The size is checked before reading, and the read is bounded, for devices and pipes that have no size.
    """
    source = str(path)
    try:
        with open(path, "rb") as fh:
            info = os.fstat(fh.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > limits.FILE_BYTES:
                raise _too_large(source, what)
            raw = fh.read(limits.FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(source, None, f"cannot read file: {exc.strerror or exc}") from None
    if len(raw) > limits.FILE_BYTES:
        raise _too_large(source, what)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(source, None, f"not UTF-8 text (byte {exc.start + 1})") from None


def parse_text(text: str, source: str, json_: bool = False) -> dict[str, Any]:
    """TOML (or JSON) text as a table, every float kept as its text, nesting bounded; nothing in it is run."""
    try:
        data = _parse(text, source, json_)
    except RecursionError:
        raise _too_deep(source, None) from None
    _check_nesting(data, source)
    return data


def _parse(text: str, source: str, json_: bool) -> dict[str, Any]:
    if json_:
        try:
            data = json.loads(text, parse_float=FloatText, parse_int=FloatText, parse_constant=_reject_constant)
        except json.JSONDecodeError as exc:
            raise SpecError(source, None, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
        except NumeralError as exc:
            raise SpecError(source, None, str(exc)) from None
        if not isinstance(data, dict):
            raise SpecError(source, None, f"expected a JSON object, got {_kind(data)}")
        return data
    try:
        return tomllib.loads(text, parse_float=_toml_float)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(source, None, f"invalid TOML: {shown(exc)}") from None
    except ValueError:  # tomllib turns integers into int(), which stops at 4300 digits
        raise LimitError(source, None, f"an integer with thousands of digits; numbers may have at most "
                                       f"{limits.NUMBER_LENGTH} characters") from None


def _too_large(source: str, what: str) -> LimitError:
    return LimitError(source, None, f"larger than {limits.FILE_BYTES // 2**20} MiB (the limit for {what})")


def _too_deep(source: str, key: str | None) -> LimitError:
    return LimitError(source, key, f"lists and tables nested more than {limits.NESTING} deep (the limit)")


def _check_nesting(data: object, source: str) -> None:
    # level by level, so that no depth of input can exhaust the stack; scalars are not carried
    level: list[tuple[tuple, object]] = [((), data)]
    for _ in range(limits.NESTING):
        following = []
        for path, value in level:
            items = value.items() if isinstance(value, dict) else enumerate(value, 1)
            following += [(path + (k,), v) for k, v in items if isinstance(v, (dict, list))]
        if not following:
            return
        level = following
    path = level[0][0]
    key = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    raise _too_deep(source, key)


def _reject_constant(name: str) -> None:
    raise NumeralError(f"not a finite number: {name}")


def load_spec(spec: str | Path | Mapping[str, Any] | Spec) -> Spec:
    """Load a spec from a TOML/JSON path, a mapping, or pass a Spec through."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return spec_from_mapping(spec)
    return spec_from_mapping(read_table(spec), str(spec))
