"""Multi-head latent attention (MLA, DeepSeek-V2 and V3), one part: an ``[mla]`` table gives the hidden rows X
and the projections, and Q, K, V are made from them exactly:

    c_KV = X W_DKV                  the latent, d_c columns: all a KV cache holds
    K = c_KV W_UK,  V = c_KV W_UV    up-projected (the naive route)
    Q = X W_Q  (or X W_DQ W_UQ)      the query path

With the decoupled position dims (W_QR, W_KR), as DeepSeek-V2 and V3 have them, each head's query is
[q_nope ; q_R] with q_R = X W_QR (c_Q W_QR), and its key [k_nope ; k_R] with one k_R = X W_KR that every head
shares; the spec's turning part (``Where.turned``) turns only those d_r columns of each head. With ``heads =
h``, W_UK, W_UV, the query path's last matrix and W_QR hold the heads' column blocks side by side, as Q, K, V
given directly do; c_KV (and k_R) is one for all heads.

``mla_route = "absorbed"`` folds W_UK into the query, q̃ = q W_UKᵀ with scores q̃ c_KVᵀ, and W_UV after the
softmax, o = (P c_KV) W_UV, as FlashMLA decodes. It changes no value: the scores are equal rational matrices
(q W_UKᵀ c_KVᵀ = q (c_KV W_UK)ᵀ), so P is the same closed form, and c_KV W_UV = V as rationals, so
(P c_KV) W_UV = P V: :mod:`symattn.variants.mla_head` checks both on the exact matrices. Every made matrix
is rational, so the model's rules (Lindemann–Weierstrass on the scores' exps) are the plain ones. The
scale is 1/√(d_nope + d_r) of the full query-key width, as DeepSeek's. With decoupled dims the absorbed
route folds W_UK into the q_nope part only: a score is q̃ c_jᵀ + q′_R k′_Rᵀ, whose second term is the same
product of the same turned columns in both routes, so the routes agree when the latent parts are equal
rationals and the head's Q and K are exactly [Q_nope ; Q_R] and [K_nope ; K_R] (the turn's exactness is its
part's).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import NumRow, NumRows
from symattn.input.errors import ShapeError
from symattn.input.reader import Numerals, brief
from symattn.input.records import record
from symattn.variants.base import QK, ROUTE, Part, Quantity, Where

if TYPE_CHECKING:  # the view is SymPy's: the spec reads the part without it
    from symattn.variants.mla_head import Latent

# --- limits of MLA ----------------------------------------------------------------------------------
MLA_DIMS = 64  # tokens, and columns of X, of the latent c_KV (d_c) and of each projection: a hand example's sizes

# --- the setting ------------------------------------------------------------------------------------

ROUTES = ("naive", "absorbed")
TABLE = ("X", "W_DKV", "W_UK", "W_UV", "W_Q", "W_DQ", "W_UQ", "W_QR", "W_KR")
MADE = ("Q", "K", "V")  # what the table makes; given beside it, they are refused
NEEDS = "an [mla] table"
Fractions = tuple[tuple[Fraction, ...], ...]


@record
class Mla:
    """The [mla] table as read, the route, and the exact matrices made from it."""

    X: Numerals
    W_DKV: Numerals
    W_UK: Numerals
    W_UV: Numerals
    query: tuple[tuple[str, Numerals], ...]  # ("W_Q", W) or ("W_DQ", W), ("W_UQ", W)
    route: str = "naive"
    W_QR: Numerals | None = None  # the decoupled query dims: heads · d_r columns
    W_KR: Numerals | None = None  # the decoupled key dims: d_r columns, one key for every head
    heads: int = 1
    head: int | None = None  # which head (0-based) of ``of_heads`` this setting is; None: the spec's own
    of_heads: int = 1

    @property
    def d_r(self) -> int:
        return 0 if self.W_KR is None else len(self.W_KR[0])

    @property
    def d_nope(self) -> int:
        """One head's columns of Q and K that come from the latent."""
        return len(self.W_UK[0]) // self.heads

    @property
    def d_v(self) -> int:
        return len(self.W_UV[0]) // self.heads

    @property
    def turned(self) -> tuple[int, int] | None:
        """(first, width) of each head's columns that position turns: the decoupled dims (None: none)."""
        return (self.d_nope, self.d_r) if self.d_r else None

    @cached_property
    def latent(self) -> Fractions:
        return product(_values(self.X), _values(self.W_DKV))

    @property
    def query_latent(self) -> Fractions | None:
        """c_Q = X W_DQ (None: one W_Q)."""
        return product(_values(self.X), _values(self.query[0][1])) if len(self.query) == 2 else None

    @cached_property
    def parts(self) -> tuple[Fractions, Fractions, Fractions, Fractions]:
        """Q_nope, K_nope (every head's blocks side by side), Q_R (the same) and K_R (one block), exactly."""
        X, c_q = _values(self.X), self.query_latent
        source = X if c_q is None else c_q  # what W_UQ and W_QR take
        Q = product(source, _values(self.query[-1][1]))
        K = product(self.latent, _values(self.W_UK))
        if self.W_QR is None or self.W_KR is None:
            return Q, K, (), ()
        return Q, K, product(source, _values(self.W_QR)), product(X, _values(self.W_KR))

    @cached_property
    def made(self) -> tuple[Fractions, Fractions, Fractions]:
        """Q, K, V, exactly: head by head, [Q_nope ; Q_R] and [K_nope ; K_R]."""
        Qn, Kn, QR, KR = self.parts
        n, r = self.d_nope, self.d_r
        Q = tuple(
            sum((q[h * n : (h + 1) * n] + (qr[h * r : (h + 1) * r] if r else ()) for h in range(self.heads)), ())
            for q, qr in zip(Qn, QR or ((),) * len(Qn))
        )
        K = tuple(
            sum((k[h * n : (h + 1) * n] + (kr if r else ()) for h in range(self.heads)), ())
            for k, kr in zip(Kn, KR or ((),) * len(Kn))
        )
        return Q, K, product(self.latent, _values(self.W_UV))

    @cached_property
    def absorbed(self) -> Fractions:
        """q̃ = Q_nope W_UKᵀ (one head's): each query folded into the latent's d_c columns."""
        return product(self.parts[0], tuple(zip(*_values(self.W_UK))))

    def of_head(self, index: int | None) -> Mla:
        """One head's setting (0-based): its blocks of W_UK, W_UV, the query path's last matrix and W_QR."""
        if self.heads == 1 or index is None:
            return self

        def block(m: Numerals, width: int) -> Numerals:
            return tuple(row[index * width : (index + 1) * width] for row in m)

        n, r = self.d_nope, self.d_r
        query = (*self.query[:-1], (self.query[-1][0], block(self.query[-1][1], n)))
        W_QR = None if self.W_QR is None else block(self.W_QR, r)
        W_UK, W_UV = block(self.W_UK, n), block(self.W_UV, self.d_v)
        return replace(self, W_UK=W_UK, W_UV=W_UV, query=query, W_QR=W_QR, heads=1, head=index, of_heads=self.heads)


