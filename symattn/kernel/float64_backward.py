"""The gradients dQ, dK, dV of attention for a given dO in float64, each with a rigorous a-priori bound.

The backward pass of O = A·V, A = softmax(Z), Z = c·Q·Kᵀ (c the scale), as kernels compute it:

    dV = Aᵀ·dO,  dA = dO·Vᵀ,  D_i = Σ_k dO_ik O_ik (= Σ_j A_ij dA_ij),  dS = A ∘ (dA − D),
    dQ = c·dS·K,  dK = c·dSᵀ·Q.

The forward pass is :mod:`symattn.kernel.float64`'s exp stage (``exps``: E = e^(z − M) within e_E, which
is TINY below the floor only where the score's own bound keeps e^(z − M) below it, else inf: no floor here),
with the row sums done more tightly than for O. Everything below is standard forward error analysis
(u = 2^-53, γ_n = n·u/(1 − n·u); x̂ a float, e_x a bound on |x̂ − x|), each bound formed in floats from
non-negative terms and multiplied by SAFETY, far more than the few roundings of forming it:

- **Row sums** (ℓ = Σ_j E_ij, and D below). Rump–Ogita–Oishi's ExtractScalar splits each term p = h + l
  with σ a power of 2 at least 2m·max|p|: every h is a multiple of u·σ and |Σ h| ≤ σ/2, so Σ h is exact
  in any order; |l| ≤ u·σ, so Σ l loses at most γ_m·m·u·σ. The sum is off by u|ŝ| + γ_m·m·u·σ, about u,
  where a plain sum loses γ of its length. Then ℓ is off by that and Σ_j e_E,ij, and Â = E/ℓ̂ as the
  forward pass divides (``float64.divided``).
- **dA.** dO and V are float32 values (float16 and bfloat16 ones are), so dA = dO·Vᵀ is a product of
  the same kind as the scores, and comes with its bound the same way (``float64._scores``: the high parts'
  product exact, only the rest carries γ).
- **D** = Σ_j A_ij dA_ij (= Σ_k dO_ik O_ik, but without O's cancellation): the products p = fl(Â·dÂ) round
  once each (u|p|) and are summed as the row sums are; the terms' own errors add Σ_j Â e_dA + e_A (|dÂ| + e_dA).
- **dS.** Ŷ = fl(dÂ − D̂) with e_Y = u|Ŷ| + e_dA + e_D, then dŜ = fl(Â·Ŷ) with
  e_dS = u|dŜ| + |Â| e_Y + e_A (|Ŷ| + e_Y). A masked key has Â = 0 and e_A = 0 exactly: dS is 0 there.
  On a saturated row Ŷ is (dA − dA_p) − C instead, with a bound relative to C (``_pivoted``).
- **The products** dQ = c·dS·K, dK = c·dSᵀ·Q, dV = Aᵀ·dO are sums of full float64 terms, but split as
  the scores are (``float64._scores``: rows x = high + low by ExtractScalar, the highs' product exact in
  any order): only the small rest loses γ, about u/10 of the sum of magnitudes at 1024 keys where a plain
  product loses γ_√m (with chunks) or γ_m. dK and dV are one such product per block of query rows, the
  blocks added one by one (γ_blocks of their magnitudes). To that each adds its terms' own errors:
  Σ_j e_dS,ij |K_jl| for dS·K, one matrix product of non-negative floats.
- **The scale.** dQ̂ = fl(ĉ·P̂): u|dQ̂| + ĉ e_P + (|P̂| + e_P) ĉ·ε_c, ε_c ĉ bounding |ĉ − c| as the
  forward pass takes it.

- **Underflow.** A product below 2^-1022 is off by up to 2^-1075 absolute, which no u|x| covers: a weight
  near e^-700 times a small dA − D makes dS subnormal, and dS·K, dSᵀ·Q underflow further (bounds of 0 were
  seen beside values of 1e-312). Wherever a factor or a result is nonzero and below 2^-800 (``float64.tiny``), each
  stage adds UNDER = 2^-1070 (32 such underflows) an entry, and a product of such terms that times their count
  plus one; elsewhere nothing changes.

A bound that overflows or meets 0·∞ is ∞: that entry is left to arb. Memory stays O(block · keys + N · D):
dK and dV are summed block by block, never an N × N matrix whole.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from symattn.input.records import record
from symattn.kernel.float64 import (
    BLOCK,
    SAFETY,
    UNDER,
    Head,
    Split,
    U,
    _scores,
    divided,
    exps,
    extra_logits,
    extra_term,
    gamma,
    joined,
    scaled,
    tiny,
    tiny_terms,
)

GRADIENTS = ("dQ", "dK", "dV")


@record
class GradientHead(Head):
    """One head's inputs and the dO the gradients are for (n×dv, float32 values)."""

    dO: np.ndarray


