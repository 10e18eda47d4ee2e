"""``verify-certificate`` for versions 3 and 4 (:mod:`.tensor_maker`): the fast verifier, with numpy.

The certificate is read by the standalone verifier's own reader (:mod:`symattn.verifier.reading`: duplicate
keys, unknown fields and every form refused in one line), its files are found and hashed, and its spec read
back as ``compute`` reads it (:mod:`.files`; dO from the ``grad_output`` file), which must give exactly its
inputs. Then nothing the certificate says of a value is trusted: from its inputs the float64 engine
recomputes every float and bound (``float_tensors.evaluate``; the outputs of path "c" with the error-free
sums), and each value must be the rounding of every point of that interval; where the interval does not
decide it (path "a", or another machine's sums), the value is decided here again by the same exact rules
and arb balls as the maker's. The certificate's float ± bound must hold the recomputed one and be at most
BOUND_FACTOR times as wide. ``python -m symattn.verifier`` checks the same claims without numpy or the engine.

Version 3 was made by the engine before issue 30 corrected its split (its bounds could fail): it is
checked by the corrected engine like version 4, and where its float ± bound does not hold the corrected
engine's it is refused in one line (:data:`BEFORE`), since its numbers were never the corrected engine's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from symattn.certificates.float_digits import significant_many, text_lines, texts
from symattn.certificates.float_tensors import Tensors, build, compensate, decide_beyond, evaluate, place
from symattn.certificates.float_verifier import BOUND_FACTOR, encloses
from symattn.certificates.reader import Reader
from symattn.input.decimals import significant_exact
from symattn.input.errors import SpecError
from symattn.kernel import float64
from symattn.verifier import reading, values

BEFORE = (
    "3: made before symattn corrected its float64 engine (issue 30: the scores' split was one bit short, so "
    "a bound could fail); {place} does not hold the corrected engine's float ± bound: make it again"
)
WIDE = "wider than a certificate's bound may be"
CLAIM = (
    "each exact value lies in the certificate's float ± bound and in the interval recomputed here from the "
    "inputs (the float64 engine's float ± its bound, or an exact value, a double-word enclosure or an arb one "
    "found here), and every point of that interval rounds to the value shown"
)


def verify_tensors(data: Mapping[str, Any], read: Reader, base: Path | None):
    from symattn.certificates.files import bound, check_files
    from symattn.certificates.verification import Verification

    try:
        cert = reading.certificate(dict(data))
    except reading.CertificateError as exc:
        raise read.error(exc.key, exc.problem, exc.position) from None
    named = check_files(data["certificate"], read, base, extra=("grad_output",))
    t = cert.inputs
    rows = {
        name: np.array(getattr(t, name), dtype=np.float64)
        for name in ("Q", "K", "V", "dO")
        if getattr(t, name) is not None
    }
    allowed = None  # the reader let only rows of "1" and "0", all as long: their bytes, 16 million of them at 4096
    if t.mask is not None:
        allowed = np.frombuffer("".join(t.mask).encode("ascii"), dtype=np.uint8).reshape(len(t.mask), -1) == ord("1")
    logits, slopes = (None if x is None else tuple(x) for x in (t.logits, t.slopes))
    tensors = build(
        rows, t.batch, t.heads, t.kv_heads, t.layout, t.scale, allowed, logits, slopes, t.tanh_cap, t.cap_first
    )
    if tensors is None:
        raise read.error("certificate.inputs.scale", "beyond the float64 path's range (2^±900)")
    file_lines = named.lines
    if named.spec is not None:
        _bind(named, tensors, read, t.order_given)
        file_lines = bound(named)
        if tensors.gradients:
            file_lines += ("and its dO is the values of its grad_output file, read here",)
    output = cert.tables["output"].paths
    letters = _letters(output)
    sums = {code: list(zip(*(x.tolist() for x in np.nonzero(letters == code.encode())))) for code in "ca"}
    # and the "c" and "a" outputs again, by the error-free product; the output's digits checked there too
    values = evaluate(tensors, sums, cert.digits, _shown_right(cert.tables["output"], letters, cert.digits))
    failures: list[str] = list(named.failures)
    lines = []
    for name, table in cert.tables.items():
        tight = summed = known = right = None
        if name == "output":
            tight, summed, right = (sums["a"], *values["tight"]), (sums["c"], *values["summed"]), values["shown"]
            known = _made(sums["a"], *values["doubled"]) if "doubled" in values else None
        codes, (f, b) = letters if name == "output" else _letters(table.paths), values[name]
        failures += _check(tensors, table, codes, f, b, cert.digits, read, cert.version, tight, summed, known, right)
        counts = {code: int(np.count_nonzero(codes == code.encode())) for code in "fca"}
        by_sums = f", {counts['c']} by its error-free sums" if name == "output" else ""
        lines.append(f"{name}: {counts['f']} by the float64 path{by_sums}, {counts['a']} beyond (exact or arb)")
    checked = sum(len(table.paths) * table.shape[-1] for table in cert.tables.values())
    certified = reading.certifies(tuple(cert.tables), t)
    return Verification(checked, tuple(failures), tuple(file_lines), ("; ".join(lines),), CLAIM, certified)


def _check(
    tensors: Tensors,
    table: reading.Table,
    codes: np.ndarray,
    f,
    b,
    digits: int,
    read: Reader,
    version: int,
    tight: tuple | None,
    summed: tuple | None,
    known: dict | None = None,
    right: np.ndarray | None = None,
) -> list[str]:
    """One quantity's failures: each value against the engine's recomputed float ± bound (``f`` and ``b``; the
    outputs of "c" by ``summed``, their entries, floats and bounds by the error-free product, or where the
    certificate's does not hold that, by the error-free sums the maker used), then the values beyond it: the
    outputs first by ``tight`` (the same for "a"), the rest exactly or by arb; a version-3 value whose
    float ± bound does not hold the corrected engine's refuses the certificate (:data:`BEFORE`). Every bound
    is at most BOUND_FACTOR times the engine's first one (``b``: the chunked sums). ``codes``: the table's path
    letters (:func:`_letters`); ``right``: a flag per row whose values were all found shown right
    (:func:`_shown_right`, in the workers, its "a" values by their enclosures there; None: found here, where
    no "a" value is decided first): a row not flagged, or whose floats change here, is read value by value."""
    name = table.name
    f, b = f.reshape(len(table.paths), -1), b.reshape(len(table.paths), -1)
    f_cert, b_cert = np.array(table.floats, dtype=np.float64), np.array(table.bounds, dtype=np.float64)
    failures: list[tuple[int, int, str]] = []  # (row, column, line): sorted into the places' numeric order
    # a bound that wide would be true and say nothing (2^1000 holds any float): refuted, as a value that
    # does not round is (inputs changed where no file binds them make such bounds: both verifiers exit 1)
    for r, c in zip(*np.nonzero(np.isfinite(b_cert) & (b_cert > np.nextafter(BOUND_FACTOR * b, np.inf)))):
        r, c = int(r), int(c)
        line = (
            f"{place(tensors, name, r, c)}: the certificate's bound, {b_cert[r, c].hex()}, is more than "
            f"{BOUND_FACTOR:.5g} times the float64 path's own, {b[r, c].hex()} ({WIDE})"
        )
        failures.append((r, c, line))
    changed = np.zeros(len(table.paths), dtype=bool)  # rows whose floats change here, after the workers' flags
    if summed is not None and summed[0]:
        f, b = f.copy(), b.copy()
        rows, cols = (np.array(x) for x in zip(*summed[0]))
        f[rows, cols], b[rows, cols] = summed[1], summed[2]
        sure = _surely_held(f_cert[rows, cols], b_cert[rows, cols], f[rows, cols], b[rows, cols])
        out = [
            (r, c)
            for r, c, ok in zip(rows.tolist(), cols.tolist(), sure.tolist())
            if not ok and not _holds(f_cert, b_cert, f, b, r, c)
        ]
        if out:  # the error-free sums' own float ± bound, which the maker wrote, for these
            rows, cols = (np.array(x) for x in zip(*out))
            f[rows, cols], b[rows, cols] = compensate(tensors, out)
            changed[rows] = True
    for r, c in zip(*np.nonzero(~((f_cert == f) & (b_cert >= b) | _surely_held(f_cert, b_cert, f, b)))):
        r, c = int(r), int(c)
        if _holds(f_cert, b_cert, f, b, r, c):
            continue
        if version == 3:
            raise read.error("certificate.version", BEFORE.format(place=place(tensors, name, r, c)))
        failures.append(
            (
                r,
                c,
                f"{place(tensors, name, r, c)}: the certificate's float ± bound, {f_cert[r, c].hex()} ± "
                f"{b_cert[r, c].hex()}, does not hold the float64 path's {f[r, c].hex()} ± {b[r, c].hex()}",
            )
        )
    if right is None:  # no workers' flags (the LSE, the gradients): the same check, here
        right = _shown_right(table, codes, digits)(0, f, b)
    again = ~right | changed  # rows whose digits are read here, value by value
    beyond = []
    here = np.nonzero(again)[0]
    ok, q, e = significant_many(*float64.interval(f[here], b[here]), digits)
    ok &= codes[here] != b"a"
    # row by row, as the file holds them (a value out of form: the first one is named)
    for r, ok_row, q_row, e_row in zip(here.tolist(), ok.tolist(), q.tolist(), e.tolist()):
        row = table.values[r]
        made = texts(q_row, e_row)  # every value's text at once (a value left open: a text never compared)
        for c, shown in enumerate(row):
            if not ok_row[c] or shown != made[c] or type(shown) is not str:  # not as compute writes: one line
                _form(shown, name, r, c, digits, read)
            if not ok_row[c]:
                beyond.append((r, c))
            elif shown != made[c]:
                failures.append(
                    (
                        r,
                        c,
                        f"{place(tensors, name, r, c)}: {shown} is not the rounding of every point of the "
                        f"float64 path's interval, which rounds to {made[c]}",
                    )
                )
    decided = _tight(tight, beyond, digits) if tight is not None else {}
    decided |= decide_beyond(tensors, name, [x for x in beyond if x not in decided], digits, known)
    for r, c in beyond:
        shown = table.values[r][c]
        if (r, c) not in decided:
            failures.append((r, c, f"{place(tensors, name, r, c)}: not decided here at the most digits"))
        elif decided[(r, c)] != shown:
            failures.append(
                (r, c, f"{place(tensors, name, r, c)}: {shown}, but the exact value rounds to {decided[(r, c)]}")
            )
    return [line for *_, line in sorted(failures, key=lambda x: x[:2])]  # stable: one place's lines as found


def _shown_right(table: reading.Table, codes: np.ndarray, digits: int):
    """``shown(row, floats, bounds, decided)`` for evaluate: a flag for each of a block's rows (the table's,
    from ``row``), set where its every value is the one text that every point of its interval rounds to,
    those of path "a" by the texts ``decided`` holds for them ({(the block's row, column): text}, the ones
    the workers' tight or double-word enclosures decide; a row with any other is not flagged). A row not
    flagged is read by :func:`_check`, value by value."""

    def shown(first: int, f: np.ndarray, b: np.ndarray, decided: dict | None = None) -> np.ndarray:
        beyond = codes[first : first + len(f)] == b"a"
        ok, q, e = significant_many(*float64.interval(f, b), digits)
        flags = np.zeros(len(f), dtype=bool)
        rows = np.nonzero((ok | beyond).all(axis=1))[0]
        lines = text_lines(q[rows], e[rows], digits, beyond[rows])
        for i, line, blank in zip(rows.tolist(), lines, beyond[rows].any(axis=1).tolist()):
            row = table.values[first + i]
            if not _texts(row):
                continue
            if blank:  # its values of "a": each the text decided there, and a blank in the line
                places = np.nonzero(beyond[i])[0].tolist()
                if decided is None or any(decided.get((i, c)) != row[c] for c in places):
                    continue
                row = ["" if a else x for a, x in zip(beyond[i].tolist(), row)]
            try:
                flags[i] = (",".join(row) + ",").encode("ascii") == line
            except UnicodeEncodeError:  # not a text compute writes: read by _check, named there
                pass
        return flags

    return shown


def _texts(row: list) -> bool:
    """Every value a JSON text: a bare JSON number is read as a text of its digits (FloatText, a str
    subclass) and would equal the one shown; the reader names it (values.shown)."""
    return set(map(type, row)) == {str}


def _form(text: Any, name: str, r: int, c: int, digits: int, read: Reader) -> None:
    """A shown value's form, as the standalone verifier reads it (values.shown): else one line, exit 2."""
    try:
        values.shown(text, f"{name}.value", (r + 1, c + 1), digits)
    except reading.CertificateError as exc:
        raise read.error(exc.key, exc.problem, exc.position) from None


def _letters(paths: list[str]) -> np.ndarray:
    """The path letters as an array of one-byte texts (b"f", b"c", b"a"), a row per row (the reader has
    checked them: ASCII, one width)."""
    joined = np.frombuffer("".join(paths).encode("ascii"), dtype=np.uint8)
    return joined.view("S1").reshape(len(paths), -1)


def _surely_held(F: np.ndarray, B: np.ndarray, f: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where [f − b, f + b] ⊆ [F − B, F + B] surely: each end of a difference or sum rounded once lies between
    the floats beside it, so comparing the outer neighbours decides (False: not known here)."""
    with np.errstate(invalid="ignore", over="ignore"):
        low = np.nextafter(F - B, np.inf) <= np.nextafter(f - b, -np.inf)
        return low & (np.nextafter(f + b, np.inf) <= np.nextafter(F + B, -np.inf))


def _holds(f_cert: np.ndarray, b_cert: np.ndarray, f: np.ndarray, b: np.ndarray, r: int, c: int) -> bool:
    """The certificate's float ± bound at (r, c) holds the recomputed one, exactly (an infinite bound of the
    certificate holds anything, an infinite recomputed one only that)."""
    if not np.isfinite(b_cert[r, c]):
        return True
    return bool(np.isfinite(b[r, c])) and encloses(f_cert[r, c], b_cert[r, c], f[r, c], b[r, c])


def _tight(tight: tuple, beyond: list[tuple[int, int]], digits: int) -> dict[tuple[int, int], str]:
    """{(row, column): the value shown} of the entries in ``beyond`` whose tight interval (a float and a bound
    for each of ``tight``'s entries) rounds to one value at every point, shown as decide_beyond shows them:
    the exact value lies in it, so it rounds to that value too."""
    pairs, value, error = tight
    at = {key: p for p, key in enumerate(pairs)}
    asked = [key for key in beyond if key in at]
    if not asked:
        return {}
    where = np.array([at[key] for key in asked])
    lo, hi = float64.interval(value[where], error[where])
    ok, _, _ = significant_many(lo, hi, digits)
    return {
        key: str(significant_exact(Fraction(a), digits))
        for key, good, a in zip(asked, ok.tolist(), lo.tolist())
        if good
    }


def _made(pairs: list[tuple[int, int]], value: np.ndarray, error: np.ndarray) -> dict:
    """{(row, column): (value, bound)} of the double-word enclosures evaluate made (a NaN bound: none made)."""
    return {key: (v, e) for key, v, e in zip(pairs, value.tolist(), error.tolist()) if e == e}


def _bind(named: Any, mine: Tensors, read: Reader, order_given: bool) -> None:
    """The spec the certificate names, read back (and dO from its grad_output file): the certificate's
    inputs, value by value (``order_given``: the certificate holds tanh_cap_order)."""
    from symattn.certificates.tensor_maker import tensors_of

    extra = named.extra or {}
    given = tensors_of(named.spec, str(extra["grad_output"]) if "grad_output" in extra else None)
    spec = f"the spec {named.spec_shown}"
    key = "certificate.inputs."

    def other(name: str, ours: str, got: str, position: tuple[int, ...] = ()) -> SpecError:
        # dO is its grad_output file's; everything else (Q, K, V, the cap, the mask, …) the spec's
        theirs = f"the grad_output file {extra['grad_output']}" if name == "dO" else spec
        return read.error(
            key + name, f"{ours}, but {theirs} gives {got}: the certificate is not of its files", position
        )

    if mine.gradients != given.gradients:
        raise read.error(
            "certificate.files",
            "dO is given but no grad_output file is named" if mine.gradients else "a grad_output file, but no dO",
        )
    for name in ("batch", "query_heads", "kv_heads", "layout"):
        if getattr(mine, name) != getattr(given, name):
            field = {"query_heads": "heads"}.get(name, name)
            raise other(field, str(getattr(mine, name)), str(getattr(given, name)))
    for name in ("Q", "K", "V", "dO") if mine.gradients else ("Q", "K", "V"):
        a, z = mine.rows(name), given.rows(name)
        if a.shape != z.shape:
            raise other(name, "×".join(map(str, a.shape)), "×".join(map(str, z.shape)))
        if not np.array_equal(a, z):
            i, j = (int(x[0]) for x in np.nonzero(a != z))
            raise other(name, a[i, j].hex(), z[i, j].hex(), (i + 1, j + 1))
    for name, field in (("logits", "denominator_logits"), ("slopes", "bias_slopes")):
        a, z = getattr(mine, name), getattr(given, name)
        if a != z:
            ours, got = (json.dumps(None if x is None else list(map(float.hex, x))) for x in (a, z))
            raise other(field, ours, got)
    if mine.tanh_cap != given.tanh_cap:
        ours, got = (json.dumps(None if x is None else float.hex(x)) for x in (mine.tanh_cap, given.tanh_cap))
        raise other("tanh_cap", ours, got)
    if mine.cap_first != given.cap_first:  # the cap before or after the bias: each its own values
        ours, got = ('"before-bias"' if x else '"after-bias"' for x in (mine.cap_first, given.cap_first))
        if not order_given:  # what its absence means, not a value it holds
            ours = 'absent (a certificate without it means "after-bias", as those made before the field)'
        raise other("tanh_cap_order", ours, got)
    h, g = mine.heads[0], given.heads[0]
    if h.exact_scale != g.exact_scale:
        raise other("scale", str(h.exact_scale or '"sqrt"'), str(g.exact_scale or '"sqrt"'))
    mask, theirs_mask = (
        np.ones((x.Q.shape[0], x.K.shape[0]), bool) if x.allowed is None else x.allowed for x in (h, g)
    )
    if not np.array_equal(mask, theirs_mask):
        i, j = (int(x[0]) for x in np.nonzero(mask != theirs_mask))
        raise other("mask", "1" if mask[i, j] else "0", "1" if theirs_mask[i, j] else "0", (i + 1, j + 1))


__all__ = ["BEFORE", "CLAIM", "verify_tensors"]
