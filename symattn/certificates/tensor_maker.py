"""Versions 4 and 5 of ``compute --certify --float64``: the output, the log-sum-exp in both bases and, for a dO
given with ``--grad-output``, dQ, dK and dV, of one head or of every (batch, head) with grouped-query heads.
Version 4 is version 3's format, its floats and bounds by the engine as issue 30 corrected it; version 5,
made from PACKED_FROM values on, is version 4 with every table's floats and bounds and the inputs packed
(base64 of little-endian binary64 and binary32 values: reading them as float.hex texts was most of the
verifiers' time at 4096 × 4096 × 128).

Each quantity is a table of the tensor's values shown to ``digits`` significant digits, a row per line of
its last axis (``float_tensors``), with for each value its path ("f": every point of the float64 engine's
float ± bound rounds to it; "c", outputs only: the same with error-free sums; "a": beyond both, decided
exactly by the rules docs/kernel.md gives, or by arb balls), its float and its bound (PORTABLE times the
engine's: ``float_maker.portable``). The inputs are rows in (batch, head, token) order.
Nothing else: the verifiers recompute every enclosure themselves.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from symattn import variants
from symattn.certificates.float_digits import MOST, significant_many, text
from symattn.certificates.float_maker import COMPENSATED, FLOAT, PATHS, portable
from symattn.certificates.float_tensors import Tensors, build, compensate, decide_beyond, evaluate, place
from symattn.input.errors import ShapeError, SpecError
from symattn.kernel import float64

VERSION = 4  # 3 was made before the float64 engine's split was corrected (issue 30): docs/kernel.md
PACKED = 5  # version 4 with its float matrices packed
PACKED_FROM = 1 << 16  # values in the tables: from here on a float.hex text of each float is packed
ARB = "a"
METHOD = (
    "float64 with a rigorous a-priori bound of each value's error (symattn.kernel.float64, logsumexp, "
    "float64_backward), error-free sums for the outputs it leaves open (symattn.kernel.compensated), then "
    "exact values where the rules of docs/kernel.md know them and arb balls for the rest"
)
COVERS = (
    "--float64 covers Q, K and V of float32 values (float16 and bfloat16 ones are), one head or (batch, head) "
    f"files with grouped-query heads, without projections, W_O, {variants.float64_words(rules=False, certified=True)}"
)


def compute_tensors(spec, digits: int, folder: str | Path | None, grad_output: str | None) -> Iterator[str]:
    """``compute --certify --float64``: the certificate of the spec's heads (and of dO's gradients, with
    ``grad_output``), its file paths relative to ``folder``."""
    from symattn.input.sources import hashes, relative_inside, spec_sources

    if not 1 <= digits <= MOST:
        raise SpecError(spec.source, None, f"--float64 shows 1 to {MOST} significant digits (--digits), not {digits}")
    tensors = tensors_of(spec, grad_output)
    sources = spec_sources(spec, folder)
    if grad_output is not None:
        base = Path(Path(spec.source).parent if folder is None else folder)
        sources.append(("grad_output", relative_inside(grad_output, base), grad_output))
    return within_limit(certificate_json(tensors, digits, hashes(sources)), spec.source)


def within_limit(parts: Iterator[str], source: str) -> Iterator[str]:
    """The certificate's pieces, refused in one line once they pass limits.CERTIFICATE_BYTES, the most that
    verify-certificate reads: a certificate symattn writes is one its verifiers read (compute writes nothing
    until the whole is made, so nothing is left half-written)."""
    from symattn.input import limits
    from symattn.input.errors import LimitError

    size = 0
    for part in parts:
        size += len(part.encode("utf-8"))
        if size > limits.CERTIFICATE_BYTES:
            raise LimitError(
                source,
                None,
                f"the certificate passes {limits.CERTIFICATE_BYTES} bytes, the most verify-certificate reads "
                "(CERTIFICATE_BYTES): certify fewer tokens, columns or heads in one spec",
            )
        yield part


def tensors_of(spec, grad_output: str | None) -> Tensors:
    """The spec's heads as the certificate holds them (and dO's, from the file ``grad_output``)."""
    from symattn.kernel.heads import heads_of

    if spec.backward is not None:
        raise SpecError(
            spec.source, "backward", "--float64 takes dO from --grad-output (as compare does), not [backward]"
        )
    heads: list[float64.Head] = []
    for b in range(spec.kernel.batch):
        part = heads_of(spec.of_batch(b), "output")
        if part is None:
            raise SpecError(spec.source, None, COVERS)
        heads += part
    first = heads[0]
    logits, slopes, tanh_cap, cap_first = _rules(spec, heads[: spec.heads])
    rows = {name: np.concatenate([getattr(h, name) for h in heads]) for name in ("Q",)}
    group = spec.heads // spec.kv_groups
    firsts = [b * spec.heads + g * group for b in range(spec.kernel.batch) for g in range(spec.kv_groups)]
    rows |= {name: np.concatenate([getattr(heads[i], name) for i in firsts]) for name in ("K", "V")}
    if grad_output is not None:
        rows["dO"] = grad_rows(
            grad_output, spec.kernel.batch, spec.heads, first.Q.shape[0], first.V.shape[1], spec.kernel.layout
        )
    layout = spec.kernel.layout
    made = build(
        rows,
        spec.kernel.batch,
        spec.heads,
        spec.kv_groups,
        layout,
        first.exact_scale,
        first.allowed,
        logits,
        slopes,
        tanh_cap,
        cap_first,
    )
    if made is None:
        raise SpecError(spec.source, "scale", "beyond the float64 path's range (2^±900)")
    return made


def _rules(spec, heads: list[float64.Head]) -> tuple[Any, Any, float | None, bool]:
    """(the denominator logit, the distance bias's slope) of each query head, None where they have none, the
    tanh cap c (score_mods.Denominator, Bias and Cap: the rules of the parts whose ``certified`` is set) and
    whether the cap acts before the bias; a head with any other rule is refused (no certificate rule for it
    yet), and a bias by positions too."""
    found: dict[str, list[float]] = {"logit": [], "slope": [], "cap": []}
    cap_first = False
    for head in heads:
        mods = float64.extras(head)[1]
        for mod in mods:
            if hasattr(mod, "logits"):  # score_mods.Denominator
                found["logit"].append(float(mod.logits[0]))
            elif hasattr(mod, "c"):  # score_mods.Cap
                found["cap"].append(float(mod.c))
                cap_first = not any(hasattr(m, "slopes") for m in mods[: mods.index(mod)])  # no bias before it
            elif not hasattr(mod, "slopes"):  # score_mods.Bias's
                raise SpecError(spec.source, None, COVERS)
            elif mod.positions is not None or mod.offset:
                raise SpecError(spec.source, "positions", "--float64 certificates take a distance bias by rows")
            else:
                found["slope"].append(float(mod.slopes[0]))
    logits, slopes = (tuple(found[k]) if found[k] else None for k in ("logit", "slope"))
    return logits, slopes, found["cap"][0] if found["cap"] else None, cap_first and slopes is not None


def grad_rows(path: str, batch: int, heads: int, n: int, dv: int, layout: str) -> np.ndarray:
    """dO from its file, as rows in (batch, head, query) order: one head's (n, d_v) matrix (leading axes of one
    dropped), the heads side by side (n, heads·d_v), or with batch and head axes in the spec's layout."""
    from symattn.input.floats import read_result
    from symattn.input.tensorfile import not_float32

    result = read_result(path, key="dO")
    a = result.array
    if a is None:  # JSON: float64 values (read_result rounds them); its rows named as typed, 1-based
        a, finite = result.floats()
        with np.errstate(over="ignore"):  # past float32's range: inf, unequal
            bad = np.argwhere(~finite | (a.astype(np.float32) != a))
        if bad.size:
            i, j = bad[0].tolist()
            raise SpecError(path, "dO", "not a finite float32 value", (i + 1, j + 1))
    found = not_float32(a)
    if found is not None:  # in the file's own axes
        raise SpecError(path, "dO", found[1], index=found[0])
    shape = a.shape
    if a.ndim >= 2 and all(x == 1 for x in shape[:-2]):
        a = a.reshape(shape[-2:])
        if batch != 1 or a.shape != (n, heads * dv):
            raise ShapeError(path, "shape", f"dO is {_shape(shape)}; O is {_shape((batch, heads, n, dv))} ({layout})")
        return np.ascontiguousarray(a.reshape(n, heads, dv).transpose(1, 0, 2).reshape(heads * n, dv))
    full = a if a.ndim == 4 else a[None] if a.ndim == 3 else None
    if full is not None and layout == "bnhd":
        full = full.transpose(0, 2, 1, 3)
    if full is None or full.shape != (batch, heads, n, dv):
        raise ShapeError(path, "shape", f"dO is {_shape(shape)}; O is {_shape((batch, heads, n, dv))} ({layout})")
    return np.ascontiguousarray(full.reshape(batch * heads * n, dv))


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ")"


