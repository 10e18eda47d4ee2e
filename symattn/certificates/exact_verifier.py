"""Re-check a certificate of ``symattn compute --certify`` independently of the engine that made it.

A certificate holds, for every value, the enclosure ``[lo, hi]`` that decided its digits,
and the inputs (Q, K, V as exact fractions, the scale, the mask). This module recomputes
attention from those inputs on its own: exact fractions for the scores, then mpmath's
interval arithmetic (``mpmath.iv``), not the fixed-point engine of ``numeric.py``, for √d_k,
every exp, sum, weight and output. For each value it proves two things:

1. the exact value lies in ``[lo, hi]``: mpmath's interval, which holds the exact value,
   lies inside it (the precision is raised until it does, or a bound is seen to be wrong);
2. every point of ``[lo, hi]`` rounds half-up to the shown value, at the shown significant
   digits: so the shown value is the exact value correctly rounded.

Rational values are also checked against their exact fraction.

Before any of that the certificate's shape is checked against its own inputs: every matrix has
exactly the shape Q, K and V imply, the mask has one true or false per score and no row without a
key, -inf and 0 stand exactly where the mask hides a key, and every number is a finite decimal no
longer than :data:`~symattn.input.limits.BOUND_LENGTH`, its length checked before it is matched or
converted. Every field is one the verifier knows (no closed forms: nothing here could check them), and
what the certificate says of itself (``digits``, ``precision_bits``, the labels, the projected Q, K, V) is
true of it. The files it names bind its inputs (:mod:`symattn.checking.certificate_files`): where the spec
is there, its values must be the inputs. Anything else is a one-line :class:`~symattn.input.errors.SpecError`.

That is version 1, which has no ``version`` field. Version 2, a float64-path certificate of the output
(``compute --certify --float64`` before version 3), is checked by :mod:`symattn.certificates.float_verifier`;
versions 3, 4 and 5 by :mod:`symattn.certificates.tensor_verifier`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from symattn.certificates.files import Named, bound, check_files
from symattn.certificates.reader import Reader, Value, brief, count, kind_of, whole
from symattn.certificates.verification import Verification, round_significant
from symattn.input import limits
from symattn.input.errors import SpecError

CHECKED = ("sqrt_dk", "scale", "scores", "scaled", "exp", "exp_sum", "weights", "output")
START_BITS = 128
MAX_BITS = 1 << 16

# every field a version-1 certificate may hold, as compute --certify writes them; any other is refused
FIELDS = ("tokens", "key_tokens", "Q", "K", "V", "mask", "d_k", *CHECKED, "certificate")
CERTIFICATE = ("version", "method", "precision_bits", "digits", "inputs", "rational", "files")
INPUTS = ("Q", "K", "V", "scale")
MASKED = {"scaled": "-inf", "exp": "0", "weights": "0"}  # each one's value at a key the mask hides
POSITIVE = ("sqrt_dk", "scale", "exp", "exp_sum", "weights")  # where the mask allows the key


def _shown_digits(text: str) -> int:
    return len(Decimal(text).as_tuple().digits)


class _Inputs:
    """Q, K, V, the scale and the mask, read and checked against one another."""

    def __init__(self, data: Mapping[str, Any], cert: Mapping[str, Any], read: Reader):
        inputs = cert.get("inputs")
        if not isinstance(inputs, Mapping):
            raise read.error("certificate.inputs", "missing: the exact Q, K, V and scale")
        read.fields(inputs, "certificate.inputs", INPUTS, "a certificate's inputs")
        self.Q = read.matrix(inputs, "Q")
        self.d_k = len(self.Q[0])
        self.K = read.matrix(inputs, "K", cols=(self.d_k, "column", "certificate.inputs.Q"))
        self.V = read.matrix(inputs, "V", rows=(len(self.K), "key", "certificate.inputs.K"))
        # the dimensions every other matrix is checked against
        self.queries = (len(self.Q), "query", "certificate.inputs.Q")
        self.keys = (len(self.K), "key", "certificate.inputs.K")
        self.columns = (len(self.V[0]), "column", "certificate.inputs.V")
        if "scale" not in inputs:
            raise read.error("certificate.inputs.scale", 'missing: "sqrt" or an exact number')
        scale = inputs["scale"]
        self.scale: Literal["sqrt"] | Fraction = "sqrt"
        if scale != "sqrt":
            self.scale = read.number(scale, "certificate.inputs.scale", (), "exact")
            if self.scale <= 0:
                raise read.error("certificate.inputs.scale", f"must be positive, got {brief(scale)}")
        if "d_k" in data and str(data["d_k"]) != str(self.d_k):
            raise read.error("d_k", f"{brief(data['d_k'])}, but certificate.inputs.Q has {count(self.d_k, 'column')}")
        if "mask" not in data:
            raise read.error("mask", "missing: one true or false per score, a row per query")
        self.mask = read.cells(data["mask"], "mask", (self.queries, self.keys))
        for i, row in enumerate(self.mask):
            for j, allowed in enumerate(row):
                if not isinstance(allowed, bool):
                    raise read.error("mask", f"expected true or false, got {brief(allowed)}", (i + 1, j + 1))
            if not any(row):
                raise read.error("mask", "no key is allowed: softmax is undefined on a row without keys", (i + 1,))

    def enclosures(self, prec: int) -> dict[str, Any]:
        """mpmath intervals of every value, and ``known``: the values this module knows exactly, by structure."""
        from mpmath import iv

        iv.prec = prec
        n, m, dv = len(self.Q), len(self.K), len(self.V[0])

        def ivf(x: Fraction):
            return iv.mpf(x.numerator) / x.denominator

        scores = [[sum((a * b for a, b in zip(q, k)), Fraction(0)) for k in self.K] for q in self.Q]
        root = _exact_root(self.d_k)
        sqrt_dk = iv.sqrt(self.d_k)
        c_exact = (None if root is None else 1 / Fraction(root)) if self.scale == "sqrt" else self.scale
        c = (1 / sqrt_dk) if c_exact is None else ivf(c_exact)
        known: dict[str, Sequence[Sequence[Fraction | None]]] = {
            "sqrt_dk": [[None if root is None else Fraction(root)]],
            "scale": [[c_exact]],
            "scores": scores,
        }
        scaled, exps, sums, weights, outputs = [], [], [], [], []
        k_scaled, k_exp, k_sum, k_weights, k_out = [], [], [], [], []
        for i in range(n):
            allowed = [j for j in range(m) if self.mask[i][j]]
            z = [ivf(scores[i][j]) * c if self.mask[i][j] else None for j in range(m)]
            e = [iv.exp(x) if x is not None else iv.mpf(0) for x in z]
            total = sum(e[1:], e[0])
            w = [x / total for x in e]
            scaled.append(z)
            exps.append(e)
            sums.append([total])
            weights.append(w)
            outputs.append([sum((w[j] * ivf(self.V[j][k]) for j in range(m)), iv.mpf(0)) for k in range(dv)])
            # exactly known, by Lindemann–Weierstrass: e^z is rational only at z = 0
            zs = [None if c_exact is None and scores[i][j] != 0 else scores[i][j] * (c_exact or 0) for j in range(m)]
            k_scaled.append(zs)
            ke = [(Fraction(1) if zs[j] == 0 else None) if self.mask[i][j] else Fraction(0) for j in range(m)]
            k_exp.append(ke)
            ke_known = [x for x in ke if x is not None]
            k_sum.append([sum(ke_known, Fraction(0)) if len(ke_known) == len(ke) else None])
            groups: dict[Fraction, list[int]] = {}
            for j in allowed:
                groups.setdefault(scores[i][j], []).append(j)
            flat = len(groups) == 1 or c_exact == 0
            kw = [(Fraction(1, len(allowed)) if flat else None) if self.mask[i][j] else Fraction(0) for j in range(m)]
            k_weights.append(kw)
            row_out: list[Fraction | None] = []
            for k in range(dv):
                means = {sum((self.V[j][k] for j in g), Fraction(0)) / len(g) for g in groups.values()}
                row_out.append(means.pop() if flat or len(means) == 1 else None)
            k_out.append(row_out)
        known.update(scaled=k_scaled, exp=k_exp, exp_sum=k_sum, weights=k_weights, output=k_out)
        return {
            "sqrt_dk": [[sqrt_dk]],
            "scale": [[c]],
            "scores": [[ivf(x) for x in row] for row in scores],
            "scaled": scaled,
            "exp": exps,
            "exp_sum": sums,
            "weights": weights,
            "output": outputs,
            "known": known,
        }


def _labels_and_projections(data: Mapping[str, Any], inputs: _Inputs, read: Reader) -> None:
    """The token labels, one per query (and key); the projected Q, K and V that compute shows: the inputs."""
    for key, dim in (("tokens", inputs.queries), ("key_tokens", inputs.keys)):
        if key in data:
            for n, label in enumerate(read.sized(data[key], key, "label", dim), 1):
                if not isinstance(label, str) or len(label) > limits.LABEL:
                    raise read.error(
                        key, f"expected a label of up to {limits.LABEL} characters, got {brief(label)}", (n,)
                    )
    for name in ("Q", "K", "V"):
        if name not in data:
            continue
        entry = data[name]
        if not isinstance(entry, Mapping) or "exact" not in entry:
            raise read.error(name, f"expected a table with exact (the projected {name}), got {kind_of(entry)}")
        read.fields(entry, name, ("exact",), f"the projected {name}")
        mine = getattr(inputs, name)
        rows = (len(mine), "row", f"certificate.inputs.{name}")
        cols = (len(mine[0]), "column", f"certificate.inputs.{name}")
        for i, row in enumerate(read.cells(entry["exact"], f"{name}.exact", (rows, cols))):
            for j, text in enumerate(row):
                if read.number(text, f"{name}.exact", (i + 1, j + 1), "exact") != mine[i][j]:
                    raise read.error(
                        f"{name}.exact",
                        f"{brief(text)}, but certificate.inputs.{name} has {mine[i][j]}",
                        (i + 1, j + 1),
                    )


def _digits_and_bits(cert: Mapping[str, Any], values: list[Value], read: Reader) -> None:
    """``digits``: every value shown (but 0 and -inf) has that many significant digits; ``precision_bits``: the
    finest binary point of the bounds. Both are what the certificate says of itself, so both are checked."""
    from symattn.derivation.intermediates import MAX_DIGITS

    digits = whole(cert.get("digits"))
    if digits is None or not 1 <= digits <= MAX_DIGITS:
        raise read.error(
            "certificate.digits", f"expected a whole number from 1 to {MAX_DIGITS}, got {brief(cert.get('digits'))}"
        )
    bits = 0
    for v in values:
        if v.shown is None or v.bounds is None:
            continue
        if v.shown != 0 and _shown_digits(v.text) != digits:
            position = (v.row + 1, v.col + 1)[: v.where.count("[")]
            raise read.error(
                f"{v.name}.value", f"{brief(v.text)} has not the {digits} digits of certificate.digits", position
            )
        bits = max(bits, v.bounds[0].denominator.bit_length() - 1)
    if "precision_bits" in cert and whole(cert["precision_bits"]) != bits:
        raise read.error(
            "certificate.precision_bits",
            f"{brief(cert['precision_bits'])}, but the finest binary point of the bounds is {bits} bits",
        )


def _bind(named: Named, inputs: _Inputs, data: Mapping[str, Any], read: Reader) -> None:
    """The spec the certificate names, read back: one compute --certify covers, whose Q, K, V (projected),
    scale, mask and labels are the certificate's, value by value."""
    from symattn.certificates.exact_maker import certified_head

    spec = named.spec
    certified_head(spec)
    theirs = f"the spec {named.spec_shown}"
    for name in ("Q", "K", "V"):
        mine, given = getattr(inputs, name), getattr(spec, name)
        key = f"certificate.inputs.{name}"
        if (len(mine), len(mine[0])) != (len(given), len(given[0])):
            raise _other(read, key, f"{len(mine)}×{len(mine[0])}", theirs, f"{len(given)}×{len(given[0])}")
        for i, (row, given_row) in enumerate(zip(mine, given)):
            for j, (x, y) in enumerate(zip(row, given_row)):
                if x != y.value:
                    raise _other(read, key, str(x), theirs, str(y.value), (i + 1, j + 1))
    scale = "sqrt" if spec.scale == "sqrt" else Fraction(1) if spec.scale == "none" else spec.scale.value
    if inputs.scale != scale:
        raise _other(read, "certificate.inputs.scale", str(inputs.scale), theirs, str(scale))
    for i, row in enumerate(inputs.mask):
        for j, allowed in enumerate(row):
            if allowed != (spec.allowed is None or spec.allowed[i][j]):
                raise _other(read, "mask", str(allowed).lower(), theirs, str(not allowed).lower(), (i + 1, j + 1))
    for key, given in (("tokens", spec.tokens), ("key_tokens", spec.key_tokens)):
        if list(data.get(key, given)) != list(given):
            raise read.error(key, f"not the labels {theirs} gives: the certificate is not of its files")


