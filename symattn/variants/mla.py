"""Multi-head latent attention (MLA, DeepSeek-V2 and V3), one part: an ``[mla]`` table gives the hidden rows X
and the projections, and Q, K, V are made from them exactly:

    c_KV = X W_DKV                  the latent, d_c columns: all a KV cache holds
    K = c_KV W_UK,  V = c_KV W_UV    up-projected (the naive route)
    Q = X W_Q  (or X W_DQ W_UQ)      the query path

``mla_route = "absorbed"`` folds W_UK into the query, q̃ = q W_UKᵀ with scores q̃ c_KVᵀ, and W_UV after the
softmax, o = (P c_KV) W_UV, as FlashMLA decodes. It changes no value: the scores are equal rational matrices
(q W_UKᵀ c_KVᵀ = q (c_KV W_UK)ᵀ), so P is the same closed form, and c_KV W_UV = V as rationals, so
(P c_KV) W_UV = P V: :mod:`symattn.variants.mla_head` checks both on the exact matrices. Every made matrix
is rational, so the model's rules (Lindemann–Weierstrass on the scores' exps) are the plain ones. The
scale is 1/√(d_k + d_r) of the full query-key width, as DeepSeek's; its decoupled position dims (W_QR,
W_KR: d_r > 0) are refused for now, so d_r = 0.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping
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

    @cached_property
    def latent(self) -> Fractions:
        return product(_values(self.X), _values(self.W_DKV))

    @property
    def query_latent(self) -> Fractions | None:
        """c_Q = X W_DQ (None: one W_Q)."""
        return product(_values(self.X), _values(self.query[0][1])) if len(self.query) == 2 else None

    @cached_property
    def made(self) -> tuple[Fractions, Fractions, Fractions]:
        """Q, K, V, exactly."""
        X, c = _values(self.X), self.latent
        Q = product(X, _values(self.query[0][1]))
        if len(self.query) == 2:
            Q = product(Q, _values(self.query[1][1]))
        return Q, product(c, _values(self.W_UK)), product(c, _values(self.W_UV))

    @cached_property
    def absorbed(self) -> Fractions:
        """q̃ = Q W_UKᵀ: each query folded into the latent's d_c columns."""
        Q = self.made[0]
        return product(Q, tuple(zip(*_values(self.W_UK))))


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
    raw = data["mla"]
    if not isinstance(raw, Mapping):
        raise reader.error("mla", f"expected a table of X, W_DKV, W_UK, W_UV and W_Q, got {brief(raw)}")
    for key in raw:
        if key not in TABLE:
            raise reader.error(f"mla.{key}", "unknown key; expected one of " + ", ".join(TABLE))
    for key in ("W_QR", "W_KR"):
        if key in raw:
            raise reader.error(
                f"mla.{key}", "the decoupled position dims (W_QR, W_KR) are not supported yet; leave them out"
            )
    for key in ("X", "W_DKV", "W_UK", "W_UV"):
        if key not in raw:
            raise reader.error(f"mla.{key}", "missing ([mla] needs X, W_DKV, W_UK, W_UV and W_Q)")
    if "W_Q" in raw and ("W_DQ" in raw or "W_UQ" in raw):
        raise reader.error("mla.W_Q", "give W_Q or W_DQ with W_UQ, not both")
    path = ("W_Q",) if "W_Q" in raw or not ("W_DQ" in raw or "W_UQ" in raw) else ("W_DQ", "W_UQ")
    for key in path:
        if key not in raw:
            raise reader.error(f"mla.{key}", "missing (the query path: W_Q, or W_DQ with W_UQ)")
    m = {key: reader.matrix(raw[key], f"mla.{key}", max_rows=MLA_DIMS) for key in ("X", "W_DKV", "W_UK", "W_UV")}
    q = {key: reader.matrix(raw[key], f"mla.{key}", max_rows=MLA_DIMS) for key in path}
    for key, matrix in {**m, **q}.items():
        if key != "X" and len(matrix[0]) > MLA_DIMS:
            raise reader.limit(f"mla.{key}", f"more than {MLA_DIMS} columns (the limit)")
    if len(m["X"][0]) > MLA_DIMS:
        raise reader.limit("mla.X", f"more than {MLA_DIMS} columns (the limit)")
    inner = (
        ("W_DKV", "X", m["X"], "one row per column of X (d_model)"),
        ("W_UK", "W_DKV", m["W_DKV"], "one row per column of W_DKV (d_c)"),
        ("W_UV", "W_DKV", m["W_DKV"], "one row per column of W_DKV (d_c)"),
        (path[0], "X", m["X"], "one row per column of X (d_model)"),
    )
    for key, name, A, need in inner:
        B = q.get(key, m.get(key))
        assert B is not None  # every key above was read
        if len(B) != len(A[0]):
            raise _mismatch(reader, key, name, A, B, need)
    if len(path) == 2 and len(q["W_UQ"]) != len(q["W_DQ"][0]):
        raise _mismatch(reader, "W_UQ", "W_DQ", q["W_DQ"], q["W_UQ"], "one row per column of W_DQ (d_c')")
    last = q[path[-1]]
    if len(last[0]) != len(m["W_UK"][0]):
        raise _mismatch(reader, path[-1], "W_UK", m["W_UK"], last, "the same columns as W_UK (d_k)")
    route = reader.choice(data.get("mla_route", "naive"), "mla_route", ROUTES)
    return Mla(m["X"], m["W_DKV"], m["W_UK"], m["W_UV"], tuple((k, q[k]) for k in path), route)


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
    scores: NumRow  # q̃ · c_j, the focus row's scores by the absorbed route
    routes_agree: bool


