"""QK-norm, one part: ``qk_norm = true`` puts each head's query and key rows through RMSNorm over the head's
d_k columns before the scores, as Gemma 3, OLMo 2 and Qwen3 do:

    q̂ = q ⊙ w_q / σ(q),   σ(x) = √(mean(x²) + ε)        (ε = ``qk_norm_eps``, default 1e-6; w = 1 unless given)

Exactness. Each row's mean(x²) + ε is a positive rational a, so a normalized entry is rational · 1/√a, and a
score is S_ij = n_ij / √(a_i b_j) = ρ·√m with rationals ρ and m > 0 (m = 1/(a_i b_j)). After the scale c·√r,
y = ρc·√(m r): again a rational times the square root of a positive rational. Such numbers are decided
exactly with no enclosure and no factoring:

- y is rational iff ρ = 0 or m·r is the square of a rational (numerator and denominator perfect squares);
- y₁ = y₂ iff y₁|y₁| = y₂|y₂| (t ↦ t|t| is one-to-one), that is, equal signs and ρ₁²m₁ = ρ₂²m₂;
- the sign of y₁ − y₂ is that of y₁ where the signs differ, else that of y₁² − y₂² (negated if both < 0);
- y₁ − y₂ is rational iff both are rational or they are equal: were both irrational with a rational
  difference q ≠ 0, squaring ρ₁√m₁ = q + ρ₂√m₂ would make √m₂ rational.

e^y is transcendental for algebraic y ≠ 0 (Lindemann), so the exps are rational only at y = 0, and the
weights and outputs follow the model's rules on the groups of equal z. QK-norm comes before any other Q/K
part and is not combined with one, with an additive part or with a denominator part yet (one line each).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import NumRow, NumRows
from symattn.input.messages import said
from symattn.input.numeral import parse_numeral
from symattn.input.records import record
from symattn.variants.base import ADD, DENOMINATOR, QK, Part, Quantity, Where

if TYPE_CHECKING:  # one head's norm is SymPy's: the spec reads the part without it
    from symattn.variants.qk_norm_head import Normed

# --- limits of QK-norm ----------------------------------------------------------------------------
QK_NORM_EPS = 10**12  # qk_norm_eps: from 1/10^12 to 1, numerator and denominator at most 10^12

# --- the setting ----------------------------------------------------------------------------------

NEEDS = "qk_norm = true (Q and K through RMSNorm)"
NORMED = ("Q_norm", "K_norm")
RMS = ("Q_rms", "K_rms")  # σ of each row of Q and of K: what a student works before the normalized rows


@record
class QkNorm:
    eps: Fraction
    q_weight: tuple[Fraction, ...] | None
    k_weight: tuple[Fraction, ...] | None
    eps_text: Any = None  # the Numeral as the spec gives it (the default's: 1e-6)
    typed: tuple[Any, Any] = (None, None)  # the weights' Numerals as given, to show them as typed


# --- the step of a derivation ----------------------------------------------------------------------


@record
class Normalization:
    """RMSNorm of the focus query: its squares' mean, σ, and the normalized row; then Q̂ and K̂."""

    kind: ClassVar[str] = "qk_norm"
    eps: Any  # ε as the spec gives it (a Numeral)
    d_k: int
    x: tuple[Any, ...]  # the focus query row (Numerals)
    mean: Any  # mean(x²) + ε, exact (a Num)
    sigma: Any  # σ as shown (a Num)
    weighted: bool
    out: NumRow  # the normalized row
    Q_norm: NumRows
    K_norm: NumRows
    zero: tuple[int, int] = (1, 1)  # its place among the steps before step 1, and how many (see forward.py)
    q_weight: tuple[Any, ...] = ()  # the weights w of the queries and of the keys as given (Numerals; none: w = 1)
    k_weight: tuple[Any, ...] = ()