def _other(read: Reader, key: str, mine: str, theirs: str, given: str, position: tuple[int, ...] = ()) -> SpecError:
    return read.error(key, f"{mine}, but {theirs} gives {given}: the certificate is not of its files", position)


def _exact_root(n: int) -> int | None:
    from math import isqrt

    r = isqrt(n)
    return r if r * r == n else None


def _ends(x: Any) -> tuple[Fraction, Fraction]:
    """The ends of an mpmath interval, exactly: each a raw binary float (sign, mantissa, exponent, bits)."""

    def exact(end: tuple) -> Fraction:
        sign, man, exp, _ = end
        if not man and exp:  # ±infinity (or NaN): no finite bound
            raise OverflowError
        return Fraction(-man if sign else man) * Fraction(2) ** exp

    lo, hi = x._mpi_
    return exact(lo), exact(hi)


def _values(data: Mapping[str, Any], cert: Mapping[str, Any], inputs: _Inputs, read: Reader) -> list[Value]:
    """Every shown value with its bounds, each quantity shaped as the inputs imply."""
    rational = cert.get("rational")
    rational = {} if rational is None else rational
    if not isinstance(rational, Mapping):
        raise read.error("certificate.rational", f"expected a table, got {kind_of(rational)}")
    read.fields(rational, "certificate.rational", CHECKED, "the table of rationals")
    shapes: dict[str, tuple[tuple[int, str, str], ...]] = {
        "sqrt_dk": (),
        "scale": (),
        "exp_sum": (inputs.queries,),
        "output": (inputs.queries, inputs.columns),
    }
    out = []
    for name in CHECKED:
        if name not in data:
            raise read.error(name, "missing: compute --certify gives every quantity, with its bounds")
        entry = data[name]
        if not isinstance(entry, Mapping):
            raise read.error(name, f"expected a table with value and bounds, got {kind_of(entry)}")
        read.fields(entry, name, ("value", "bounds"), "each quantity")
        for part in ("value", "bounds"):
            if part not in entry:
                raise read.error(f"{name}.{part}", "missing")
        shape = shapes.get(name, (inputs.queries, inputs.keys))
        values = read.cells(entry["value"], f"{name}.value", shape)
        bounds = read.cells(entry["bounds"], f"{name}.bounds", shape)
        exacts = (
            read.cells(rational[name], f"certificate.rational.{name}", shape)
            if rational.get(name) is not None
            else None
        )
        for i, row in enumerate(values):
            for j, text in enumerate(row):
                position = (i + 1, j + 1)[: len(shape)]
                out.append(
                    _value(
                        read, inputs, name, i, j, position, text, bounds[i][j], None if exacts is None else exacts[i][j]
                    )
                )
    return out


