"""Read and validate a spec: the inputs of one attention derivation.

A spec comes from a TOML file, a JSON file or a Python mapping. Numbers are
read from their text (see :mod:`symattn.input.numeral`); every problem raises a
:class:`~symattn.input.errors.SpecError` naming the source, the key and the position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from typing import Any, cast

from symattn import variants
from symattn.input import limits
from symattn.input.batched import read_batched
from symattn.input.choices import CJK_FONTS, ENGINES, EXPANDS, FIGURES, NOTATIONS, PAPERS, ROUNDINGS, SOFTMAXES
from symattn.input.choices import INPUTS as INPUT_MODES
from symattn.input.document import DOCUMENT_KEYS, DocumentOptions, read_document
from symattn.input.filematrix import FileMatrix, has_formulas
from symattn.input.files import read_table
from symattn.input.groups import group_of, read_kv_heads
from symattn.input.kernel_inputs import NO_FILES, KernelInputs
from symattn.input.kernel_spec import LAYOUT_KEYS
from symattn.input.numeral import Numeral
from symattn.input.parts import (
    Backward,
    Decimals,
    check_products,
    check_symbolic,
    mismatch,
    read_backward,
    read_decimals,
    read_heads,
    read_mask,
    read_projection,
)
from symattn.input.projection import Projection, project
from symattn.input.reader import Matrix, Reader, Scale, check_keys, kind_of
from symattn.input.records import record
from symattn.variants import ADD, DENOMINATOR, MAP, PLACE, QK, ROUTE, Where


@record
class Spec:
    """Validated inputs and settings: the attention math, and beside it how its document reads
    (:attr:`document`) and what its input files brought (:attr:`kernel`). Build it with :func:`load_spec`."""

    Q: Matrix
    K: Matrix
    V: Matrix
    tokens: tuple[str, ...]
    focus: int  # 0-based row of Q
    scale: Scale = "sqrt"
    rounding: str = "exact"
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
    backward: Backward | None = None  # the backward pass, when asked for
    inputs: str = "exact"  # "rounded": each typed input is any value that rounds to it (check: input-rounding)
    kv_heads: int | None = None  # key/value heads shared by the query heads (grouped-query); None: one per query head
    # the settings of its variants, (name, setting) in the registry's order (symattn.variants): spec.<key> reads one
    parts: tuple[tuple[str, Any], ...] = ()
    document: DocumentOptions = field(default_factory=DocumentOptions)  # how the document reads: no number
    # issue 22: the files' layout, every batch's (Q, K, V) (Q, K, V are the first's) and their paths
    kernel: KernelInputs = NO_FILES

    def __getattr__(self, name: str) -> Any:
        # spec.<name> of a variant's (spec.window): its setting, or its value without it
        if name.startswith("__") or name == "parts":
            raise AttributeError(name)
        return variants.attribute(self, name)

    def setting(self, name: str) -> Any:
        """The setting of the variant ``name`` (None where the spec does not have it)."""
        return next((setting for key, setting in self.parts if key == name), None)

    def of_batch(self, b: int) -> Spec:
        """The spec of batch b (0-based): its Q, K and V, the rest the same."""
        if not self.kernel.batches:
            return self
        Q, K, V = self.kernel.batches[b]
        return replace(self, Q=Q, K=K, V=V, kernel=replace(self.kernel, batches=()))

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbol used in the entries (Q, K, V, or X, W and b), sorted."""
        from symattn.input.formula import Formula  # SymPy: only where a matrix holds a formula

        matrices = [self.Q, self.K, self.V]
        if self.projection is not None:
            matrices += self.projection.inputs()
        formulas = [x for m in matrices if has_formulas(m) for row in m for x in row if isinstance(x, Formula)]
        names = {name for x in formulas for name in x.symbols}
        return tuple(sorted(names))

    @property
    def is_symbolic(self) -> bool:
        return any(has_formulas(m) for m in (self.Q, self.K, self.V))

    @property
    def d_k(self) -> int:
        """Width of one head's queries and keys."""
        return len(self.Q[0]) // self.heads

    @property
    def kv_groups(self) -> int:
        """The key/value heads: kv_heads, or one per query head."""
        return self.kv_heads or self.heads

    @property
    def is_grouped(self) -> bool:
        """Grouped-query (or multi-query) heads: fewer key/value heads than query heads."""
        return self.kv_groups < self.heads

    @property
    def concat_width(self) -> int:
        """Columns of the heads' outputs side by side (V's columns without grouping)."""
        return len(self.V[0]) // self.kv_groups * self.heads

    @property
    def keys(self) -> tuple[str, ...]:
        return self.key_tokens or self.tokens

    @property
    def is_cross(self) -> bool:
        return bool(self.key_tokens)

    def head(self, index: int) -> Spec:
        """The single-head spec of one head (0-based): its slice of Q, K and V columns."""

        def columns(m: Matrix, blocks: int, block: int) -> Matrix:
            width = len(m[0]) // blocks  # V may be wider or narrower than Q and K
            if isinstance(m, FileMatrix):  # a file's array stays an array (compare's float64 path takes it)
                return cast(Matrix, m.columns(block * width, (block + 1) * width))
            return tuple(row[block * width : (block + 1) * width] for row in m)

        group = group_of(index, self.heads, self.kv_groups)  # grouped-query: the shared K and V
        return replace(
            self,
            Q=columns(self.Q, self.heads, index),
            K=columns(self.K, self.kv_groups, group),
            V=columns(self.V, self.kv_groups, group),
            heads=1,
            kv_heads=None,
            projection=None,
            W_O=None,
            b_O=None,
            document=replace(self.document, title=None),
            backward=None,
            parts=variants.heads_of(self.parts, index),
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
        if "figures" in raw:
            changes["figures"] = reader.choice(raw["figures"], "--figures", FIGURES)
        for key, names in (("paper", PAPERS), ("engine", ENGINES), ("cjk_font", CJK_FONTS)):
            if key in raw:
                changes[key] = reader.choice(raw[key], "--" + key.replace("_", "-"), names)
        if "subs" in raw:
            given = dict(self.subs)
            given.update(dict(reader.subs(raw["subs"], "--subs", self.symbols)))
            changes["subs"] = tuple(sorted(given.items()))
        if "heading_level" in raw:
            changes["heading_level"] = reader.heading_level(raw["heading_level"], "--heading-level")
        if "numbered" in raw:
            changes["numbered"] = reader.flag(raw["numbered"], "--numbered")
        if raw.get("backward") and self.backward is None:  # --backward: L = Σ O unless the spec says otherwise
            changes["backward"] = Backward("sum")
        document = {key: changes.pop(key) for key in DOCUMENT_KEYS if key in changes}
        new = replace(self, document=replace(self.document, **document), **changes)
        variants.check(reader, new)
        return new


_OVERRIDABLE = {
    "lang",
    "rounding",
    "expand",
    "focus",
    "subs",
    "notation",
    "paper",
    "engine",
    "cjk_font",
    "backward",
    "heading_level",
    "numbered",
    "figures",
}
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
    "heading_level",
    "numbered",
    "figures",
    "inputs",
    "kv_heads",
    *variants.KEYS,
    "layout",
)


