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
    certified: str = ""  # what a float64-path certificate certifies, as python -m symattn.verifier says it

    @property
    def ok(self) -> bool:
        return not self.failures and self.checked > 0


# what a failure line of these verifiers says, and the verdict's words for one value and for n: the last
# line of a failed run, counted as the standalone verifier counts its own (symattn/verifier/__main__.py)
REFUTED = (
    (
        ("is not the rounding of", "but the exact value rounds to"),
        "does not round to the value shown",
        "do not round to the value shown",
    ),
    (
        ("does not hold",),
        "has a float ± bound that does not hold the one recomputed",
        "have a float ± bound that does not hold the one recomputed",
    ),
    (("outside",), "lies outside its bounds", "lie outside their bounds"),
    (("not decided",), "is not decided", "are not decided"),
    (
        ("wider than a certificate's bound may be",),
        "has a bound wider than it may be",
        "have bounds wider than they may be",
    ),
)
FILE = "not the file certified"


def verdict(failures: tuple[str, ...]) -> str:
    """``NOT verified: 1 file is not the file certified; 3 values do not round to the value shown``."""
    files = sum(FILE in line for line in failures)
    parts = ["1 file is not the file certified" if files == 1 else f"{files} files are not the files certified"]
    parts = parts if files else []
    left = [line for line in failures if FILE not in line]
    for phrases, one, many in REFUTED:
        n = sum(any(p in line for p in phrases) for line in left)
        left = [line for line in left if not any(p in line for p in phrases)]
        if n:
            parts.append(f"1 value {one}" if n == 1 else f"{n} values {many}")
    if left:  # a line of another kind (the form of a bound, say)
        parts.append("1 value fails its check" if len(left) == 1 else f"{len(left)} values fail their check")
    return "NOT verified: " + ("; ".join(parts) or "no value was checked")


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


__all__ = ["CLAIM", "REFUTED", "Verification", "round_significant", "verdict"]