def certificate_json(
    tensors: Tensors, digits: int, files: list[dict[str, str]], packed: bool | None = None
) -> Iterator[str]:
    """The certificate as JSON text, in pieces: one key per line, a table row per line. ``packed``: version 5's
    packed float matrices (None: from PACKED_FROM values on)."""
    if not 1 <= digits <= MOST:
        raise ValueError(f"the float64 path shows 1 to {MOST} significant digits, not {digits}")
    tables = {name: _table(tensors, name, value, error, digits) for name, (value, error) in evaluate(tensors).items()}
    if packed is None:
        packed = sum(t[3].size for t in tables.values()) >= PACKED_FROM
    floats = _packed if packed else _texts
    yield "{\n"
    for name, (shape, shown, paths, value, bound) in tables.items():
        yield f'  "{name}": {{\n    "shape": {json.dumps(list(shape))},\n'
        yield from _rows("value", shown, 4, ",")
        yield from _rows("path", ["".join(p) for p in paths], 4, ",")
        yield from floats("float", value, "float64", 4, ",")
        yield from floats("bound", portable(bound), "float64", 4, "")
        yield "  },\n"
    counts = {
        name: {path: sum(p.count(code) for p in t[2]) for path, code in _letters(name)} for name, t in tables.items()
    }
    head = tensors.heads[0]
    cert = {
        "version": PACKED if packed else VERSION,
        "path": "float64",
        "method": METHOD,
        "digits": digits,
        "paths": counts,
        "files": files,
    }
    yield '  "certificate": {\n'
    yield "".join(f"    {json.dumps(k)}: {json.dumps(v)},\n" for k, v in cert.items())
    shape = {
        "layout": tensors.layout,
        "batch": tensors.batch,
        "heads": tensors.query_heads,
        "kv_heads": tensors.kv_heads,
    }
    yield '    "inputs": {\n' + "".join(f"      {json.dumps(k)}: {json.dumps(v)},\n" for k, v in shape.items())
    for name in ("Q", "K", "V", "dO") if tensors.gradients else ("Q", "K", "V"):
        yield from floats(name, tensors.rows(name), "float32", 6, ",")
    for name, given in (("denominator_logits", tensors.logits), ("bias_slopes", tensors.slopes)):
        if given is not None:  # one per query head, as float.hex writes it
            yield f'      "{name}": {json.dumps([float.hex(x) for x in given])},\n'
    if tensors.tanh_cap is not None:  # one c for every head
        yield f'      "tanh_cap": {json.dumps(float.hex(tensors.tanh_cap))},\n'
    if tensors.tanh_cap is not None and tensors.slopes is not None:  # the order binds: absent, "after-bias"
        yield f'      "tanh_cap_order": "{"before-bias" if tensors.cap_first else "after-bias"}",\n'
    scale = "sqrt" if head.exact_scale is None else str(head.exact_scale)
    mask = None if head.allowed is None else _mask_rows(head.allowed)
    yield f'      "scale": {json.dumps(scale)},\n      "mask": {json.dumps(mask)}\n    }}\n  }}\n}}\n'