def _file_sources(data: Mapping[str, Any], folder: Path | None) -> tuple[tuple[str, str], ...]:
    """(key, path) of each input a spec file names as a file (``Q = "q.npy"``, ``[backward]``'s too)."""
    from symattn.input.filematrix import file_part, names_file

    if folder is None:
        return ()
    backward = data.get("backward")
    named = list(data.items()) + [
        (f"backward.{k}", v) for k, v in (backward.items() if isinstance(backward, Mapping) else ())
    ]
    return tuple((key, str(folder / file_part(raw))) for key, raw in named if names_file(raw))


def spec_from_mapping(data: Mapping[str, Any], source: str = "<dict>", folder: Path | None = None) -> Spec:
    """Validate a mapping of spec keys (as read from TOML/JSON, or written in Python).

    ``folder`` is the spec file's: a matrix given as a file name is read from there (and only there);
    without it, file names are refused.
    """
    reader = Reader(source, folder)
    if not isinstance(data, Mapping):
        raise reader.error(None, f"expected a table of spec keys, got {kind_of(data)}")
    packed = next((key for key in LAYOUT_KEYS if key in data), None)
    if packed is not None:  # symattn compare reads such a spec as its arguments (input/kernel_spec.py)
        raise reader.error(
            packed,
            "varlen, paged caches and FP8 descales are for symattn compare; a derivation takes Q, K and V as matrices",
        )
    check_keys(reader, data, SPEC_KEYS)
    sources = _file_sources(data, folder)
    batches: tuple = ()
    grads: tuple = ()
    layout = "bhnd"
    filed = False  # heads from files' head axes
    made = variants.inputs(reader, data)  # Q, K, V that a part makes from its own keys (MLA's [mla] table)
    if "X" not in data and made is None:  # Q, K, V files with batch and head axes: batch 0 as matrices, heads set
        data, batches, layout, grads, filed = read_batched(reader, data)
    most = limits.BATCH_HEADS if filed else None
    kv_heads = read_kv_heads(reader, data, most)  # issue 20: grouped-query heads (K and V checked in read_heads)
    projection = None
    if made is not None:
        Q, K, V, rows_of = made
    elif "X" in data:
        given = [k for k in ("Q", "K", "V") if k in data]
        if given:
            raise reader.error(given[0], "give Q, K, V or X with W_Q, W_K, W_V, not both")
        projection = read_projection(reader, data)
        check_symbolic(
            reader,
            [("X", projection.X), ("X_kv", projection.X_kv)]
            + [(k, getattr(projection, k)) for k in ("W_Q", "W_K", "W_V")],
        )
        for name in ("Q", "K", "V"):
            X, W, _ = projection.weights(name)
            check_products(reader, f"X W_{name}", X, tuple(zip(*W)))
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
        if len(Q[0]) != len(K[0]) and kv_heads is None:
            raise mismatch(source, "K", "Q", Q, "K", K, "Q and K need the same number of columns (d_k)")
        if len(V) != len(K):
            raise mismatch(source, "V", "K", K, "V", V, "V needs one row per row of K")
        rows_of = "Q"
        check_symbolic(reader, [("Q", Q), ("K", K), ("V", V)])
    check_products(reader, "Q Kᵀ", Q, K)
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
    heads, W_O, b_O = read_heads(reader, data, projection, len(V[0]), len(Q[0]), kv_heads, len(K[0]), most)
    if heads > 1 and any(has_formulas(m) for m in (Q, K, V)):
        raise reader.error("heads", "symbols are supported with one head only")
    turned = variants.turned(reader, data) if made is not None else None  # MLA's decoupled dims
    where = Where(heads, len(Q[0]) // heads, len(Q), len(K), _has_formula(Q, K, V), _has_formula(Q, K), turned=turned)
    early = variants.read(reader, data, where, (QK,))  # a Q/K part's keys come before the mask's
    mask, allowed, padding, masked = read_mask(reader, data, tokens, key_tokens or tokens, where)
    focus = reader.focus(data["focus"], tokens, "focus") if "focus" in data else len(tokens) - 1
    # each key checked in the order it always was: the document's keys stand among the math's
    title = reader.title(data["title"], "title") if "title" in data else None
    lang = reader.lang(data["lang"], "lang") if "lang" in data else "en"
    scale = reader.scale(data["scale"], "scale") if "scale" in data else "sqrt"
    rounding = reader.choice(data.get("rounding", "exact"), "rounding", ROUNDINGS)
    expand = reader.choice(data.get("expand", "focus"), "expand", EXPANDS)
    decimals = read_decimals(reader, data["decimals"], "decimals") if "decimals" in data else Decimals()
    softmax = reader.choice(data.get("softmax", "plain"), "softmax", SOFTMAXES)
    notation = reader.choice(data.get("notation", "auto"), "notation", NOTATIONS)
    document = read_document(reader, data, title, lang, expand)
    spec = Spec(
        Q=Q,
        K=K,
        V=V,
        tokens=tokens,
        focus=focus,
        scale=scale,
        rounding=rounding,
        decimals=decimals,
        source=source,
        key_tokens=key_tokens,
        mask=mask,
        allowed=allowed,
        key_padding=padding,
        softmax=softmax,
        notation=notation,
        document=document,
        inputs=reader.choice(data.get("inputs", "exact"), "inputs", INPUT_MODES),
        projection=projection,
        heads=heads,
        W_O=W_O,
        b_O=b_O,
        kv_heads=kv_heads,
        parts=early + masked,
        kernel=KernelInputs(layout, batches, sources, grads),
    )
    late = variants.read(reader, data, where, (ADD, MAP, DENOMINATOR, ROUTE, PLACE))  # after the settings above
    spec = replace(spec, parts=variants.ordered(spec.parts + late))
    if "subs" in data:
        spec = replace(spec, subs=reader.subs(data["subs"], "subs", spec.symbols))
    if "backward" in data:
        spec = replace(
            spec,
            backward=read_backward(
                reader, data["backward"], len(tokens), len(W_O[0]) if W_O is not None else spec.concat_width
            ),
        )
    return spec


def _has_formula(*matrices: Matrix) -> bool:
    return any(has_formulas(m) for m in matrices)


def load_spec(spec: str | Path | Mapping[str, Any] | Spec) -> Spec:
    """Load a spec from a TOML/JSON path, a mapping, or pass a Spec through."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, Mapping):
        return spec_from_mapping(spec)
    return spec_from_mapping(read_table(spec), str(spec), Path(spec).parent)
