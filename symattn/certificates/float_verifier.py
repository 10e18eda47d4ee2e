"""Re-check a float64-path certificate (version 2, :mod:`symattn.certificates.float_maker`).

Nothing the certificate says about a value is trusted. From its inputs (float32 values, as ``float.hex``
text) this module recomputes every output's float and bound with :mod:`symattn.kernel.float64` (those of
path "c" with its error-free sums, :mod:`symattn.kernel.compensated`), and then for each value:

1. the certificate's float ± bound must hold the recomputed float ± bound (so a float moved past its bound,
   or a bound shrunk below the engine's, is caught; the maker's bound is three times the engine's, so
   a machine whose BLAS sums in another order still finds its own float ± bound inside), and be at most
   BOUND_FACTOR times as wide;
2. paths "f" and "c": every point of the recomputed interval rounds half-up to the value shown (numpy with a
   margin, :mod:`symattn.certificates.float_digits`; exact rationals inside the margin);
3. path "a": the enclosure given rounds to the value shown, and mpmath's interval of the exact output,
   from exact integer scores, lies inside it (the precision raised until it does), as
   :mod:`symattn.certificates.exact_verifier` checks every value of an exact-path certificate; a rational output
   (a row of equal scores) is checked exactly.

Every problem with the certificate's form is one line naming the file, the key and the position: an unknown
field, a ``paths`` table that miscounts ``output.path``, a bound wider than BOUND_FACTOR times the engine's,
inputs that are not the values of the spec it names (:mod:`symattn.checking.certificate_files`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from symattn.certificates.float_digits import MOST, significant_many, text
from symattn.certificates.float_maker import PATHS, PORTABLE
from symattn.certificates.reader import Reader, brief, count, kind_of, whole
from symattn.input import limits
from symattn.input.errors import LimitError, SpecError
from symattn.kernel import compensated, float64
from symattn.kernel.cores import map_forked

# every field a version-2 certificate may hold, as compute --certify --float64 writes them; any other is refused
FIELDS = ("d_k", "output", "certificate")
OUTPUT = ("value", "path", "float", "bound")
CERTIFICATE = ("version", "path", "method", "digits", "paths", "files", "enclosures", "inputs")
INPUTS = ("Q", "K", "V", "scale", "mask")
# the most a certificate's bound may be, in multiples of the float64 path's bound recomputed here: the maker
# writes 3·SAFETY times its own (certificates.float_maker.portable); another machine's bound differs by
# less than SAFETY (its sums of magnitudes rounded otherwise)
BOUND_FACTOR = PORTABLE * float64.SAFETY**2
CLAIM = (
    "each exact value lies in the interval recomputed here from the inputs (the float64 path's float ± its "
    "bound) or in its arb enclosure, and every point of that interval or enclosure rounds to the value shown"
)
PARALLEL_EXPS = 1 << 16  # rows × keys of the arb values' exps below which one process is quicker than two
HEX_LENGTH = 24  # float.hex of any float64: "-0x1.fffffffffffffp+1023"
START_BITS = 128
MAX_BITS = 1 << 12


def _is_hex(x: Any) -> bool:
    if not isinstance(x, str) or len(x) > HEX_LENGTH:
        return False
    try:
        v = float.fromhex(x)
    except (ValueError, OverflowError):
        return False
    return v.hex() == x and math.isfinite(v)


def _hex_matrix(read: Reader, raw: Any, key: str, rows: int | None, cols: int | None, what: str) -> np.ndarray:
    """Rows of float.hex texts as a float64 array; each text must be float.hex of its own value, finite."""
    if not isinstance(raw, list) or not raw:
        raise read.error(key, f"expected a list of rows of {what}, got {kind_of(raw)}")
    if rows is None and len(raw) > limits.FLOAT_CERTIFICATE_TOKENS:
        raise LimitError(read.source, key, f"{len(raw)} rows; the limit is {limits.FLOAT_CERTIFICATE_TOKENS}")
    if rows is not None and len(raw) != rows:
        raise read.error(key, f"{count(len(raw), 'row')}, but there are {rows}")
    width = cols
    out = []
    for i, row in enumerate(raw):
        if not isinstance(row, list) or not row:
            raise read.error(key, f"expected a list of entries, got {kind_of(row)}", (i + 1,))
        if width is None:
            if len(row) > limits.DIMS:
                raise LimitError(read.source, key, f"{len(row)} entries; the limit is {limits.DIMS}", (i + 1,))
            width = len(row)
        if len(row) != width:
            raise read.error(key, f"{count(len(row), 'entry')}, but there are {width}", (i + 1,))
        try:  # the whole row at once; the entry at fault is looked for only when there is one
            values = list(map(float.fromhex, row))
            good = list(map(float.hex, values)) == row and all(map(math.isfinite, values))
        except (TypeError, ValueError, OverflowError):
            good = False
        if not good:
            j = next(j for j, x in enumerate(row) if not _is_hex(x))
            raise read.error(key, f"expected {what} as float.hex writes it, got {brief(row[j])}", (i + 1, j + 1))
        out.append(values)
    return np.array(out, dtype=np.float64)


def _head(cert: Mapping[str, Any], read: Reader) -> float64.Head:
    inputs = cert.get("inputs")
    if not isinstance(inputs, Mapping):
        raise read.error("certificate.inputs", "missing: Q, K, V as float.hex, the scale and the mask")
    read.fields(inputs, "certificate.inputs", INPUTS, "a version-2 certificate's inputs")
    for name in ("Q", "K", "V", "scale", "mask"):
        if name not in inputs:
            raise read.error(f"certificate.inputs.{name}", "missing")
    key = "certificate.inputs."
    Q = _hex_matrix(read, inputs["Q"], key + "Q", None, None, "float32 values")
    K = _hex_matrix(read, inputs["K"], key + "K", None, Q.shape[1], "float32 values")
    V = _hex_matrix(read, inputs["V"], key + "V", K.shape[0], None, "float32 values")
    n, m, d = Q.shape[0], K.shape[0], Q.shape[1]
    if n * m * d > limits.FLOAT_CERTIFICATE_WORK:
        raise LimitError(
            read.source, key + "Q", f"{n}×{m}×{d} scores' work; the limit is {limits.FLOAT_CERTIFICATE_WORK}"
        )
    for name, a in (("Q", Q), ("K", K), ("V", V)):
        if not float64.is_float32(a):
            i, j = (int(x[0]) for x in np.nonzero(a.astype(np.float32).astype(np.float64) != a))
            raise read.error(
                key + name, f"{a[i, j].hex()} is not a float32 value: its products would round", (i + 1, j + 1)
            )
    scale = inputs["scale"]
    exact = None
    if scale != "sqrt":
        exact = read.number(scale, key + "scale", (), "exact")
        if exact <= 0:
            raise read.error(key + "scale", f"must be positive, got {brief(scale)}")
    allowed = None
    mask = inputs["mask"]
    if mask is not None:
        read.sized(mask, key + "mask", "row", (n, "query", key + "Q"))
        rows = []
        for i, row in enumerate(mask):
            if not isinstance(row, str) or len(row) != m or row.strip("01"):
                raise read.error(key + "mask", f"expected {m} characters 1 or 0, got {brief(row)}", (i + 1,))
            if "1" not in row:
                raise read.error(
                    key + "mask", "no key is allowed: softmax is undefined on a row without keys", (i + 1,)
                )
            rows.append(np.frombuffer(row.encode("ascii"), dtype=np.uint8) == ord("1"))
        allowed = np.array(rows)
    head = float64.head(Q, K, V, exact, allowed)
    if head is None:
        raise read.error(key + "scale", f"{brief(scale)} is beyond the float64 path's range (2^±900)")
    return head


def _recomputed(head: float64.Head) -> tuple[np.ndarray, np.ndarray]:
    """Every output's float and bound, by the float64 path, from the inputs alone."""
    value, error = np.empty((head.Q.shape[0], head.V.shape[1])), np.empty((head.Q.shape[0], head.V.shape[1]))
    for b in float64.blocks(head, weights=False):
        value[b.start : b.stop], error[b.start : b.stop] = b.output, b.output_error
    return value, error