def _value(
    read: Reader,
    inputs: _Inputs,
    name: str,
    i: int,
    j: int,
    position: tuple[int, ...],
    text: Any,
    bound: Any,
    exact: Any,
) -> Value:
    where = name + "".join(f"[{p}]" for p in position)
    lo_text, hi_text = read.bounds(bound, f"{name}.bounds", position)
    hidden = name in MASKED and not inputs.mask[i][j]
    if hidden:
        expected = MASKED[name]
        if text != expected:
            raise read.error(
                f"{name}.value", f"expected {expected!r} where the mask is false, got {brief(text)}", position
            )
        if (lo_text, hi_text) != (expected, expected):
            raise read.error(
                f"{name}.bounds",
                f"expected [{expected!r}, {expected!r}] where the mask is false, "
                f"got [{brief(lo_text)}, {brief(hi_text)}]",
                position,
            )
        if expected == "-inf":
            if exact is not None:
                raise read.error(
                    f"certificate.rational.{name}",
                    f"expected null where the value is -inf, got {brief(exact)}",
                    position,
                )
            return Value(name, i, j, where, text, None, None, (lo_text, hi_text), None)
    for part, raw in (("value", text), ("bounds", lo_text), ("bounds", hi_text)):
        if raw == "-inf":
            raise read.error(
                f"{name}.{part}",
                "-inf where the mask is true"
                if name in MASKED
                else "-inf, but only scaled is -inf, and only where the mask is false",
                position,
            )
    shown = read.number(text, f"{name}.value", position, "shown")
    lo = read.number(lo_text, f"{name}.bounds", position, "bound")
    hi = read.number(hi_text, f"{name}.bounds", position, "bound")
    if name in POSITIVE and not hidden and shown <= 0:
        raise read.error(
            f"{name}.value",
            f"must be positive{' where the mask is true' if name in MASKED else ''}, got {brief(text)}",
            position,
        )
    known = None if exact is None else read.number(exact, f"certificate.rational.{name}", position, "exact")
    return Value(name, i, j, where, text, shown, (lo, hi), (lo_text, hi_text), known)


