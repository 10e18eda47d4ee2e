"""One head's multi-head latent attention, exactly (the part is :mod:`symattn.variants.mla`): the latent c_KV,
the absorbed query q̃ = q W_UKᵀ, the latent output u = P c_KV, and the proof that both routes give one output.

The latent and the absorbed query are rational. u is the softmax's weights times c_KV, so it is the output of
the same head with c_KV in V's place: its closed forms, its rational entries (the model's rule on the groups
of equal z) and its enclosures are that model's. The routes agree when the absorbed scores q̃ c_KVᵀ are the
naive QKᵀ entry by entry (equal rationals: then P is one closed form) and c_KV W_UV is the head's V entry by
entry, so that (P c_KV) W_UV = P (c_KV W_UV) = P V exactly (:attr:`Latent.routes_agree`).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import cached_property
from typing import Any, ClassVar

import sympy
from sympy import ImmutableMatrix

from symattn.exact.base import Rounding, integer_matrix
from symattn.exact.num import NumRows
from symattn.exact.numeric import Fixed
from symattn.exact.rounding import exact_or_rounded, from_model
from symattn.input.reader import Numerals
from symattn.input.records import record
from symattn.variants.mla import Fractions, LatentOutput, Latents, Mla, MlaPart, numerals, product

RATIONAL = MlaPart.exact_products


def _matrix(values: Fractions) -> ImmutableMatrix:
    return ImmutableMatrix([[sympy.Rational(x.numerator, x.denominator) for x in row] for row in values])


@record(eq=False)
class Latent(Rounding):
    """A head's MLA quantities: ``latent`` and ``absorbed_query`` (rational), ``latent_output`` (u = P c_KV)."""

    model: Any  # the head's exact Model
    setting: Mla
    kind = "mla"
    columns = ()
    stacked = ()

    @cached_property
    def _rationals(self) -> dict[str, Fractions]:
        return {"latent": self.setting.latent, "absorbed_query": self.setting.absorbed}

    @cached_property
    def weighted(self) -> Any:
        """The head with c_KV in V's place: its output is u = P c_KV."""
        v, dv = integer_matrix(numerals(self.setting.latent))
        return replace(self.model, v=v, dv=dv)

    def exact(self, quantity: str) -> ImmutableMatrix:
        if quantity == "latent_output":
            return self.weighted.exact("output")
        return _matrix(self._rationals[quantity])

    def rationals(self, quantity: str) -> tuple[tuple[Fraction | None, ...], ...]:
        if quantity == "latent_output":
            return self.weighted.rationals("output")
        return self._rationals[quantity]

    def rounded(self, quantity: str, decimals: Any) -> Any:
        if quantity == "latent_output":
            return self.weighted.rounded("output", decimals)
        return super().rounded(quantity, decimals)

    def significant(self, quantity: str, digits: int) -> Any:
        if quantity == "latent_output":
            return self.weighted.significant("output", digits)
        return super().significant(quantity, digits)

    def _may_be_infinite(self, quantity: str) -> bool:
        return False

    def _enclosures(self, quantity: str, bits: int) -> list[Fixed]:
        return [Fixed.exact(x, bits) for row in self._rationals[quantity] for x in row]

    def compare(self, quantity: str, i: int, j: int, value: Fraction) -> int:
        """The sign of an entry minus a rational."""
        if quantity == "latent_output":
            return int(self.weighted.compare("output", i, j, value))
        x = self._rationals[quantity][i][j]
        return (x > value) - (x < value)

    # --- the two routes ---------------------------------------------------------------------------------

    @cached_property
    def scores_agree(self) -> bool:
        """q̃ c_KVᵀ = Q_nope K_nopeᵀ entry by entry, as rationals, and the head's Q and K are exactly
        [Q_nope ; Q_R] and [K_nope ; K_R]: then each score is q̃ c_jᵀ plus the same product of the same
        turned columns in both routes (none with d_r = 0)."""
        Qn, Kn, _, _ = self.setting.parts
        latent = product(self.setting.absorbed, tuple(zip(*self.setting.latent))) == product(Qn, tuple(zip(*Kn)))
        Q, K, _ = self.setting.made
        return latent and _matrix(Q) == self.model.Q and _matrix(K) == self.model.K

    @cached_property
    def values_agree(self) -> bool:
        """c_KV W_UV is the head's V, entry by entry, as rationals."""
        W = tuple(tuple(x.value for x in row) for row in self.setting.W_UV)
        return _matrix(product(self.setting.latent, W)) == self.model.V

    @property
    def routes_agree(self) -> bool:
        """Whether the absorbed route's output (P c_KV) W_UV is exactly the naive P V: the same scores (so P is
        one closed form), and c_KV W_UV = V, so (P c_KV) W_UV = P (c_KV W_UV) = P V."""
        return self.scores_agree and self.values_agree