def encloses(f: float, b: float, f2: float, b2: float) -> bool:
    """[f2 − b2, f2 + b2] ⊆ [f − b, f + b], exactly."""
    F, B, F2, B2 = (Fraction(x) for x in (f, b, f2, b2))
    return F - B <= F2 - B2 and F2 + B2 <= F + B


def verify_float64(data: Mapping[str, Any], cert: Mapping[str, Any], read: Reader, base: Path | None):
    from symattn.certificates.files import bound, check_files
    from symattn.certificates.verification import Verification
    from symattn.verifier import reading

    read.fields(data, "", FIELDS, "a version-2 certificate")
    read.fields(cert, "certificate", CERTIFICATE, "a version-2 certificate's certificate")
    if cert.get("path") != "float64":
        raise read.error("certificate.path", f'expected "float64", got {brief(cert.get("path"))}')
    if not isinstance(cert.get("method"), str) or len(cert["method"]) > 1000:
        raise read.error(
            "certificate.method", f"expected a text of up to 1000 characters, got {brief(cert.get('method'))}"
        )
    named = check_files(cert, read, base)
    head = _head(cert, read)
    file_lines = named.lines
    if named.spec is not None:
        _bind(named, head, read)
        file_lines = bound(named)
    n, dv = head.Q.shape[0], head.V.shape[1]
    if "d_k" in data and str(data["d_k"]) != str(head.Q.shape[1]):
        raise read.error(
            "d_k", f"{brief(data['d_k'])}, but certificate.inputs.Q has {count(head.Q.shape[1], 'column')}"
        )
    digits = whole(cert.get("digits"))
    if digits is None or not 1 <= digits <= MOST:
        raise read.error(
            "certificate.digits", f"expected a whole number from 1 to {MOST}, got {brief(cert.get('digits'))}"
        )
    output = data.get("output")
    if not isinstance(output, Mapping):
        raise read.error("output", f"expected a table of value, path, float and bound, got {kind_of(output)}")
    read.fields(output, "output", OUTPUT, "the output")
    for part in OUTPUT:
        if part not in output:
            raise read.error(f"output.{part}", "missing")
    queries, columns = (n, "query", "certificate.inputs.Q"), (dv, "column", "certificate.inputs.V")
    values = read.cells(output["value"], "output.value", (queries, columns))
    paths = read.sized(output["path"], "output.path", "row", queries)
    for i, p in enumerate(paths):
        if not isinstance(p, str) or len(p) != dv or p.strip("fca"):
            raise read.error(
                "output.path",
                f'expected {dv} characters "f" (float64), "c" (compensated) or "a" (arb), got {brief(p)}',
                (i + 1,),
            )
    f_cert = _hex_matrix(read, output["float"], "output.float", n, dv, "a float")
    b_cert = _hex_matrix(read, output["bound"], "output.bound", n, dv, "a bound")
    if (b_cert < 0).any():
        i, j = (int(x[0]) for x in np.nonzero(b_cert < 0))
        raise read.error("output.bound", f"must not be negative, got {b_cert[i, j].hex()}", (i + 1, j + 1))
    codes = np.array([list(p) for p in paths])
    arb, comp = codes == "a", codes == "c"
    _counts(cert, read, codes)
    enclosures = _enclosures(cert, read, arb, comp, n, dv)

    f, b = _recomputed(head)
    rows, cols = np.nonzero(comp)
    if rows.size:  # the values the error-free sums decided: theirs, recomputed
        f[rows, cols], b[rows, cols] = compensated.outputs(head, list(zip(rows.tolist(), cols.tolist())))
    _wide(read, b_cert, b)
    failures: list[str] = list(named.failures)
    holds = (f_cert == f) & (b_cert >= b)
    for i, k in zip(*np.nonzero(~holds)):
        i, k = int(i), int(k)
        if not encloses(f_cert[i, k], b_cert[i, k], f[i, k], b[i, k]):
            failures.append(
                f"output[{i + 1}][{k + 1}]: the certificate's float ± bound, {f_cert[i, k].hex()} ± "
                f"{b_cert[i, k].hex()}, does not hold the float64 path's {f[i, k].hex()} ± {b[i, k].hex()}"
            )
    lo, hi = float64.interval(f, b)
    ok, q, e = significant_many(lo, hi, digits)
    for i, (row, q_row, e_row, ok_row, arb_row) in enumerate(
        zip(values, q.tolist(), e.tolist(), ok.tolist(), arb.tolist())
    ):
        for k, shown in enumerate(row):
            if arb_row[k]:
                continue
            if ok_row[k] and shown == text(q_row[k], e_row[k]) and type(shown) is str:  # a text, not a number
                continue
            got = read.number(shown, "output.value", (i + 1, k + 1), "shown")
            if not _rounds(Fraction(lo[i, k]), Fraction(hi[i, k]), got, shown, digits):
                failures.append(
                    f"output[{i + 1}][{k + 1}]: {shown} is not the rounding of every point of the float64 path's "
                    f"[{lo[i, k].hex()}, {hi[i, k].hex()}] to {digits} digits"
                )
    failures += _arb_failures(head, values, enclosures, read, digits)
    arbs, comps = int(arb.sum()), int(comp.sum())
    lines = (
        f"{n * dv - arbs - comps} by the float64 path and {comps} by its error-free sums (their floats and bounds "
        f"recomputed here), {arbs} by arb",
    )
    said = reading.certifies(("output",), reading.Inputs(1, 1, 1, "bhnd", [], [], [], None, None, None))
    return Verification(n * dv, tuple(failures), tuple(file_lines), lines, CLAIM, said)


