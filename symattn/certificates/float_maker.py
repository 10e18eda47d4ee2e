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
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

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


BLOCK = float64.BLOCK // 2  # query rows the certificate works on at once
PORTABLE = 3  # a certificate's bound, in multiples of the engine's (times SAFETY; see portable)


def portable(error: np.ndarray) -> np.ndarray:
    """The bound a certificate holds: three times the engine's, rounded up.

    Another machine's BLAS may sum in another order: its float f′ is within b + b′ of ours, and its own
    bound b′ is ours up to the rounding of the magnitudes' sums (SAFETY covers that), so its f′ ± b′ lies
    inside f ± 3b and the certificate verifies there too. The digits are decided on f ± b.
    """
    return np.nextafter(PORTABLE * float64.SAFETY * error, np.inf)


def compute_float64(spec, digits: int, folder: str | Path | None = None) -> Iterator[str]:
    """``compute --certify --float64``: the certificate of one head whose inputs are float32 values; its file
    paths relative to ``folder``, where it will lie (None: the spec's folder)."""
    from symattn.input.errors import SpecError
    from symattn.input.sources import hashes, spec_sources

    if not 1 <= digits <= MOST:
        raise SpecError(spec.source, None, f"--float64 shows 1 to {MOST} significant digits (--digits), not {digits}")
    return certificate_json(float_head(spec), digits, hashes(spec_sources(spec, folder)))


def float_head(spec) -> float64.Head:
    """The one head a float64-path certificate is of; anything else is refused in one line. The verifier asks
    the same of the spec a certificate names."""
    from symattn import variants
    from symattn.input.errors import SpecError
    from symattn.kernel.heads import heads_of

    heads = heads_of(spec, "output")
    if heads is None or len(heads) != 1 or float64.extras(heads[0]) != (None, ()):
        raise SpecError(
            spec.source,
            None,
            "--float64 covers one head whose Q, K and V are float32 values, without projections, W_O, "
            + variants.float64_words(rules=False),
        )
    return heads[0]