def _values(m: Numerals) -> Fractions:
    return tuple(tuple(x.value for x in row) for row in m)


def product(A: Fractions, B: Fractions) -> Fractions:
    """A B, exactly: integer dot products over the two common denominators (Fraction sums are 50× slower)."""
    da, db = (math.lcm(*(x.denominator for row in m for x in row)) for m in (A, B))
    ints = [[x.numerator * (da // x.denominator) for x in row] for row in A]
    cols = [[x.numerator * (db // x.denominator) for x in col] for col in zip(*B)]
    den = da * db
    return tuple(tuple(Fraction(sum(map(operator.mul, row, col)), den) for col in cols) for row in ints)


def numerals(values: Fractions) -> Numerals:
    """Made values as numerals, as the projections write them: exact decimals, one width across the matrix."""
    from symattn.input.decimals import terminating_decimals
    from symattn.input.projection import numeral_of

    places = [p for row in values for p in (terminating_decimals(v) for v in row) if p is not None]
    width = max(places, default=0)
    return tuple(tuple(numeral_of(v, width) for v in row) for row in values)


def read_table(reader: Any, data: Mapping[str, Any]) -> Mla:
    """The [mla] table: every key known, every matrix numbers, every shape matching (one line each)."""
    from symattn.input.messages import said
    from symattn.input.parts import heads_count

    raw = data["mla"]
    if not isinstance(raw, Mapping):
        raise reader.error("mla", f"expected a table of X, W_DKV, W_UK, W_UV and W_Q, got {brief(raw)}")
    for key in raw:
        if key not in TABLE:
            raise reader.error(f"mla.{key}", "unknown key; expected one of " + ", ".join(TABLE))
    for key in ("X", "W_DKV", "W_UK", "W_UV"):
        if key not in raw:
            raise reader.error(f"mla.{key}", "missing ([mla] needs X, W_DKV, W_UK, W_UV and W_Q)")
    if "W_Q" in raw and ("W_DQ" in raw or "W_UQ" in raw):
        raise reader.error("mla.W_Q", "give W_Q or W_DQ with W_UQ, not both")
    path = ("W_Q",) if "W_Q" in raw or not ("W_DQ" in raw or "W_UQ" in raw) else ("W_DQ", "W_UQ")
    for key in path:
        if key not in raw:
            raise reader.error(f"mla.{key}", "missing (the query path: W_Q, or W_DQ with W_UQ)")
    for key, other in (("W_QR", "W_KR"), ("W_KR", "W_QR")):
        if key in raw and other not in raw:
            raise reader.error(f"mla.{other}", "missing (the decoupled dims need W_QR and W_KR together)")
    heads = heads_count(reader, data)
    m = {key: reader.matrix(raw[key], f"mla.{key}", max_rows=MLA_DIMS) for key in ("X", "W_DKV", "W_UK", "W_UV")}
    q = {key: reader.matrix(raw[key], f"mla.{key}", max_rows=MLA_DIMS) for key in path}
    r = {key: reader.matrix(raw[key], f"mla.{key}", max_rows=MLA_DIMS) for key in ("W_QR", "W_KR") if key in raw}
    for key, matrix in {**m, **q, **r}.items():
        if key != "X" and len(matrix[0]) > MLA_DIMS:
            raise reader.limit(f"mla.{key}", f"more than {MLA_DIMS} columns (the limit)")
    if len(m["X"][0]) > MLA_DIMS:
        raise reader.limit("mla.X", f"more than {MLA_DIMS} columns (the limit)")
    source = ("X", m["X"], "one row per column of X (d_model)")
    if len(path) == 2:
        source = ("W_DQ", q["W_DQ"], "one row per column of W_DQ (d_c')")
    inner = (
        ("W_DKV", "X", m["X"], "one row per column of X (d_model)"),
        ("W_UK", "W_DKV", m["W_DKV"], "one row per column of W_DKV (d_c)"),
        ("W_UV", "W_DKV", m["W_DKV"], "one row per column of W_DKV (d_c)"),
        (path[0], "X", m["X"], "one row per column of X (d_model)"),
        *((("W_UQ", *source),) if len(path) == 2 else ()),
        *((("W_KR", "X", m["X"], "one row per column of X (d_model)"), ("W_QR", *source)) if r else ()),
    )
    for key, name, A, need in inner:
        B = {**m, **q, **r}[key]
        if len(B) != len(A[0]):
            raise _mismatch(reader, key, name, A, B, need)
    last = q[path[-1]]
    if len(last[0]) != len(m["W_UK"][0]):
        raise _mismatch(reader, path[-1], "W_UK", m["W_UK"], last, "the same columns as W_UK (d_k)")
    for key in ("W_UK", "W_UV"):
        if len(m[key][0]) % heads:
            n = len(m[key][0])
            raise reader.error(f"mla.{key}", f"{n} columns do not split into heads = {heads} blocks of one width")
    if r:
        d_r = len(r["W_KR"][0])
        if d_r % 2:
            raise reader.error("mla.W_KR", said("mla_odd", d_r=d_r))
        if len(r["W_QR"][0]) != heads * d_r:
            need = "the same columns as W_KR (d_r)" if heads == 1 else f"heads × d_r = {heads * d_r} columns"
            raise _mismatch(reader, "W_QR", "W_KR", r["W_KR"], r["W_QR"], need)
    route = reader.choice(data.get("mla_route", "naive"), "mla_route", ROUTES)
    query = tuple((k, q[k]) for k in path)
    return Mla(m["X"], m["W_DKV"], m["W_UK"], m["W_UV"], query, route, r.get("W_QR"), r.get("W_KR"), heads)


def _mismatch(reader: Any, key: str, name: str, A: Numerals, B: Numerals, need: str) -> ShapeError:
    a, b = f"{len(A)}×{len(A[0])}", f"{len(B)}×{len(B[0])}"
    problem = f"shape mismatch: {name} is {a} and {key} is {b}; {key} needs {need}"
    return ShapeError(reader.source, f"mla.{key}", problem)


# --- the steps of a derivation ----------------------------------------------------------------------


@record
class Latents:
    """The latent c_KV, the query path, then K and V (naive) or the absorbed query and its scores."""

    kind: ClassVar[str] = "mla"
    route: str
    d_model: int
    d_c: int
    d_k: int
    d_v: int
    X: Numerals
    W_DKV: Numerals
    latent: NumRows
    query: tuple[tuple[str, Numerals], ...]  # the query path's weights
    query_latent: NumRows | None  # c_Q = X W_DQ
    Q: Any  # the spec's Q (made)
    W_UK: Numerals
    W_UV: Numerals
    K: Any
    V: Any
    q: tuple[Any, ...]  # the focus row of Q
    absorbed: NumRow  # q̃ of the focus row
    scores: NumRow  # q̃ · c_j, the focus row's scores by the absorbed route (their latent part with d_r > 0)
    routes_agree: bool
    # the decoupled dims (d_r > 0): Q_R = X W_QR (c_Q W_QR) and one K_R = X W_KR, beside Q_nope and K_nope
    d_r: int = 0
    W_QR: Numerals | None = None
    W_KR: Numerals | None = None
    Q_nope: NumRows = ()
    K_nope: NumRows = ()
    Q_R: NumRows = ()
    K_R: NumRows = ()
    head: int | None = None  # this head (0-based) of ``heads``; None: one head
    heads: int = 1
    zero: tuple[int, int] = (1, 1)  # its place among the steps before step 1, and how many (see forward.py)


@record
class LatentOutput:
    """The absorbed route's end: u = P c_KV of the focus row, then o = u W_UV."""

    kind: ClassVar[str] = "mla_output"
    u: NumRow
    W_UV: Numerals
    output: NumRow
    routes_agree: bool
    head: int | None = None  # 0-based, where the heads are several: its W_UV is its own block (W_UV^(h))


# --- the part ---------------------------------------------------------------------------------------


class MlaPart(Part):
    name = "mla"
    exact_products = ("latent", "absorbed_query")  # X·W_DKV and q·W_UKᵀ: products of the given decimals
    keys = ("mla", "mla_route")
    stage = ROUTE
    title = "MLA"
    unstated = ()  # a sheet states the [mla] table and the route (classroom.mla_sheet)
    web_fields = ({"key": "mla_route", "kind": "select", "choices": list(ROUTES), "default": "naive"},)
    quantities = (
        Quantity("latent", "scores", cols="dim", width="d_c", asked_by="scores", needs=NEEDS, shared=True),
        Quantity("absorbed_query", "scores", cols="dim", width="d_c", asked_by="scores", needs=NEEDS),
        Quantity("latent_output", "output", cols="dim", width="d_c", asked_by="output", needs=NEEDS),
    )
    step_kinds = ("mla", "mla_output", "mla_shared")
    facts = (("toy_vs_real", "mla", None), ("toy_vs_real", "mla_weights", ()))
    rounded_read = True
    float64_in_mask = True  # all it does is in the spec's Q, K, V, made when it is read: compare's path takes them
    certify = "--certify does not cover MLA yet"

    def inputs(self, reader: Any, data: Mapping[str, Any]) -> tuple[Any, Any, Any, str] | None:
        """Q, K, V made from the [mla] table (numerals), and what their rows are; None without the table."""
        if "mla" not in data:
            return None
        given = [key for key in (*MADE, "X", "X_kv", "W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V") if key in data]
        if given:
            raise reader.error(given[0], "give Q, K, V, or X with W_Q, W_K, W_V, or an [mla] table, not both")
        Q, K, V = (numerals(m) for m in read_table(reader, data).made)
        return Q, K, V, "mla.X"

    def turned(self, reader: Any, data: Mapping[str, Any]) -> tuple[int, int] | None:
        return read_table(reader, data).turned if "mla" in data else None

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Mla | None:
        if "mla" not in data:
            if "mla_route" in data:
                raise reader.error("mla_route", "needs an [mla] table")
            return None
        setting = read_table(reader, data)
        if data.get("inputs") == "rounded":
            raise reader.error("inputs", 'inputs = "rounded" is not supported with MLA yet')
        from symattn import variants  # here: the registry imports this module
        from symattn.input.messages import said

        turner = None
        for other in variants.PARTS:  # a Q/K part may turn the decoupled dims; none may turn or norm Q, K whole
            if other.stage == QK and other.read(reader, data, where) is not None:
                if not other.turns_slice:
                    raise reader.error(other.name, f"MLA does not combine with {other.title} yet")
                if not setting.d_r:
                    raise reader.error(other.name, said("mla_turns_whole", part=other.title))
                turner = other
        if setting.d_r and turner is None:
            raise reader.error("mla.W_QR", said("mla_unturned"))
        return setting

    def head(self, setting: Mla, index: int) -> Mla:
        return setting.of_head(index)

    def shape(self, spec: Any, setting: Mla | None, quantity: str) -> tuple[int, ...] | None:
        if setting is None:
            return None
        return (len(spec.Q), len(setting.W_DKV[0]))

    def view(self, setting: Mla, model: Any) -> Latent:
        from symattn.variants.mla_head import Latent

        return Latent(model, setting)

    def carried(self, chain: Any, model: Any, setting: Any, quantity: str, row: int, col: int | None, head: Any):
        from symattn.variants.mla_head import carried

        return carried(chain, setting, quantity, row, col, head)

    def carried_core(self, chain: Any, setting: Mla, quantity: str, row: int, col: int | None, head: Any) -> Any:
        from symattn.variants.mla_head import carried_core

        return carried_core(chain, setting, quantity, row, col, head)

    def carried_input(self, chain: Any, setting: Mla, quantity: str, row: int, col: int) -> Any:
        from symattn.variants.mla_head import carried_input

        return carried_input(chain, setting, quantity, row, col)

    def input_operands(self, explainer: Any, setting: Mla, quantity: str, row: int, col: int) -> Any:
        """A wrong Q, K or V claim's operands: the row's numbers (X, c_Q or the latent) and the weight's column."""
        width = setting.d_nope + setting.d_r if quantity in ("Q", "K") else setting.d_v
        h, local = divmod(col, width)
        head = setting.of_head(h)
        if quantity == "V":
            W = head.W_UV
            return tuple((explainer.sig("latent", row, c), W[c][local]) for c in range(len(W)))
        c_q = setting.query_latent
        source = setting.X if quantity == "K" or c_q is None else numerals(c_q)
        if local >= setting.d_nope:  # a decoupled dim: X W_KR, or X W_QR (c_Q W_QR)
            R = setting.W_KR if quantity == "K" else head.W_QR
            assert R is not None  # d_r > 0
            return tuple(zip(source[row], [w[local - setting.d_nope] for w in R]))
        if quantity == "Q":
            return tuple(zip(source[row], [w[local] for w in head.query[-1][1]]))
        W = head.W_UK
        return tuple((explainer.sig("latent", row, c), W[c][local]) for c in range(len(W)))

    explains = True

    def route_operands(self, explainer: Any, setting: Mla, quantity: str, row: int, col: int, head: Any) -> Any:
        """latent: X's row by W_DKV's column; q̃: Q's row by W_UK's row; u: the weights by the latent's column."""
        if quantity == "latent":
            return tuple(zip(setting.X[row], [w[col] for w in setting.W_DKV]))
        if quantity == "absorbed_query":
            q0 = (head or 0) * (setting.d_nope + setting.d_r)  # the head's columns of Q
            W = setting.of_head(head).W_UK[col]
            return tuple((explainer.sig("Q", row, q0 + k), W[k]) for k in range(len(W)))
        keys = range(len(setting.X))
        return tuple((explainer.sig("weights", row, j, head), explainer.sig("latent", j, col)) for j in keys)

    def computed(self, spec: Any, setting: Mla, model: Any) -> dict[str, Any]:
        """Whether the routes agree (a head's: ``setting`` is the head's with several)."""
        from symattn.variants.mla_head import Latent

        return {"routes_agree": Latent(model, setting).routes_agree}

    def toy(self, spec: Any, setting: Mla) -> tuple[tuple[str, Any], ...]:
        # the matrices it learns, the decoupled W_QR and W_KR included where given
        turned = tuple(name for name in ("W_QR", "W_KR") if getattr(setting, name) is not None)
        weights = ("W_DKV", "W_UK", "W_UV", *(name for name, _ in setting.query), *turned)
        return (("mla", len(setting.W_DKV[0])), ("mla_weights", weights))

    def hidden_width(self, setting: Mla) -> int:
        return len(setting.X[0])

    def report(self, spec: Any, setting: Mla | None) -> dict[str, Any]:
        return {} if setting is None else {"mla_route": setting.route}

    def before_scores(self, spec: Any, model: Any) -> tuple[Latents, ...]:
        from symattn.variants.mla_head import latents_step

        setting = spec.setting(self.name)
        return () if setting is None else (latents_step(spec, model, setting),)

    def before_heads(self, spec: Any, models: tuple[Any, ...]) -> tuple[Any, ...]:
        from symattn.variants.mla_head import shared_step

        setting = spec.setting(self.name)
        return () if setting is None or setting.heads == 1 else (shared_step(spec, models, setting),)

    def after_weighted(self, spec: Any, model: Any, fig: Any) -> tuple[LatentOutput, ...]:
        from symattn.variants.mla_head import output_step

        setting = spec.setting(self.name)
        if setting is None or setting.route != "absorbed":
            return ()
        return (output_step(spec, model, fig, setting),)


PART = MlaPart()


__all__ = [
    "MLA_DIMS",
    "PART",
    "ROUTES",
    "LatentOutput",
    "Latents",
    "Mla",
    "MlaPart",
    "product",
    "read_table",
]