def _mask_rows(allowed: np.ndarray) -> list[str]:
    """A row of "1" (may attend) and "0" per query, as bytes at once (16 million characters at 4096)."""
    text = np.where(allowed, ord("1"), ord("0")).astype(np.uint8).tobytes().decode("ascii")
    width = allowed.shape[1]
    return [text[i : i + width] for i in range(0, len(text), width)]


def _letters(name: str) -> list[tuple[str, str]]:
    return [(path, code) for path, code in PATHS.items() if name == "output" or code != COMPENSATED]


def _texts(key: str, matrix: np.ndarray, form: str, indent: int, after: str) -> Iterator[str]:
    """A matrix as rows of float.hex texts (versions 3 and 4)."""
    yield from _rows(key, ([float.hex(x) for x in row] for row in matrix.tolist()), indent, after)


def _packed(key: str, matrix: np.ndarray, form: str, indent: int, after: str) -> Iterator[str]:
    """A matrix packed (version 5): its rows, columns and base64 of its little-endian ``form`` values."""
    data = np.ascontiguousarray(matrix, dtype="<f8" if form == "float64" else "<f4")  # inputs: float32 values
    rows, columns = data.shape
    text = base64.b64encode(data.tobytes()).decode("ascii")
    yield f'{" " * indent}{json.dumps(key)}: {{"rows": {rows}, "columns": {columns}, "{form}": "{text}"}}{after}\n'