def _counts(cert: Mapping[str, Any], read: Reader, codes: np.ndarray) -> None:
    """``paths``: how many values each path decided, as ``output.path`` says."""
    raw = cert.get("paths")
    if not isinstance(raw, Mapping):
        raise read.error("certificate.paths", f"expected a table of float64, compensated and arb, got {kind_of(raw)}")
    read.fields(raw, "certificate.paths", tuple(PATHS), "the table of paths")
    for name, code in PATHS.items():
        got = int((codes == code).sum())
        if whole(raw.get(name)) != got:
            raise read.error(f"certificate.paths.{name}", f"{brief(raw.get(name))}, but output.path has {got}")


def _wide(read: Reader, b_cert: np.ndarray, b: np.ndarray) -> None:
    """Every bound of the certificate at most BOUND_FACTOR times the float64 path's own bound, recomputed here:
    a wider one would be true and say nothing (a bound of 2^1000 holds any float)."""
    wide = b_cert > np.nextafter(BOUND_FACTOR * b, np.inf)
    if wide.any():
        i, k = (int(x[0]) for x in np.nonzero(wide))
        raise read.error(
            "output.bound",
            f"{b_cert[i, k].hex()} is more than {BOUND_FACTOR:.5g} times the float64 path's own bound, "
            f"{b[i, k].hex()} (the most a certificate's bound may be)",
            (i + 1, k + 1),
        )