@record
class LatentOutput:
    """The absorbed route's end: u = P c_KV of the focus row, then o = u W_UV."""

    kind: ClassVar[str] = "mla_output"
    u: NumRow
    W_UV: Numerals
    output: NumRow
    routes_agree: bool


# --- the part ---------------------------------------------------------------------------------------


class MlaPart(Part):
    name = "mla"
    keys = ("mla", "mla_route")
    stage = ROUTE
    title = "MLA"
    unstated = keys
    web_fields = ({"key": "mla_route", "kind": "select", "choices": list(ROUTES), "default": "naive"},)
    quantities = (
        Quantity("latent", "scores", cols="dim", width="d_c", asked_by="scores", needs=NEEDS),
        Quantity("absorbed_query", "scores", cols="dim", width="d_c", asked_by="scores", needs=NEEDS),
        Quantity("latent_output", "output", cols="dim", width="d_c", asked_by="output", needs=NEEDS),
    )
    step_kinds = ("mla", "mla_output")
    facts = (("toy_vs_real", "mla", None),)
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

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Mla | None:
        if "mla" not in data:
            if "mla_route" in data:
                raise reader.error("mla_route", "needs an [mla] table")
            return None
        setting = read_table(reader, data)
        if where.heads > 1:
            raise reader.error("heads", f"MLA is shown for one head; this spec has {where.heads}")
        if data.get("inputs") == "rounded":
            raise reader.error("inputs", 'inputs = "rounded" is not supported with MLA yet')
        from symattn import variants  # here: the registry imports this module

        for other in variants.PARTS:  # a Q/K part would turn or norm the made Q and K whole (d_r = 0 here)
            if other.stage == QK and other.read(reader, data, where) is not None:
                raise reader.error(other.name, f"MLA does not combine with {other.title} yet")
        return setting

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

    def carried_input(self, chain: Any, setting: Mla, quantity: str, row: int, col: int) -> Any:
        from symattn.variants.mla_head import carried_input

        return carried_input(chain, setting, quantity, row, col)

    def input_operands(self, explainer: Any, setting: Mla, quantity: str, row: int, col: int) -> Any:
        """A wrong K or V claim's operands: the latent row's numbers and W_UK's (W_UV's) column."""
        if quantity == "Q":
            c_q = setting.query_latent
            X = setting.X if c_q is None else numerals(c_q)
            return tuple(zip(X[row], [w[col] for w in setting.query[-1][1]]))
        W = setting.W_UK if quantity == "K" else setting.W_UV
        return tuple((explainer.sig("latent", row, c), W[c][col]) for c in range(len(W)))

    explains = True

    def route_operands(self, explainer: Any, setting: Mla, quantity: str, row: int, col: int, head: Any) -> Any:
        """latent: X's row by W_DKV's column; q̃: Q's row by W_UK's row; u: the weights by the latent's column."""
        if quantity == "latent":
            return tuple(zip(setting.X[row], [w[col] for w in setting.W_DKV]))
        if quantity == "absorbed_query":
            W = setting.W_UK[col]
            return tuple((explainer.sig("Q", row, k), W[k]) for k in range(len(W)))
        keys = range(len(setting.X))
        return tuple((explainer.sig("weights", row, j, head), explainer.sig("latent", j, col, head)) for j in keys)

    def computed(self, spec: Any, setting: Mla, model: Any) -> dict[str, Any]:
        from symattn.variants.mla_head import Latent

        return {"routes_agree": Latent(model, setting).routes_agree}

    def toy(self, spec: Any, setting: Mla) -> tuple[tuple[str, Any], ...]:
        return (("mla", len(setting.W_DKV[0])),)

    def report(self, spec: Any, setting: Mla | None) -> dict[str, Any]:
        return {} if setting is None else {"mla_route": setting.route}

    def before_scores(self, spec: Any, model: Any) -> tuple[Latents, ...]:
        from symattn.variants.mla_head import latents_step

        setting = spec.setting(self.name)
        return () if setting is None else (latents_step(spec, model, setting),)

    def after_weighted(self, spec: Any, model: Any, fig: Any) -> tuple[LatentOutput, ...]:
        from symattn.variants.mla_head import output_step

        setting = spec.setting(self.name)
        if setting is None or setting.route != "absorbed":
            return ()
        return (output_step(spec, model, fig, setting),)


PART = MlaPart()


__all__ = ["MLA_DIMS", "PART", "ROUTES", "LatentOutput", "Latents", "Mla", "MlaPart", "product", "read_table"]
