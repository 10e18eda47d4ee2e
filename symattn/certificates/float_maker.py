"""A certificate of one head's output by the float64 path, for float inputs at kernel sizes (issue 22 §4).

Each output is shown to ``digits`` significant digits. Where every point of the float64 path's float ± bound
(:mod:`symattn.kernel.float64`) rounds to the digits shown, the certificate holds that float and a bound wide
enough for another machine's sums (:func:`portable`; path "f"). Where it does not, the sums are redone
error-free (:mod:`symattn.kernel.compensated`, a bound about ten times tighter; path "c"). The verifier
recomputes the floats and bounds of both from the inputs and trusts neither. The rest (path "a") are refined
with arb balls (:mod:`symattn.kernel.refine`) and hold the deciding enclosure, which the verifier
re-checks with mpmath intervals, as it does every value of an exact-path certificate.

Format version 2 (:data:`VERSION`): the inputs and every float as ``float.hex`` text (exact, and no
decimal parsing), the mask as a row of "1" and "0" per query. The work goes by row blocks; the JSON is
made piece by piece.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.certificates.float_digits import MOST, significant_many, text
from symattn.input.decimals import EXACT_CONTEXT
from symattn.kernel import compensated, float64

VERSION = 2
# which path decided a value: float64 (its chunked sums), float64 with error-free sums (compensated), arb
FLOAT, COMPENSATED, ARB = "f", "c", "a"
PATHS = {"float64": FLOAT, "compensated": COMPENSATED, "arb": ARB}
METHOD = (
    "float64 with a rigorous a-priori bound of each output's error (symattn.kernel.float64: exact split "
    "products, an exp with bounded reduction and polynomial, chunked sums), then error-free sums "
    "(symattn.kernel.compensated); arb balls where neither bound decides the digits"
)


def exact_decimal(x: Fraction) -> str:
    """A dyadic rational (an arb ball's end) as its exact decimal text."""
    den = x.denominator
    k = den.bit_length() - 1
    assert den == 1 << k  # arb's ends are dyadic
    return format(Decimal(x.numerator * 5**k).scaleb(-k, EXACT_CONTEXT), "f")  # never rounded to a context's precision


def portable(error: np.ndarray) -> np.ndarray:
    """The bound a certificate holds: three times the engine's, rounded up.

    Another machine's BLAS may sum in another order: its float f′ is within b + b′ of ours, and its own
    bound b′ is ours up to the rounding of the magnitudes' sums (SAFETY covers that), so its f′ ± b′ lies
    inside f ± 3b and the certificate verifies there too. The digits are decided on f ± b.
    """
    return np.nextafter(3 * float64.SAFETY * error, np.inf)


def hex_rows(a: np.ndarray) -> list[list[str]]:
    return [[float.hex(x) for x in row] for row in a.tolist()]


def compute_float64(spec, digits: int) -> Iterator[str]:
    """``compute --certify --float64``: the certificate of one head whose inputs are float32 values."""
    from symattn import variants
    from symattn.input.errors import SpecError
    from symattn.input.sources import hashes, spec_sources
    from symattn.kernel.heads import heads_of

    if not 1 <= digits <= MOST:
        raise SpecError(spec.source, None, f"--float64 shows 1 to {MOST} significant digits (--digits), not {digits}")
    heads = heads_of(spec, "output")
    if heads is None or len(heads) != 1:
        raise SpecError(
            spec.source,
            None,
            "--float64 covers one head whose Q, K and V are float32 values, without projections, W_O, "
            + variants.float64_words(),
        )
    return certificate_json(heads[0], digits, hashes(spec_sources(spec)))


def certificate_json(head: float64.Head, digits: int, files: list[dict[str, str]]) -> Iterator[str]:
    """The certificate of ``head``'s output as JSON text, in pieces (one key per line, as compute writes)."""
    from symattn.kernel.refine import refine

    if not 1 <= digits <= MOST:
        raise ValueError(f"the float64 path shows 1 to {MOST} significant digits, not {digits}")
    values: list[list[str]] = []
    paths: list[str] = []
    floats: list[list[str]] = []
    bounds: list[list[str]] = []
    enclosures: list[dict[str, Any]] = []
    open_rows: dict[int, list[int]] = {}  # the values neither float64 bound decides: {query: [columns]}
    for b in float64.blocks(head, weights=False):
        value, error = b.output.copy(), b.output_error.copy()
        ok, q, e = significant_many(*float64.interval(value, error), digits)
        path = np.where(ok, FLOAT, ARB)
        rows, cols = np.nonzero(~ok)
        if rows.size:  # the sums again, error-free: a bound about ten times tighter
            pairs = list(zip((rows + b.start).tolist(), cols.tolist()))
            v2, e2 = compensated.outputs(head, pairs)
            ok2, q2, x2 = significant_many(*float64.interval(v2, e2), digits)
            value[rows, cols], error[rows, cols] = (
                np.where(ok2, v2, value[rows, cols]),
                np.where(ok2, e2, error[rows, cols]),
            )
            q[rows, cols], e[rows, cols] = np.where(ok2, q2, q[rows, cols]), np.where(ok2, x2, e[rows, cols])
            path[rows[ok2], cols[ok2]] = COMPENSATED
        floats += hex_rows(value)
        bounds += hex_rows(portable(error))
        for i, k in zip(*np.nonzero(path == ARB)):
            open_rows.setdefault(int(i) + b.start, []).append(int(k))
        for row_path, row_q, row_e in zip(path.tolist(), q.tolist(), e.tolist()):
            values.append([text(x, y) if p != ARB else "" for p, x, y in zip(row_path, row_q, row_e)])
            paths.append("".join(row_path))
    found: dict[tuple[int, int], tuple[Fraction, Fraction]] = {}

    def keep(i: int, k: int, a: Fraction, z: Fraction) -> bool:
        found[(i, k)] = (a, z)  # the last call for an entry is the one that decided it
        return True

    if open_rows:  # one call for all: its integer matrices are made once
        # an exact 0 that only exact/zeros.py proves is left open: the verifier would not accept it
        done, _ = refine(head, "output", open_rows, keep, digits, prove_zeros=False)
        for (i, k), (_, shown) in done.items():
            values[i][k] = str(shown)
    for (i, k), (a, z) in sorted(found.items()):
        at = [i + 1, k + 1]
        # a row of equal scores has a rational output (refine knows it exactly): the fraction itself
        enclosures.append(
            {"at": at, "exact": str(a)} if a == z else {"at": at, "bounds": [exact_decimal(a), exact_decimal(z)]}
        )
    scale = "sqrt" if head.exact_scale is None else str(head.exact_scale)
    mask = None if head.allowed is None else ["".join("1" if x else "0" for x in row) for row in head.allowed.tolist()]
    yield "{\n"
    yield f'  "d_k": {head.Q.shape[1]},\n'
    yield '  "output": {\n'
    for key, table in (("value", values), ("path", paths), ("float", floats), ("bound", bounds)):
        yield f"    {json.dumps(key)}: [\n"
        yield ",\n".join("      " + json.dumps(row) for row in table)
        yield "\n    ]" + (",\n" if key != "bound" else "\n")
    yield "  },\n"
    cert = {
        "version": VERSION,
        "path": "float64",
        "method": METHOD,
        "digits": digits,
        "paths": {name: sum(p.count(c) for p in paths) for name, c in PATHS.items()},
        "files": files,
        "enclosures": enclosures,
    }
    yield '  "certificate": {\n'
    yield ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in cert.items()) + ",\n"
    yield '    "inputs": {\n'
    for name, matrix in (("Q", head.Q), ("K", head.K), ("V", head.V)):
        yield f'      "{name}": [\n'
        yield ",\n".join("        " + json.dumps(row) for row in hex_rows(matrix))
        yield "\n      ],\n"
    yield f'      "scale": {json.dumps(scale)},\n      "mask": {json.dumps(mask)}\n    }}\n  }}\n}}\n'


__all__ = ["ARB", "COMPENSATED", "FLOAT", "PATHS", "VERSION", "certificate_json", "compute_float64", "exact_decimal"]