def _bind(named: Any, head: float64.Head, read: Reader) -> None:
    """The spec the certificate names, read back: one compute --certify --float64 covers, whose Q, K, V,
    scale and mask are the certificate's inputs, float by float."""
    from symattn.certificates.float_maker import float_head

    given = float_head(named.spec)
    theirs = f"the spec {named.spec_shown}"
    key = "certificate.inputs."

    def other(name: str, mine: str, got: str, position: tuple[int, ...] = ()) -> SpecError:
        return read.error(
            key + name, f"{mine}, but {theirs} gives {got}: the certificate is not of its files", position
        )

    for name in ("Q", "K", "V"):
        mine, got = getattr(head, name), getattr(given, name)
        if mine.shape != got.shape:
            raise other(name, "×".join(map(str, mine.shape)), "×".join(map(str, got.shape)))
        if not np.array_equal(mine, got):
            i, j = (int(x[0]) for x in np.nonzero(mine != got))
            raise other(name, mine[i, j].hex(), got[i, j].hex(), (i + 1, j + 1))
    if head.exact_scale != given.exact_scale:
        raise other("scale", _scale(head.exact_scale), _scale(given.exact_scale))
    n, m = head.Q.shape[0], head.K.shape[0]
    mask, given_mask = (np.ones((n, m), bool) if h.allowed is None else h.allowed for h in (head, given))
    if not np.array_equal(mask, given_mask):
        i, j = (int(x[0]) for x in np.nonzero(mask != given_mask))
        raise other("mask", "1" if mask[i, j] else "0", "1" if given_mask[i, j] else "0", (i + 1, j + 1))


def _scale(exact: Fraction | None) -> str:
    return '"sqrt"' if exact is None else str(exact)


def _rounds(lo: Fraction, hi: Fraction, shown: Fraction, text_: str, digits: int) -> bool:
    from decimal import Decimal

    from symattn.certificates.verification import round_significant

    if shown == 0:  # an exact zero is shown as "0" at any digits
        return lo == hi == 0
    if len(Decimal(text_).as_tuple().digits) != digits:
        return False
    return round_significant(lo, digits) == shown == round_significant(hi, digits)