# --- error carried forward -------------------------------------------------------------------------------

Value = tuple[sympy.Expr, bool]  # a value and whether a claimed number went into it


def rational(x: Fraction) -> sympy.Rational:
    return sympy.Rational(x.numerator, x.denominator)


def _sum(pairs: list[tuple[Value, Value]]) -> Value:
    return sympy.Add(*[a * b for (a, _), (b, _) in pairs]), any(x or y for (_, x), (_, y) in pairs)


def carried(chain: Any, setting: Mla, quantity: str, row: int, col: int | None, head: Any) -> Any:
    """An MLA quantity from the claimant's own numbers before it: the latent from X and W_DKV (inputs), q̃ from
    their Q (its head's q_nope columns), u from their weights and latent (one c_KV, claimed without a head)."""
    assert col is not None  # each is a matrix
    if quantity == "latent":
        return rational(setting.latent[row][col]), False
    if quantity == "absorbed_query":
        q0 = (head or 0) * (setting.d_nope + setting.d_r)  # the head's columns of Q
        W = setting.of_head(head).W_UK
        return _sum([(chain.implied("Q", row, q0 + k), (rational(W[col][k].value), False)) for k in range(len(W[0]))])
    if quantity == "latent_output":
        keys = range(len(setting.X))
        return _sum([(chain.implied("weights", row, j, head), chain.implied("latent", j, col)) for j in keys])
    return None


def carried_core(chain: Any, setting: Mla, quantity: str, row: int, col: int | None, head: Any) -> Any:
    """Along the absorbed route, where the claimant gave its numbers: a score from their q̃ and latent (plus
    their turned q′_R · k′_R with decoupled dims), an output entry from their u and W_UV."""
    s = setting.of_head(head)
    if col is None:
        return None
    if quantity == "scores" and "absorbed_query" in chain.names:
        d_c = len(s.W_DKV[0])
        pairs = [(chain.implied("absorbed_query", row, c, head), chain.implied("latent", col, c)) for c in range(d_c)]
        turned = range(s.d_nope, s.d_nope + s.d_r)  # the decoupled dims: their Q′ and K′ there
        pairs += [(chain.implied("Q_rot", row, k, head), chain.implied("K_rot", col, k, head)) for k in turned]
        return _sum(pairs)
    if quantity == "output" and "latent_output" in chain.names:
        W = s.W_UV
        return _sum(
            [(chain.implied("latent_output", row, c, head), (rational(W[c][col].value), False)) for c in range(len(W))]
        )
    return None


def carried_input(chain: Any, setting: Mla, quantity: str, row: int, col: int) -> Any:
    """K_nope and V from the claimant's latent (Q and the decoupled K_R: from the inputs alone)."""
    if quantity == "Q":
        return None
    width = setting.d_nope + setting.d_r if quantity == "K" else setting.d_v
    h, local = divmod(col, width)
    if local >= width - setting.d_r and quantity == "K":
        return None
    head = setting.of_head(h)
    W = head.W_UK if quantity == "K" else head.W_UV
    return _sum([(chain.implied("latent", row, c), (rational(W[c][local].value), False)) for c in range(len(W))])