def _rows(key: str, rows: Any, indent: int, after: str) -> Iterator[str]:
    pad = " " * indent
    yield f"{pad}{json.dumps(key)}: [\n"
    previous = None
    for row in rows:
        if previous is not None:
            yield f"{pad}  {previous},\n"
        previous = json.dumps(row)
    yield f"{pad}  {previous}\n{pad}]{after}\n"


def _table(tensors: Tensors, name: str, value: np.ndarray, error: np.ndarray, digits: int):
    """(shape, the values shown, the path letters, floats and bounds) of one quantity, as rows."""
    value, error = value.reshape(-1, value.shape[-1]).copy(), error.reshape(-1, error.shape[-1]).copy()
    ok, q, e = significant_many(*float64.interval(value, error), digits)
    paths = np.where(ok, FLOAT, ARB).astype("<U1")
    if name == "output" and not ok.all():  # the sums again, error-free: a bound about ten times tighter
        rows, cols = np.nonzero(~ok)
        v2, e2 = compensate(tensors, list(zip(rows.tolist(), cols.tolist())))
        ok2, q2, x2 = significant_many(*float64.interval(v2, e2), digits)
        rows, cols, v2, e2 = rows[ok2], cols[ok2], v2[ok2], e2[ok2]
        value[rows, cols], error[rows, cols], q[rows, cols], e[rows, cols] = v2, e2, q2[ok2], x2[ok2]
        paths[rows, cols] = COMPENSATED
    beyond = list(zip(*(x.tolist() for x in np.nonzero(paths == ARB))))
    decided = decide_beyond(tensors, name, beyond, digits)
    for r, c in beyond:
        if (r, c) not in decided:
            raise SpecError(
                "--certify",
                None,
                f"{place(tensors, name, r, c)} is not decided at the most digits (an exact value on a rounding "
                "boundary that a certificate's rules do not prove): show fewer --digits",
            )
    shown = [
        [decided[(r, c)] if p == ARB else text(qq, ee) for c, (p, qq, ee) in enumerate(zip(prow, qrow, erow))]
        for r, (prow, qrow, erow) in enumerate(zip(paths.tolist(), q.tolist(), e.tolist()))
    ]
    return tensors.shape(name), shown, paths.tolist(), value, error


__all__ = ["VERSION", "certificate_json", "compute_tensors", "grad_rows", "tensors_of", "within_limit"]