@record
class NormBackRow:
    """RMSNorm's backward of one row: its sum s = Σ_j (w ⊙ g)_j x_j, 1/σ and 1/(d·σ³), and each dx_t."""

    row: int
    x: tuple[Any, ...]  # the row of Q or K as given (Numerals)
    wg: NumRow  # w ⊙ g, g the row of dQ′ (dK′) as shown
    dot: Any  # s (a Num)
    inv: Any  # 1/σ as the hand pass uses it (a Num)
    inv3: Any  # 1/(d·σ³)
    out: NumRow  # the row of dQ (dK)


@record
class GradNorm:
    """dQ and dK through RMSNorm: the focus query's row and one key's, then both matrices."""

    kind: ClassVar[str] = "backward_norm"
    d_k: int
    weighted: bool
    query: NormBackRow
    key: NormBackRow
    dQ: NumRows
    dQ_exact: bool
    dK: NumRows
    dK_exact: bool
    note_at: int | None = None  # exact rounding: the first row whose shown numbers do not give its results


# --- the part -------------------------------------------------------------------------------------


class QkNormPart(Part):
    name = "qk_norm"
    keys = ("qk_norm", "qk_norm_eps", "q_norm_weight", "k_norm_weight")
    stage = QK
    title = "QK-norm"
    unstated = keys
    web_fields = (
        {"key": "qk_norm", "kind": "flag", "choices": ["false", "true"], "default": "false"},
        {"key": "qk_norm_eps", "kind": "text", "default": ""},
    )
    quantities = (
        Quantity("Q_rms", "scores", cols=None, asked_by="scores", needs=NEEDS),
        Quantity("K_rms", "scores", rows="key", cols=None, asked_by="scores", needs=NEEDS),
        Quantity("Q_norm", "scores", cols="dim", width="d_q", asked_by="scores", needs=NEEDS),
        Quantity("K_norm", "scores", rows="key", cols="dim", width="d_q", asked_by="scores", needs=NEEDS),
    )
    step_kinds = ("qk_norm", "backward_norm")
    facts = (("toy_vs_real", "qk_norm", False),)
    rounded_read = True
    certify = "--certify does not cover QK-norm yet"

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> QkNorm | None:
        on = reader.flag(data["qk_norm"], "qk_norm") if "qk_norm" in data else False
        if not on:
            for key in self.keys[1:]:
                if key in data:
                    raise reader.error(key, said("needs_qk_norm"))
            return None
        if where.symbolic_qk:
            raise reader.error("qk_norm", said("qk_norm_symbols"))
        if data.get("inputs") == "rounded":
            raise reader.error("inputs", said("qk_norm_rounded"))
        eps, text = Fraction(1, 10**6), parse_numeral("1e-6")
        if "qk_norm_eps" in data:
            n = reader.number(data["qk_norm_eps"], "qk_norm_eps")
            low = Fraction(1, QK_NORM_EPS)
            if not low <= n.value <= 1 or max(n.value.numerator, n.value.denominator) > QK_NORM_EPS:
                raise reader.error("qk_norm_eps", said("qk_norm_eps", got=n.text, most=QK_NORM_EPS))
            eps, text = n.value, n
        weights: list[tuple[Fraction, ...] | None] = []
        typed: list[tuple[Any, ...] | None] = []
        for key in ("q_norm_weight", "k_norm_weight"):
            if key not in data:
                weights.append(None)
                typed.append(None)
                continue
            row = reader.vector(data[key], key)
            if len(row) != where.d_k:
                raise reader.error(key, said("norm_weights", d_k=where.d_k, n=len(row)))
            weights.append(tuple(x.value for x in row))
            typed.append(tuple(row))
        from symattn import variants  # here: the registry imports this module

        for other in variants.PARTS:  # their rules assume plain scores (or their own)
            if other is not self and other.stage in (QK, ADD, DENOMINATOR):
                if other.read(reader, data, where) is not None:
                    raise reader.error("qk_norm", said("qk_norm_combine", part=other.title))
        return QkNorm(eps, weights[0], weights[1], text, (typed[0], typed[1]))

    def head_part(self, setting: QkNorm, spec: Any) -> Normed:
        from symattn.variants.qk_norm_head import Normed

        return Normed(setting.eps, setting.q_weight, setting.k_weight)

    def toy(self, spec: Any, setting: Any) -> tuple[tuple[str, Any], ...]:
        return (("qk_norm", True),)

    def report(self, spec: Any, setting: Any) -> dict[str, Any]:
        return {} if setting is None else {"qk_norm_eps": str(setting.eps)}

    def _shown(self, spec: Any, model: Any, quantity: str) -> NumRows:
        from symattn.exact.rounding import from_model

        return from_model(model, quantity, spec.decimals.scores, spec.notation)

    def scores_step(self, spec: Any, model: Any, fig: Any) -> tuple[Normalization, NumRows, NumRows]:
        import sympy

        from symattn.exact import numeric
        from symattn.exact.num import Num
        from symattn.exact.rounding import exact_or_rounded

        f, part = spec.focus, model.qk
        Q, K = self._shown(spec, model, "Q_norm"), self._shown(spec, model, "K_norm")
        a = part.mean_squares(model, "Q_norm")[f]
        sigma = sympy.sqrt(sympy.Rational(a.numerator, a.denominator))
        exact = numeric.as_fraction(sigma)
        rounded = numeric.round_expr(sigma, spec.decimals.scores)
        q_weight, k_weight = (w or () for w in spec.setting("qk_norm").typed)
        step = Normalization(
            spec.setting("qk_norm").eps_text,
            model.d_k,
            tuple(spec.Q[f]),
            exact_or_rounded([[a]], spec.decimals.scores, spec.notation)[0][0],
            Num(rounded, exact is not None and Fraction(rounded) == exact),
            part.q_weight is not None or part.k_weight is not None,
            Q[f],
            Q,
            K,
            q_weight=q_weight,
            k_weight=k_weight,
        )
        return step, Q, K

    def backward_inputs(self, spec: Any, model: Any) -> tuple[NumRows, NumRows]:
        return self._shown(spec, model, "Q_norm"), self._shown(spec, model, "K_norm")

    def backward_after_qk(self, spec: Any, model: Any, g: Mapping[str, Any], key: int) -> tuple[GradNorm]:
        from symattn.exact.rounding import is_exact

        part = model.qk
        query = _back_row(spec, part, model, "Q", spec.focus, g)
        return (
            GradNorm(
                model.d_k,
                part.q_weight is not None or part.k_weight is not None,
                query,
                _back_row(spec, part, model, "K", key, g),
                g["dQ"],
                is_exact(g["dQ"]),
                g["dK"],
                is_exact(g["dK"]),
            ),
        )