@record
class ModGradientHead(GradientHead):
    """A gradient head with a float64.ModHead's factor and score modifiers (a constant bias: so
    dS and every product above are the plain ones, on the biased weights)."""

    factor: Fraction | None = None
    mods: tuple[Any, ...] = ()


def gradient(head: GradientHead, quantity: str, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """dQ (n×d), dK (m×d) or dV (m×dv) and a bound on each entry's error."""
    assert quantity in GRADIENTS
    with np.errstate(invalid="ignore", over="ignore"):  # 0·inf and overflow leave no bound: inf below
        value, error = _gradient(head, quantity, block)
    error[~np.isfinite(error)] = np.inf
    return value, error


def _gradient(head: GradientHead, quantity: str, block: int) -> tuple[np.ndarray, np.ndarray]:
    n, m = head.Q.shape[0], head.K.shape[0]
    keys, values = Split.of(head.K), Split.of(head.V)
    if quantity == "dQ":
        value, error = np.empty(head.Q.shape), np.empty(head.Q.shape)
        columns, absK = Split.of(np.ascontiguousarray(head.K.T)), np.abs(head.K)
    else:
        across = head.Q if quantity == "dK" else head.dO  # dK = c·dSᵀ·Q, dV = Aᵀ·dO
        value, error = np.zeros((m, across.shape[1])), np.zeros((m, across.shape[1]))
        g = gamma(-(-n // block))  # the blocks' products added one by one
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        A, e_A = _weights(head, rows, keys)
        if quantity != "dV":
            A, e_A = _score_gradient(head, A, e_A, values, rows)  # dS and its bound from here on
            A, e_A = _through_mods(head, A, e_A, rows, keys)
        if quantity == "dQ":
            P, e_P = _scores(A, columns)
            e_P += UNDER * tiny_terms(np.sum(tiny(A, e_A), axis=1, keepdims=True))
            value[rows], error[rows] = _scaled(head, P, SAFETY * (e_P + e_A @ absK))
            continue
        part = across[rows]
        P, e_P = _scores(np.ascontiguousarray(A.T), Split.of(np.ascontiguousarray(part.T)))
        value += P
        error += g * np.abs(P) + e_P + e_A.T @ np.abs(part) + UNDER * tiny_terms(np.sum(tiny(A, e_A), axis=0)[:, None])
    if quantity == "dK":
        return _scaled(head, value, SAFETY * error)
    return value, SAFETY * error if quantity == "dV" else error


def _row_sums(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's Σ_j P_ij (a column) and a bound on its error: ExtractScalar's high parts sum exactly."""
    m = P.shape[1]
    _, e = np.frexp(np.max(np.abs(P), axis=1, keepdims=True))  # max |P| < 2^e (e = 0 for a zero row)
    sigma = np.ldexp(1.0, e + max(1, m - 1).bit_length() + 1)  # ≥ 2m·2^e
    high = (P + sigma) - sigma  # exact, a multiple of u·σ
    s = np.sum(high, axis=1, keepdims=True) + np.sum(P - high, axis=1, keepdims=True)
    return s, SAFETY * (U * np.abs(s) + gamma(m) * m * U * sigma)


def _weights(head: Head, rows: slice, keys: Split) -> tuple[np.ndarray, np.ndarray]:
    """The weights of the query rows and their bound, the row sums ℓ summed (nearly) exactly."""
    return _weighted(head, rows, keys)[:2]


def _weighted(head: Head, rows: slice, keys: Split) -> tuple:
    """The weights and their bound, and the share e^(s − M)/ℓ of each row's denominator logit s with its bound
    (None, None without one): ℓ is the keys' sum and that term (``float64.joined``)."""
    E, eE, _, _, M = exps(head, rows, keys)
    ell, e_sum = _row_sums(E)
    term = extra_term(head, rows, M)
    ell, e_ell = joined(ell, SAFETY * (e_sum + np.sum(eE, axis=1, keepdims=True)), term)
    share = (None, None) if term is None else divided(term[0], term[1], ell, e_ell)
    return (*divided(E, eE, ell, e_ell), *share)


def _dots(head: GradientHead, A, e_A, values: Split, rows: slice) -> tuple[np.ndarray, ...]:
    """dA = dO·Vᵀ and D = Σ_j A_ij dA_ij of the block's rows, with their bounds."""
    dA, e_dA = _scores(head.dO[rows], values)
    p = A * dA
    D, e_sum = _row_sums(p)
    terms = U * np.abs(p) + A * e_dA + e_A * (np.abs(dA) + e_dA) + UNDER * tiny(p, A, dA)
    return dA, e_dA, D, SAFETY * (e_sum + np.sum(terms, axis=1, keepdims=True))


@record
class LogitGradient:
    """dsink of one query head: its gradient head in each batch, each with its score_mods.Denominator."""

    heads: tuple[GradientHead, ...]

    @property
    def mods(self) -> tuple[Any, ...]:  # the first head's: a modified head (refine proves no zeros for it)
        return getattr(self.heads[0], "mods", ())


def logit_gradient(given: LogitGradient, block: int = BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """dsink = −Σ_{b,i} P_bi·D_bi (P the logit's share of row i, D_i = Σ_j A_ij dA_ij: the logit has no value,
    so its dS is P·(0 − D)) as a 1×1 value and its bound: each product rounds once, u|t| + P e_D +
    e_P (|D| + e_D), and their sum over every row of every batch loses at most γ of its count."""
    terms, errors = [], []
    with np.errstate(invalid="ignore", over="ignore"):
        for head in given.heads:
            keys, values = Split.of(head.K), Split.of(head.V)
            for start in range(0, head.Q.shape[0], block):
                rows = slice(start, min(start + block, head.Q.shape[0]))
                A, e_A, P, e_P = _weighted(head, rows, keys)
                _, _, D, e_D = _dots(head, A, e_A, values, rows)
                t = P * D
                terms.append(t)
                errors.append(SAFETY * (U * np.abs(t) + P * e_D + e_P * (np.abs(D) + e_D)))
        t, e_t = np.concatenate(terms), np.concatenate(errors)
        error = SAFETY * (gamma(t.size) * np.sum(np.abs(t)) + np.sum(e_t))
    return np.full((1, 1), -np.sum(t)), np.full((1, 1), error if np.isfinite(error) else np.inf)


def _score_gradient(head: GradientHead, A, e_A, values: Split, rows: slice) -> tuple[np.ndarray, np.ndarray]:
    """dS = A ∘ (dA − D) of the block's rows, with its bound."""
    dA, e_dA, D, e_D = _dots(head, A, e_A, values, rows)
    Y = dA - D
    e_Y = SAFETY * (U * np.abs(Y) + e_dA + e_D)
    del dA, e_dA
    Y, e_Y = _pivoted(head, A, e_A, rows, Y, e_Y)
    dS = A * Y
    e_dS = SAFETY * (U * np.abs(dS) + A * e_Y + e_A * (np.abs(Y) + e_Y) + UNDER * tiny(dS, A, Y))
    e_dS[np.isnan(e_dS)] = np.inf  # an unbounded weight (inf) times a zero
    return dS, e_dS


def _pivoted(head: GradientHead, A, e_A, rows: slice, Y, e_Y) -> tuple[np.ndarray, np.ndarray]:
    """dA − D of the rows where one weight A_ip is at least 1/2 (a saturated row, where D is dA_ip up to the
    other weights and the bound above, absolute in dA, dwarfs dA_ip − D) as (dA − dA_p) − C, taken where its
    bound is 16 times tighter. Since Σ_k A_ik = 1 (no denominator logit),

        dA_ij − D_i = (dA_ij − dA_ip) − C_i,  C_i = Σ_k A_ik (dA_ik − dA_ip),

    exactly, for any key p. R = dA − dA_p = dO·Wᵀ with W = V − V_p: Ŵ rounds once (u|Ŵ|, none at p, where
    Ŵ_p = 0 and R_ip = 0 exactly), R̂ comes with ``_scores``' bound plus Σ_l |dO_il| u|Ŵ_kl|, relative to
    |dO|·|V − V_p| and not to |dO|·|V|; C is summed as D is, its terms' errors Â e_R + e_A (|R̂| + e_R); and
    fl(R̂ − Ĉ) rounds once more. So dS = A ∘ (R − C) keeps the size of C, e^(−gap) or so, in its bound."""
    if extra_logits(head, rows, A.shape[0]):  # a denominator logit's share: the weights add up to less than 1
        return Y, e_Y
    pivots = np.argmax(A, axis=1)
    saturated = np.nonzero(A[np.arange(A.shape[0]), pivots] >= 0.5)[0]
    dO = head.dO[rows]
    for p in sorted(set(pivots[saturated].tolist())):  # not np.unique: it imports numpy.ma, 10 ms a process
        r = saturated[pivots[saturated] == p]
        W = head.V - head.V[p]
        R, e_R = _scores(dO[r], Split.of(W))
        e_R += SAFETY * U * (np.abs(dO[r]) @ np.abs(W).T)
        R[:, p], e_R[:, p] = 0.0, 0.0
        t = A[r] * R
        C, e_sum = _row_sums(t)
        terms = U * np.abs(t) + A[r] * e_R + e_A[r] * (np.abs(R) + e_R) + UNDER * tiny(t, A[r], R)
        e_C = SAFETY * (e_sum + np.sum(terms, axis=1, keepdims=True))
        Z = R - C
        e_Z = SAFETY * (U * np.abs(Z) + e_R + e_C)
        better = 16 * e_Z < e_Y[r]
        Y[r], e_Y[r] = np.where(better, Z, Y[r]), np.where(better, e_Z, e_Y[r])
    return Y, e_Y


def _through_mods(head: Head, dS, e_dS, rows: slice, keys: Split) -> tuple[np.ndarray, np.ndarray]:
    """dS back through the score modifiers to the scaled scores: the tanh cap's 1 − tanh²(z/c) (a bias has
    derivative 1): dS·g with |dS·g − dS_true·g_true| ≤ |g|e_dS + (|dS| + e_dS)e_g, one rounding more."""
    mods = getattr(head, "mods", ())
    if not any(hasattr(mod, "derivative") for mod in mods):
        return dS, e_dS
    Z, eZ = scaled(head, rows, keys)
    for mod in mods:
        if hasattr(mod, "derivative"):
            g, e_g = mod.derivative(Z, eZ)
            product = dS * g
            under = UNDER * tiny(product, dS, e_dS)
            e_dS = SAFETY * (np.abs(g) * e_dS + (np.abs(dS) + e_dS) * e_g + U * np.abs(product) + under)
            dS = product
        Z, eZ = mod.float64(Z, eZ, rows)
    return dS, e_dS


def _scaled(head: Head, P: np.ndarray, e_P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """c·P and its bound: ĉ·P̂ rounds once, and ĉ is within scale_error of c."""
    c = abs(head.scale)
    value = head.scale * P
    under = UNDER * tiny(value, P, e_P)
    return value, SAFETY * (U * np.abs(value) + c * e_P + (np.abs(P) + e_P) * (c * head.scale_error) + under)


__all__ = ["GRADIENTS", "GradientHead", "ModGradientHead", "LogitGradient", "gradient", "logit_gradient"]