def _enclosures(
    cert: Mapping[str, Any], read: Reader, arb: np.ndarray, comp: np.ndarray, n: int, dv: int
) -> dict[tuple[int, int], Any]:
    """{(i, k): (lo, hi) or the exact fraction}: one for each value of path "a", none for the others."""
    raw = cert.get("enclosures")
    key = "certificate.enclosures"
    if not isinstance(raw, list):
        raise read.error(key, f"expected a list of enclosures, got {kind_of(raw)}")
    if len(raw) > arb.size:
        raise LimitError(read.source, key, f"{len(raw)} enclosures for {arb.size} values")
    out: dict[tuple[int, int], Any] = {}
    for p, entry in enumerate(raw, 1):
        if not isinstance(entry, Mapping) or set(entry) not in ({"at", "bounds"}, {"at", "exact"}):
            raise read.error(key, "expected a table of at and bounds (or at and exact)", (p,))
        raw_at = entry["at"]
        i_at, k_at = (whole(x) for x in raw_at) if isinstance(raw_at, list) and len(raw_at) == 2 else (None, None)
        if i_at is None or k_at is None or not (1 <= i_at <= n and 1 <= k_at <= dv):
            raise read.error(f"{key}.at", f"expected [query, column] within {n}×{dv}, got {brief(raw_at)}", (p,))
        i, k = i_at - 1, k_at - 1
        if not arb[i, k]:
            raise read.error(
                f"{key}.at",
                f'output[{i + 1}][{k + 1}] has path "{"c" if comp[i, k] else "f"}": it has no enclosure',
                (p,),
            )
        if (i, k) in out:
            raise read.error(f"{key}.at", f"output[{i + 1}][{k + 1}] a second time", (p,))
        if "exact" in entry:
            out[(i, k)] = read.number(entry["exact"], f"{key}.exact", (p,), "exact")
        else:
            lo_t, hi_t = read.bounds(entry["bounds"], f"{key}.bounds", (p,))
            out[(i, k)] = (
                read.number(lo_t, f"{key}.bounds", (p,), "bound"),
                read.number(hi_t, f"{key}.bounds", (p,), "bound"),
            )
    missing = [(int(i), int(k)) for i, k in zip(*np.nonzero(arb)) if (int(i), int(k)) not in out]
    if missing:
        i, k = missing[0]
        raise read.error(key, f'output[{i + 1}][{k + 1}] has path "a" and no enclosure')
    return out


def _integers(a: np.ndarray) -> tuple[list[list[int]], int]:
    """a = ints · 2^-shift exactly (float32 values are dyadic)."""
    shift = 0
    nonzero = a[a != 0]
    if nonzero.size:
        _, e = np.frexp(nonzero)
        shift = max(0, 53 - int(e.min()))
    return [[int(x) for x in row] for row in np.ldexp(a, shift).tolist()], shift


def _fixed(man: int, exp: int, bits: int, up: bool) -> int:
    """man · 2^exp (an end of an mpmath interval, man ≥ 0) at 2^-bits, rounded down, or up."""
    shift = exp + bits
    if shift >= 0:
        return man << shift
    return -((-man) >> -shift) if up else man >> -shift


def _arb_failures(head: float64.Head, values, enclosures: dict, read: Reader, digits: int) -> list[str]:
    """Path "a": each enclosure rounds to its value and holds mpmath's interval of the exact output."""
    failures = []
    rows: dict[int, list[int]] = {}
    for (i, k), box in sorted(enclosures.items()):
        shown_text = values[i][k]
        shown = read.number(shown_text, "output.value", (i + 1, k + 1), "shown")
        lo, hi = box if isinstance(box, tuple) else (box, box)
        if lo > hi:
            failures.append(f"output[{i + 1}][{k + 1}]: the bounds are the wrong way round")
        elif not _rounds(lo, hi, shown, shown_text, digits):
            failures.append(
                f"output[{i + 1}][{k + 1}]: {shown_text} is not the rounding of every point of its enclosure"
            )
        else:
            rows.setdefault(i, []).append(k)
    work = [(i, {k: enclosures[(i, k)] for k in cols}) for i, cols in rows.items()]
    parallel = len(work) * head.K.shape[0] >= PARALLEL_EXPS
    cores = min(len(work), os.cpu_count() or 1) if parallel else 1
    # one process per core, rows dealt in turn; the lines sorted back into the order of the rows
    stripes = [work[c::cores] for c in range(cores)] if work else []
    parts = map_forked(_exact_rows, head, stripes, parallel)
    return failures + [line for _, _, line in sorted(x for part in parts for x in part)]