def certificate_json(head: float64.Head, digits: int, files: list[dict[str, str]]) -> Iterator[str]:
    """The certificate of ``head``'s output as JSON text, in pieces (one key per line, as compute writes).

    Each table of ``output`` goes to disk as its text, a row a line, block by block as the work finds it, and
    is read back as it is written out (the arb values filled in), so that nothing of n × d_v values stays in
    memory: at 8192 × 1024 they were gigabytes of strings.
    """
    from symattn.kernel.refine import refine

    if not 1 <= digits <= MOST:
        raise ValueError(f"the float64 path shows 1 to {MOST} significant digits, not {digits}")
    n = head.Q.shape[0]
    spools = {key: tempfile.TemporaryFile() for key in ("value", "path", "float", "bound")}
    counts = dict.fromkeys(PATHS.values(), 0)
    open_rows: dict[int, list[int]] = {}  # the values neither float64 bound decides: {query: [columns]}
    split = float64.Split.of(head.K)  # made once for the blocks and the compensated sums
    # half the engine's blocks: its chunked sums take 190 MB a block at 8192 × 1024 (the same values, a row
    # is a row whatever block holds it)
    for b in float64.blocks(head, weights=False, block=BLOCK, split=split):
        value, error = b.output.copy(), b.output_error.copy()
        ok, q, e = significant_many(*float64.interval(value, error), digits)
        path = np.where(ok, FLOAT, ARB)
        rows, cols = np.nonzero(~ok)
        if rows.size:  # the sums again, error-free: a bound about ten times tighter
            pairs = list(zip((rows + b.start).tolist(), cols.tolist()))
            v2, e2 = compensated.outputs(head, pairs, split)
            ok2, q2, x2 = significant_many(*float64.interval(v2, e2), digits)
            value[rows, cols], error[rows, cols] = (
                np.where(ok2, v2, value[rows, cols]),
                np.where(ok2, e2, error[rows, cols]),
            )
            q[rows, cols], e[rows, cols] = np.where(ok2, q2, q[rows, cols]), np.where(ok2, x2, e[rows, cols])
            path[rows[ok2], cols[ok2]] = COMPENSATED
        for i, (row_path, row_q, row_e) in enumerate(zip(path.tolist(), q.tolist(), e.tolist()), b.start):
            _line(spools["value"], [text(x, y) if p != ARB else "" for p, x, y in zip(row_path, row_q, row_e)])
            _line(spools["path"], "".join(row_path))
            if ARB in row_path:
                open_rows[i] = [k for k, p in enumerate(row_path) if p == ARB]
        for row in value.tolist():
            _line(spools["float"], [float.hex(x) for x in row])
        for row in portable(error).tolist():
            _line(spools["bound"], [float.hex(x) for x in row])
        for code in counts:
            counts[code] += int((path == code).sum())
    del split
    found: dict[tuple[int, int], tuple[Fraction, Fraction]] = {}

    def keep(i: int, k: int, a: Fraction, z: Fraction) -> bool:
        found[(i, k)] = (a, z)  # the last call for an entry is the one that decided it
        return True

    arb: dict[tuple[int, int], str] = {}  # the arb values' text
    if open_rows:  # one call for all: its integer matrices are made once
        # an exact 0 that only exact/zeros.py proves is left open: the verifier would not accept it
        done, _ = refine(head, "output", open_rows, keep, digits, prove_zeros=False, two_floats=False)
        arb = {key: str(shown) for key, (_, shown) in done.items()}
    enclosures = []
    for (i, k), (a, z) in sorted(found.items()):
        at = [i + 1, k + 1]
        # a row of equal scores has a rational output (refine knows it exactly): the fraction itself
        enclosures.append(
            {"at": at, "exact": str(a)} if a == z else {"at": at, "bounds": [exact_decimal(a), exact_decimal(z)]}
        )

    def spooled(key: str) -> Iterator[str]:
        with spools[key] as spool:
            spool.seek(0)
            for i, raw in enumerate(spool):
                line = raw.decode().rstrip("\n")
                if key == "value" and i in open_rows:  # the arb values, found after the row was written
                    row = json.loads(line)
                    for k in open_rows[i]:
                        row[k] = arb.get((i, k), "")
                    line = json.dumps(row)
                yield line

    yield "{\n"
    yield f'  "d_k": {head.Q.shape[1]},\n'
    yield '  "output": {\n'
    for key in spools:
        yield f"    {json.dumps(key)}: [\n"
        for done, line in enumerate(spooled(key), 1):
            yield "      " + line + (",\n" if done < n else "\n")
        yield "    ]" + (",\n" if key != "bound" else "\n")
    yield "  },\n"
    scale = "sqrt" if head.exact_scale is None else str(head.exact_scale)
    mask = None if head.allowed is None else ["".join("1" if x else "0" for x in row) for row in head.allowed.tolist()]
    cert = {
        "version": VERSION,
        "path": "float64",
        "method": METHOD,
        "digits": digits,
        "paths": {name: counts[code] for name, code in PATHS.items()},
        "files": files,
        "enclosures": enclosures,
    }
    yield '  "certificate": {\n'
    yield ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in cert.items()) + ",\n"
    yield '    "inputs": {\n'
    for name, matrix in (("Q", head.Q), ("K", head.K), ("V", head.V)):
        yield f'      "{name}": [\n'
        for i, row in enumerate(matrix.tolist()):
            yield "        " + json.dumps([float.hex(x) for x in row]) + (",\n" if i + 1 < len(matrix) else "\n")
        yield "      ],\n"
    yield f'      "scale": {json.dumps(scale)},\n      "mask": {json.dumps(mask)}\n    }}\n  }}\n}}\n'


def _line(spool: IO[bytes], row: Any) -> None:
    """One row of a table as its JSON text, a line of the spool."""
    spool.write((json.dumps(row) + "\n").encode())


__all__ = [
    "ARB",
    "COMPENSATED",
    "PORTABLE",
    "FLOAT",
    "PATHS",
    "VERSION",
    "certificate_json",
    "compute_float64",
    "exact_decimal",
    "float_head",
]