# --- the steps --------------------------------------------------------------------------------------------


def _shared(spec: Any, setting: Mla) -> dict[str, Any]:
    """What one head's step and the heads' shared step both show: the sizes, X, W_DKV, c_KV and the query path."""
    d, notation = spec.decimals, spec.notation
    c_q = setting.query_latent
    return {
        "route": setting.route,
        "d_model": len(setting.X[0]),
        "d_c": len(setting.W_DKV[0]),
        "d_k": setting.d_nope,
        "X": setting.X,
        "W_DKV": setting.W_DKV,
        "latent": exact_or_rounded(setting.latent, d.scores, notation),
        "query": setting.query,
        "query_latent": None if c_q is None else exact_or_rounded(c_q, d.scores, notation),
        "d_r": setting.d_r,
        "W_KR": setting.W_KR,
    }


def latents_step(spec: Any, model: Any, setting: Mla) -> Latents:
    d, f, notation = spec.decimals, spec.focus, spec.notation
    absorbed = exact_or_rounded(setting.absorbed, d.scores, notation)
    scores = product((setting.absorbed[f],), tuple(zip(*setting.latent)))
    Qn, Kn, QR, KR = (exact_or_rounded(m, d.scores, notation) if m else () for m in setting.parts)
    return Latents(
        **_shared(spec, setting),
        d_v=setting.d_v,
        Q=spec.Q,
        W_UK=setting.W_UK,
        W_UV=setting.W_UV,
        K=spec.K,
        V=spec.V,
        q=tuple(spec.Q[f][: setting.d_nope]),
        absorbed=absorbed[f],
        scores=exact_or_rounded(scores, d.scores, notation)[0],
        routes_agree=Latent(model, setting).routes_agree,
        W_QR=setting.W_QR,
        Q_nope=Qn,
        K_nope=Kn,
        Q_R=QR,
        K_R=KR,
        head=setting.head,
        heads=setting.of_heads,
    )


@record
class SharedLatent:
    """What the heads of MLA share, said once before them: X, W_DKV and the latent c_KV, the queries' own latent
    c_Q, the one decoupled key part K_R, and why both routes give one output (in every head)."""

    kind: ClassVar[str] = "mla_shared"
    route: str
    d_model: int
    d_c: int
    d_k: int  # each head's d_nope
    X: Numerals
    W_DKV: Numerals
    latent: NumRows
    query: tuple[tuple[str, Numerals], ...]  # the query path (its last matrix is each head's, in blocks)
    query_latent: NumRows | None  # c_Q = X W_DQ
    routes_agree: bool  # in every head
    heads: int
    d_r: int = 0
    W_KR: Numerals | None = None
    K_R: NumRows = ()
    head: None = None  # no head's own: the template shows what every head shares


def shared_step(spec: Any, models: tuple[Any, ...], setting: Mla) -> SharedLatent:
    K_R = setting.parts[3]
    return SharedLatent(
        **_shared(spec, setting),
        routes_agree=all(Latent(model, setting.of_head(h)).routes_agree for h, model in enumerate(models)),
        heads=setting.heads,
        K_R=exact_or_rounded(K_R, spec.decimals.scores, spec.notation) if K_R else (),
    )


def output_step(spec: Any, model: Any, fig: Any, setting: Mla) -> LatentOutput:
    view = Latent(model, setting)
    u = from_model(view, "latent_output", spec.decimals.output, spec.notation)
    return LatentOutput(u[spec.focus], setting.W_UV, fig.output[spec.focus], view.routes_agree, setting.head)


__all__ = [
    "RATIONAL",
    "Latent",
    "SharedLatent",
    "carried",
    "carried_core",
    "carried_input",
    "latents_step",
    "output_step",
    "shared_step",
]