def _exact_rows(head: float64.Head, work: list[tuple[int, dict[int, Any]]]) -> list[tuple[int, int, str]]:
    """(row, column, line) of each failure among the given rows' enclosures {column: (lo, hi) or a fraction}:
    mpmath's exps at rising precision, integers for the sums."""
    from mpmath import iv
    from mpmath.libmp import from_int, mpf_exp, mpf_mul

    failures: list[tuple[int, int, str]] = []
    K, k_shift = _integers(head.K)
    V, v_shift = _integers(head.V)
    m = len(K)
    keys = np.array(K, dtype=object)  # Python integers: the scores exactly, in numpy's loop
    for i, boxes in work:
        (q,), q_shift = _integers(head.Q[i : i + 1])
        keep = [True] * m if head.allowed is None else head.allowed[i].tolist()
        scores = np.dot(keys, np.array(q, dtype=object)).tolist()
        allowed = [j for j in range(m) if keep[j]]
        flat = len({scores[j] for j in allowed}) == 1
        pending = []
        for k, box in sorted(boxes.items()):
            where = f"output[{i + 1}][{k + 1}]"
            # one value in the column (zeros, say): the output is that value, exactly, whatever the scores
            constant = len({V[j][k] for j in allowed}) == 1
            if flat or constant or not isinstance(box, tuple):  # equal scores: the output is the mean of V, exactly
                mean = Fraction(sum(V[j][k] for j in allowed), len(allowed) << v_shift)
                lo, hi = box if isinstance(box, tuple) else (box, box)
                if not flat and not constant:
                    failures.append(
                        (i, k, f"{where}: an exact fraction, but the row's scores differ: it is irrational")
                    )
                elif not lo <= mean <= hi:
                    failures.append((i, k, f"{where}: the exact value {mean} is outside its enclosure"))
                continue
            if box[0] == box[1]:
                failures.append(
                    (i, k, f"{where}: a bound of zero width needs a value known exactly, and this one is not")
                )
                continue
            pending.append(k)
        bits = START_BITS
        while pending and bits <= MAX_BITS:
            iv.prec = bits
            c = (
                1 / iv.sqrt(head.Q.shape[1])
                if head.exact_scale is None
                else iv.mpf(head.exact_scale.numerator) / head.exact_scale.denominator
            )
            c = c / iv.mpf(2) ** (q_shift + k_shift)
            # e^(c·(S_j − S_max)) ≤ 1, the shift exact in integers, each end at 2^-bits (floor and ceiling):
            # the sums are then exact integer sums, and the largest term is e^0 = 1 exactly
            top = max(scores[j] for j in allowed)
            c_lo, c_hi = c._mpi_  # c > 0 and S_j − S_max ≤ 0: z runs from (S_j − S_max)·c_hi to (S_j − S_max)·c_lo
            low, high = [], []
            for j in allowed:
                gap = from_int(scores[j] - top)  # exact: no precision given
                _, m0, x0, _ = mpf_exp(mpf_mul(gap, c_hi, bits, "f"), bits, "f")
                _, m1, x1, _ = mpf_exp(mpf_mul(gap, c_lo, bits, "c"), bits, "c")
                low.append(_fixed(m0, x0, bits, False))
                high.append(_fixed(m1, x1, bits, True))
            total_lo, total_hi = sum(low), sum(high)
            still = []
            for k in pending:
                lo, hi = boxes[k]
                column = [V[j][k] for j in allowed]
                n_lo = sum(v * (a if v > 0 else z) for v, a, z in zip(column, low, high))
                n_hi = sum(v * (z if v > 0 else a) for v, a, z in zip(column, low, high))
                # n / total over 2^v_shift, n in [n_lo, n_hi] and total in [total_lo, total_hi], total_lo ≥ 1
                a = Fraction(n_lo, (total_hi if n_lo >= 0 else total_lo) << v_shift)
                b = Fraction(n_hi, (total_lo if n_hi >= 0 else total_hi) << v_shift)
                if lo <= a and b <= hi:
                    continue
                if b < lo or a > hi:
                    failures.append((i, k, f"output[{i + 1}][{k + 1}]: the exact value is outside its enclosure"))
                else:
                    still.append(k)
            pending = still
            bits *= 2
        failures += [(i, k, f"output[{i + 1}][{k + 1}]: not decided at {MAX_BITS} bits") for k in pending]
    return failures


__all__ = ["verify_float64"]
