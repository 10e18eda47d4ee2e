"""Attention computed independently of symattn, in Fractions only: e^x by its Taylor series, no SymPy, no floats.

Each value is within 10^-40 of the exact one, so its rounding to a few decimals is the exact value's
(unless it lies within 10^-40 of a tie, which the tests' numbers do not).
"""

from fractions import Fraction

PRECISION = Fraction(1, 10**40)


def exp(x: Fraction) -> Fraction:
    """e^x for a rational x, within PRECISION: e^(x/2^k) by its series, squared k times."""
    k = 0
    while abs(x) / 2**k > Fraction(1, 2):
        k += 1
    y = x / 2**k
    term, total, n = Fraction(1), Fraction(1), 0
    while abs(term) > PRECISION / 2 ** (k + 8):
        n += 1
        term = term * y / n
        total += term
    for _ in range(k):
        total *= total
    return total


def matmul(A, B):
    return [[sum((a * B[t][k] for t, a in enumerate(row)), Fraction(0)) for k in range(len(B[0]))] for row in A]


def transpose(A):
    return [list(col) for col in zip(*A)]


def head(Q, K, V, scale: Fraction):
    """(scores, scaled, exps, sums, weights, output) of one head."""
    S = matmul(Q, transpose(K))
    Z = [[s * scale for s in row] for row in S]
    E = [[exp(z) for z in row] for row in Z]
    sums = [sum(row, Fraction(0)) for row in E]
    A = [[e / total for e in row] for row, total in zip(E, sums)]
    return S, Z, E, sums, A, matmul(A, V)


def columns(M, first: int, count: int):
    return [row[first : first + count] for row in M]


def half_up(x: Fraction, decimals: int) -> Fraction:
    """x rounded half-up (away from zero on ties) to decimals places."""
    scaled = abs(x) * 10**decimals
    q = (2 * scaled.numerator + scaled.denominator) // (2 * scaled.denominator)
    return Fraction(q if x >= 0 else -q, 10**decimals)


def text(x: Fraction, decimals: int) -> str:
    """A rounded value written with exactly ``decimals`` places."""
    q = half_up(x, decimals) * 10**decimals
    assert q.denominator == 1
    n = abs(q.numerator)
    digits = str(n).rjust(decimals + 1, "0")
    body = digits[:-decimals] + "." + digits[-decimals:] if decimals else digits
    return ("-" if q < 0 else "") + body