def _back_row(spec: Any, part: Any, model: Any, which: str, row: int, g: Mapping[str, Any]) -> NormBackRow:
    """One row's RMSNorm backward as the step shows it; 1/σ and 1/(d·σ³) at the weights' decimals, as the
    hand pass takes them (``real`` of its algebra)."""
    import sympy

    from symattn.exact import numeric
    from symattn.exact.num import Num
    from symattn.input.decimals import round_half_up, terminating_decimals

    name = which + "_norm"
    a = part.mean_squares(model, name)[row]
    sigma = sympy.sqrt(sympy.Rational(a.numerator, a.denominator))

    def shown(x: sympy.Expr) -> Num:
        value, exact = numeric.round_expr(x, spec.decimals.weights), numeric.as_fraction(x)
        return Num(value, exact is not None and Fraction(value) == exact)

    w = part.q_weight if which == "Q" else part.k_weight
    wg = []
    for t, gt in enumerate(g["d" + name][row]):
        value = gt.fraction * (w[t] if w else 1)
        places = terminating_decimals(value)
        digits = places if places is not None else spec.decimals.gradients + 2
        wg.append(Num(round_half_up(value, digits), gt.exact and places is not None))
    return NormBackRow(
        row,
        tuple(getattr(spec, which)[row]),
        tuple(wg),
        g["dot_" + name][row][0],
        shown(1 / sigma),
        shown(1 / (model.d_k * sigma**3)),
        g["d" + which][row],
    )


PART = QkNormPart()


__all__ = ["NEEDS", "NORMED", "PART", "GradNorm", "NormBackRow", "Normalization", "QkNorm", "QkNormPart"]
