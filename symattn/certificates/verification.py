"""What a certificate's verification found, and what both certificate versions share: rounding half-up to
significant digits, exactly. (The files a certificate names: :mod:`symattn.certificates.files`.)"""

from __future__ import annotations

from fractions import Fraction

from symattn.input.records import record

# what a verified version-1 certificate proves of each value (the CLI's first line says it)
CLAIM = "each exact value lies in its bounds, and every point of the bounds rounds to the value shown"


@record
class Verification:
    checked: int  # values proved
    failures: tuple[str, ...]  # one line each: where, and what is wrong
    files: tuple[str, ...] = ()  # one line per file the certificate names: its SHA-256 matched, or it is absent
    paths: tuple[str, ...] = ()  # how many values each path decided (a float64-path certificate)
    claim: str = CLAIM  # what was proved of each value, in words true of this certificate's version

    @property
    def ok(self) -> bool:
        return not self.failures and self.checked > 0


def round_significant(x: Fraction, digits: int) -> Fraction:
    """x rounded half-up (away from zero on ties) to ``digits`` significant digits, exactly."""
    if x == 0:
        return Fraction(0)
    a = abs(x)
    k = (a.numerator.bit_length() - a.denominator.bit_length()) * 30103 // 100000  # about log10(a)
    while Fraction(10) ** k > a:  # make 10^k <= a < 10^(k+1)
        k -= 1
    while Fraction(10) ** (k + 1) <= a:
        k += 1
    unit = Fraction(10) ** (k - digits + 1)
    q = (a / unit * 2 + 1).__floor__() // 2
    return (q * unit) * (1 if x > 0 else -1)


__all__ = ["CLAIM", "Verification", "round_significant"]