def verify(data: Mapping[str, Any], source: str = "<certificate>", base: Path | None = None) -> Verification:
    """Re-check every value of a certificate (the JSON of ``compute --certify``; ``source`` names it in errors).

    A certificate whose shape or numbers do not fit its own inputs raises :class:`SpecError` before
    anything is computed; values that are merely wrong come back as ``failures``.
    """
    cert = data.get("certificate") if isinstance(data, Mapping) else None
    if not isinstance(cert, Mapping):
        raise SpecError(source, "certificate", "missing: not the output of symattn compute --certify")
    read = Reader(source)
    raw = cert.get("version", 1)  # version 1 (the exact path) had no version field
    version = whole(raw)
    if version == 2:
        from symattn.certificates.float_verifier import verify_float64

        return verify_float64(data, cert, read, base)
    if version in (3, 4, 5):
        from symattn.certificates.tensor_verifier import verify_tensors

        return verify_tensors(data, read, base)
    if version != 1:
        raise read.error("certificate.version", f"{brief(raw)}: this symattn reads versions 1 to 5")
    read.fields(data, "", FIELDS, "a version-1 certificate")
    read.fields(cert, "certificate", CERTIFICATE, "a version-1 certificate's certificate")
    named = check_files(cert, read, base)
    inputs = _Inputs(data, cert, read)
    _labels_and_projections(data, inputs, read)
    values = _values(data, cert, inputs, read)
    _digits_and_bits(cert, values, read)
    file_lines = named.lines
    if named.spec is not None:
        _bind(named, inputs, data, read)
        file_lines = bound(named)
    failures: list[str] = list(named.failures)
    pending: list[tuple[str, int, int, Fraction, Fraction, str]] = []
    checked = 0
    for v in values:
        if v.bounds is None:  # -inf at a key the mask hides, as the mask says
            checked += 1
            continue
        lo, hi = v.bounds
        digits = _shown_digits(v.text)
        if lo > hi:
            failures.append(f"{v.where}: the bounds are the wrong way round")
        elif round_significant(lo, digits) != v.shown or round_significant(hi, digits) != v.shown:
            failures.append(
                f"{v.where}: {v.text} is not the rounding of every point of [{v.bound_text[0]}, {v.bound_text[1]}]"
            )
        else:
            pending.append((v.name, v.row, v.col, lo, hi, v.where))
        if v.exact is not None and not lo <= v.exact <= hi:
            failures.append(f"{v.where}: the exact fraction {v.exact} is outside the bounds")
    bits = START_BITS
    while pending and bits <= MAX_BITS:
        boxes = inputs.enclosures(bits)
        still = []
        for name, i, j, lo, hi, where in pending:
            known = boxes["known"][name][i][j]
            if known is not None:  # exactly known here too (scores, exp 0, masked keys, flat rows)
                if lo <= known <= hi:
                    checked += 1
                else:
                    failures.append(f"{where}: the exact value {known} is outside [{lo}, {hi}]")
                continue
            if lo == hi:
                failures.append(f"{where}: a bound of zero width needs a value known exactly, and this one is not")
                continue
            try:
                a, b = _ends(boxes[name][i][j])
            except OverflowError:
                still.append((name, i, j, lo, hi, where))
                continue
            if lo <= a and b <= hi:
                checked += 1
            elif b < lo or a > hi:
                failures.append(f"{where}: the exact value is outside [{lo}, {hi}]")
            else:
                still.append((name, i, j, lo, hi, where))
        pending = still
        bits *= 2
    failures += [f"{where}: not decided at {MAX_BITS} bits" for *_, where in pending]
    return Verification(checked, tuple(failures), tuple(file_lines))


__all__ = ["verify"]
