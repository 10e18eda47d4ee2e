"""Reading a float64-path certificate (versions 2 to 5) strictly, into plain data.

The JSON text is parsed with a duplicate key refused anywhere, NaN and Infinity refused, and no float
parsed (the certificate's floats are ``float.hex`` strings). Every field must be one this reader knows
(one it ignored would seem proved), every table the shape its inputs give, every float ``float.hex``'s own
text of a finite value (a bound may also be ``inf``: no bound, then the value's path is "a"), every input a
float32 value. A problem is a :class:`CertificateError`: the key, the 1-based position in the JSON, what is
wrong. Version 2 (one head's output) is read as version 3 of one head with its output only; version 4 is
version 3's format; version 5 is version 4's, where each table's float and bound and each of Q, K, V and dO
may instead be packed: base64 of little-endian binary64 (binary32 for the inputs) values (values.packed).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import struct
import unicodedata
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .values import HEX, CertificateError, _Float, exact, fields, floats, integer, kind, packed, rows, shown, whole

VERSIONS = (2, 3, 4, 5)  # 4 is 3's format, made by the corrected engine (issue 30); 5 may pack its floats
PACKS = 5  # the first version whose float matrices may be packed (values.packed)
MOST_DIGITS = 13
TOKENS = 1 << 14  # queries or keys
DIMS = 1024  # columns of Q, K, V
HEADS = 1024  # batches × heads
NUMBERS_MOST = 1 << 20  # JSON numbers: a certificate's are its shapes and counts (values and floats are strings)
ORDERS = ("after-bias", "before-bias")  # where the tanh cap acts beside the distance bias
MOST = 100  # the largest |s| of a denominator logit and slope m of a distance bias, as a spec's limits are
QUANTITIES = ("output", "lse", "lse2", "dq", "dk", "dv")
GRADIENTS = ("dq", "dk", "dv")
PATH_NAMES = {"f": "float64", "c": "compensated", "a": "arb"}
_BOUND = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_LAYOUTS = ("bhnd", "bnhd")


@dataclass
class Table:
    """One quantity: its tensor shape and, a row per line, the values shown, paths, floats and bounds."""

    name: str
    shape: tuple[int, ...]
    values: list[list[str]]
    paths: list[str]
    floats: list[list[float]]
    bounds: list[list[float]]


@dataclass
class Inputs:
    """Q, K, V (and dO) as rows of floats, (batch, head, token) order; the scale (None: 1/√d_k); the mask."""

    batch: int
    heads: int
    kv_heads: int
    layout: str
    Q: list[list[float]]
    K: list[list[float]]
    V: list[list[float]]
    dO: list[list[float]] | None
    scale: Fraction | None
    mask: list[str] | None  # a row of "1" (may attend) and "0" per query, shared by every head
    logits: list[float] | None = None  # a denominator logit s per query head: e^s in each row's ℓ, no value
    slopes: list[float] | None = None  # a distance bias's slope m per query head: z − m·|i − j|
    tanh_cap: float | None = None  # c of z ← c·tanh(z/c), after the bias, for every head
    cap_first: bool = False  # with both: the cap acts before the bias, c·tanh(t/c) − m·|i − j| (tanh_cap_order)
    order_given: bool = False  # tanh_cap_order is in the certificate (absent: "after-bias", as before the field)

    @property
    def queries(self) -> int:
        return len(self.Q) // (self.batch * self.heads)

    @property
    def keys(self) -> int:
        return len(self.K) // (self.batch * self.kv_heads)


@dataclass
class Certificate:
    version: int
    digits: int
    inputs: Inputs
    tables: dict[str, Table]
    files: list[tuple[str, str, str]]  # (name, path, sha256)
    enclosures: dict[tuple[int, int], Any] = field(default_factory=dict)  # version 2: (lo, hi) or a Fraction
    squeezed: bool = True  # no batch and head axes (one head of a spec without them)


def own_inputs(t: Inputs) -> list[str]:
    """The inputs a certificate alone gives, named as both verifiers name them: ``the scale``, ``the mask``,
    …, ``the tanh cap (before the bias)`` (with the order wherever a cap and a bias both act)."""
    cap = "the tanh cap"
    if t.slopes is not None:
        order = ORDERS[1] if t.cap_first else ORDERS[0]
        absent = ' (after the bias: a certificate without tanh_cap_order means "after-bias")'
        cap += f" ({order.replace('-', ' the ')})" if t.order_given else absent
    named = (("the denominator logits", t.logits), ("the slopes", t.slopes), (cap, t.tanh_cap))
    return ["the scale", "the mask"] + [name for name, x in named if x is not None]


def listed(names: list[str]) -> str:
    """``a, b and c``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def shortened(lines: list[str], most: int = 20) -> list[str]:
    """The first ``most`` lines of a listing, and ``… and N more`` for the rest (the verdict counts them all)."""
    return lines if len(lines) <= most else [*lines[:most], f"… and {len(lines) - most} more"]


def certifies(names: tuple[str, ...], t: Inputs) -> str:
    """What a certificate certifies, in the words both verifiers print: ``it certifies output, lse, lse2, dq, dk
    and dv of Q, K, V and dO, with the scale, the mask, the slopes and the tanh cap (before the bias)``."""
    inputs = "Q, K, V and dO" if t.dO is not None else "Q, K and V"
    return f"it certifies {listed(list(names))} of {inputs}, with {listed(own_inputs(t))}"


def parse(text: str) -> dict[str, Any]:
    """JSON text as a table: duplicate keys, NaN, Infinity and floats refused."""

    twice: dict[int, str] = {}  # id of an object holding a key twice: that key (found once parsed)

    def table(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out and id(out) not in twice:
                twice[id(out)] = key
            out.setdefault(key, value)
        return out

    def constant(name: str) -> Any:
        raise CertificateError("", f"{name} is not a number a certificate holds")

    count = itertools.count(1)

    def counted(make: Any) -> Any:
        def number(text: str) -> Any:  # each one an object: refused past NUMBERS_MOST, before memory runs out
            if next(count) > NUMBERS_MOST:
                raise CertificateError("", f"more than {NUMBERS_MOST} numbers, the most a certificate may hold")
            return make(text)

        return number

    try:
        data = json.loads(
            text,
            object_pairs_hook=table,
            parse_constant=constant,
            parse_float=counted(_Float),
            parse_int=counted(integer),
        )
    except RecursionError:
        raise CertificateError("", "nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise CertificateError("", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:
        if isinstance(exc, CertificateError):
            raise
        raise CertificateError("", f"a number JSON cannot hold here: {str(exc)[:80]}") from None
    if not isinstance(data, dict):
        raise CertificateError("", "expected a JSON object")
    if twice:
        _refuse_twice(data, twice)
    return data


def _refuse_twice(data: dict[str, Any], twice: dict[int, str]) -> None:
    """The first object in the file's order that holds a key twice, named by its path (a JSON reader would
    keep one copy, and a verifier check only that one)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            if id(value) in twice:
                raise CertificateError(path[:100], f"the key {twice[id(value)][:60]!r} twice in one object; keep one")
            stack += [(f"{path}.{k[:60]}" if path else k[:60], v) for k, v in reversed(value.items())]
        elif isinstance(value, list):
            stack += [(f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value, 1))) if isinstance(v, dict | list)]


def certificate(data: dict[str, Any]) -> Certificate:
    """The certificate's parts, every form checked; values not yet proved."""
    cert = data.get("certificate")
    if not isinstance(cert, dict):
        raise CertificateError("certificate", "missing: not the output of symattn compute --certify --float64")
    version = whole(cert.get("version"))
    if version not in VERSIONS:
        raise CertificateError(
            "certificate.version",
            f"{kind(cert.get('version'))}: this verifier reads the float64 path's versions 2 to 5",
        )
    if cert.get("path") != "float64":
        raise CertificateError("certificate.path", f'expected "float64", got {kind(cert.get("path"))}')
    method = cert.get("method")
    if not isinstance(method, str) or len(method) > 1000:
        raise CertificateError("certificate.method", "expected a text of up to 1000 characters")
    digits = whole(cert.get("digits"))
    if digits is None or not 1 <= digits <= MOST_DIGITS:
        raise CertificateError("certificate.digits", f"expected a whole number from 1 to {MOST_DIGITS}")
    files = _files(cert.get("files", []))
    if version == 2:
        return _version_2(data, cert, digits, files)
    fields(
        cert, "certificate", ("version", "path", "method", "digits", "paths", "files", "inputs"), ("inputs", "paths")
    )
    inputs = _inputs(cert["inputs"], version)
    squeezed = inputs.batch == inputs.heads == 1
    names = QUANTITIES if inputs.dO is not None else QUANTITIES[:3]
    fields(data, "", (*names, "certificate"), (*names, "certificate"))
    tables = {name: _table(data[name], name, _shape(inputs, name, squeezed), digits, version) for name in names}
    _paths(cert["paths"], tables)
    return Certificate(version, digits, inputs, tables, files, {}, squeezed)


def _shape(inputs: Inputs, name: str, squeezed: bool) -> tuple[int, ...]:
    d, dv = len(inputs.Q[0]), len(inputs.V[0])
    tail = {
        "output": (inputs.heads, inputs.queries, dv),
        "lse": (inputs.heads, inputs.queries),
        "lse2": (inputs.heads, inputs.queries),
        "dq": (inputs.heads, inputs.queries, d),
        "dk": (inputs.kv_heads, inputs.keys, d),
        "dv": (inputs.kv_heads, inputs.keys, dv),
    }[name]
    return tail[1:] if squeezed else (inputs.batch, *tail)


def _table(raw: Any, name: str, shape: tuple[int, ...], digits: int, version: int = 3) -> Table:
    if not isinstance(raw, dict):
        raise CertificateError(name, f"expected a table of shape, value, path, float and bound, got {kind(raw)}")
    fields(raw, name, ("shape", "value", "path", "float", "bound"), ("shape", "value", "path", "float", "bound"))
    given = raw["shape"]
    if not isinstance(given, list) or [whole(x) for x in given] != list(shape):
        # a number as written (a reader that keeps its text gives a str subclass), anything else as JSON
        got = kind(given)
        if isinstance(given, list) and len(given) <= 8:
            texts = (x if isinstance(x, str) and type(x) is not str else json.dumps(x)[:20] for x in given)
            got = f"[{', '.join(texts)}]"
        raise CertificateError(f"{name}.shape", f"expected {list(shape)} (from the inputs), got {got}")
    count = 1
    for n in shape[:-1]:
        count *= n
    width = shape[-1]
    values = rows(raw["value"], f"{name}.value", count, width, "values")
    paths = raw["path"]
    if not isinstance(paths, list) or len(paths) != count:
        raise CertificateError(f"{name}.path", f"expected {count} rows of path letters")
    for i, p in enumerate(paths, 1):
        if not isinstance(p, str) or len(p) != width or p.strip("fca" if name == "output" else "fa"):
            letters = '"f", "c" or "a"' if name == "output" else '"f" or "a"'
            raise CertificateError(f"{name}.path", f"expected {width} letters {letters}, got {kind(p)}", (i,))
    return Table(
        name,
        shape,
        values,
        paths,
        _matrix(raw["float"], f"{name}.float", count, width, "a float", version, "float64"),
        _bounds(_matrix(raw["bound"], f"{name}.bound", count, width, "a bound", version, "float64", True), paths, name),
    )


def _matrix(
    raw: Any, key: str, count: int | None, width: int | None, what: str, version: int, form: str, inf: bool = False
) -> Any:
    """Rows of floats: from version 5 a packed table (values.packed), or rows of float.hex texts, each a
    float32 value where ``form`` is "float32" (a packed one is one already)."""
    if isinstance(raw, dict) and version < PACKS:
        raise CertificateError(key, f"expected a list of rows of {what}, got a table (packed values: version 5)")
    if isinstance(raw, dict):
        return packed(raw, key, count, width, what, form, inf, (HEADS * TOKENS, DIMS))
    m = floats(raw, key, count, width, what, inf)
    for i, row in enumerate(m if form == "float32" else [], 1):
        if not _all_float32(row):
            j = next(j for j, x in enumerate(row) if not _all_float32([x]))
            raise CertificateError(key, f"{row[j].hex()} is not a float32 value", (i, j + 1))
    return m


def _bounds(bounds: list[list[float]], paths: list[str], name: str) -> list[list[float]]:
    if getattr(bounds, "plain", False):  # packed, and no value negative or infinite (values.Packed.plain)
        return bounds
    for i, (row, p) in enumerate(zip(bounds, paths), 1):
        if min(row) >= 0 and math.inf not in row:  # the usual row, at C's speed (no NaN is left to read)
            continue
        for j, b in enumerate(row):
            if b < 0 or b == math.inf and p[j] != "a":
                raise CertificateError(f"{name}.bound", 'negative, or infinite where the path is not "a"', (i, j + 1))
    return bounds


def _paths(raw: Any, tables: dict[str, Table]) -> None:
    if not isinstance(raw, dict):
        raise CertificateError("certificate.paths", f"expected a table of each quantity's paths, got {kind(raw)}")
    fields(raw, "certificate.paths", tuple(tables), tuple(tables))
    for name, table in tables.items():
        counts = raw[name]
        letters = "fca" if name == "output" else "fa"
        known = tuple(PATH_NAMES[c] for c in letters)
        if not isinstance(counts, dict):
            raise CertificateError(f"certificate.paths.{name}", f"expected a table of {', '.join(known)}")
        fields(counts, f"certificate.paths.{name}", known, known)
        for c in letters:
            got = sum(p.count(c) for p in table.paths)
            if whole(counts[PATH_NAMES[c]]) != got:
                raise CertificateError(
                    f"certificate.paths.{name}.{PATH_NAMES[c]}",
                    f"{kind(counts[PATH_NAMES[c]])}, but {name}.path has {got}",
                )


def _inputs(raw: Any, version: int = 3) -> Inputs:
    key = "certificate.inputs"
    if not isinstance(raw, dict):
        raise CertificateError(key, f"expected a table, got {kind(raw)}")
    optional = ("dO", "denominator_logits", "bias_slopes", "tanh_cap", "tanh_cap_order")
    known = ("layout", "batch", "heads", "kv_heads", "Q", "K", "V", *optional, "scale", "mask")
    fields(raw, key, known, tuple(k for k in known if k not in optional))
    if raw["layout"] not in _LAYOUTS:
        raise CertificateError(f"{key}.layout", f'expected "bhnd" or "bnhd", got {kind(raw["layout"])}')
    batch, heads, kv = (whole(raw[k]) for k in ("batch", "heads", "kv_heads"))
    if batch is None or heads is None or kv is None or min(batch, heads, kv) < 1 or batch * heads > HEADS or heads % kv:
        raise CertificateError(
            f"{key}.heads",
            f"batch, heads and kv_heads: whole numbers, kv_heads dividing heads, batch × heads at most {HEADS}",
        )
    Q = _matrix(raw["Q"], f"{key}.Q", None, None, "float32 values", version, "float32")
    if len(Q) % (batch * heads) or len(Q) // (batch * heads) > TOKENS or len(Q[0]) > DIMS:
        raise CertificateError(
            f"{key}.Q",
            f"{len(Q)} rows of {len(Q[0])}: not batch × heads × queries (at most {TOKENS}) rows of at most {DIMS}",
        )
    K = _matrix(raw["K"], f"{key}.K", None, len(Q[0]), "float32 values", version, "float32")
    if len(K) % (batch * kv) or len(K) // (batch * kv) > TOKENS:
        raise CertificateError(f"{key}.K", f"{len(K)} rows: not batch × kv_heads × keys (at most {TOKENS})")
    V = _matrix(raw["V"], f"{key}.V", len(K), None, "float32 values", version, "float32")
    if len(V[0]) > DIMS:
        raise CertificateError(f"{key}.V", f"rows of {len(V[0])}; at most {DIMS}")
    dO = (
        None
        if "dO" not in raw
        else _matrix(raw["dO"], f"{key}.dO", len(Q), len(V[0]), "float32 values", version, "float32")
    )
    scale = None
    if raw["scale"] != "sqrt":
        scale = exact(raw["scale"], f"{key}.scale", ())
        if scale <= 0:
            raise CertificateError(f"{key}.scale", "must be positive")
    queries, keys = len(Q) // (batch * heads), len(K) // (batch * kv)
    mask = raw["mask"]
    if mask is not None:
        if not isinstance(mask, list) or len(mask) != queries:
            why = f"expected null or {queries} rows, one per query (Q's {len(Q)} rows: batch × heads × queries)"
            raise CertificateError(f"{key}.mask", why)
        for i, row in enumerate(mask, 1):
            if isinstance(row, str) and len(row) != keys:  # the keys are K's rows over batch × kv_heads
                why = f"{len(row)} characters, where K's {len(K)} rows are batch {batch} × kv_heads {kv} × {keys} keys"
                raise CertificateError(f"{key}.mask", why, (i,))
            if not isinstance(row, str) or row.strip("01") or "1" not in row:
                raise CertificateError(f"{key}.mask", f"expected {keys} characters 1 or 0, at least one 1", (i,))
    logits = _per_head(raw, key, "denominator_logits", heads, lambda x: abs(x) <= MOST, f"at most {MOST} in size")
    slopes = _per_head(raw, key, "bias_slopes", heads, lambda x: 0 < x <= MOST, f"above 0 and at most {MOST}")
    cap = None
    if "tanh_cap" in raw:  # one float for every head, at most 1000 as a spec's limit is
        try:
            cap = floats([[raw["tanh_cap"]]], f"{key}.tanh_cap", 1, 1, "a float64 value")[0][0]
        except CertificateError as exc:
            raise CertificateError(exc.key, exc.problem) from None
        if not 0 < cap <= 1000:
            raise CertificateError(f"{key}.tanh_cap", f"{cap.hex()}: above 0 and at most 1000")
    order = raw.get("tanh_cap_order", ORDERS[0])  # absent: after the bias, as certificates before it meant
    if order not in ORDERS:
        raise CertificateError(f"{key}.tanh_cap_order", f'expected "after-bias" or "before-bias", got {kind(order)}')
    given = "tanh_cap_order" in raw
    missing = [name for name, x in (("tanh_cap", cap), ("bias_slopes", slopes)) if x is None]
    if given and missing:  # the order is of the two: the input it orders is what is wrong
        too = ", and bias_slopes too" if len(missing) == 2 else ""
        raise CertificateError(
            f"{key}.{missing[0]}", f'absent{too}, but tanh_cap_order "{order}" orders tanh_cap and bias_slopes'
        )
    return Inputs(
        batch, heads, kv, raw["layout"], Q, K, V, dO, scale, mask, logits, slopes, cap, order == ORDERS[1], given
    )


def _per_head(raw: dict[str, Any], key: str, name: str, heads: int, good: Any, what: str) -> list[float] | None:
    """A float per query head, each ``good`` (None where the field is absent)."""
    if name not in raw:
        return None
    try:  # one row: a place is its column alone
        values = floats([raw[name]], f"{key}.{name}", 1, heads, "float64 values")[0]
    except CertificateError as exc:
        raise CertificateError(exc.key, exc.problem, exc.position[1:]) from None
    for h, x in enumerate(values, 1):
        if not good(x):
            raise CertificateError(f"{key}.{name}", f"{x.hex()}: {what}", (h,))
    return values


def _all_float32(row: list[float]) -> bool:
    """Every x a float32 value: rounding it to float32 (struct's "f") gives it back."""
    try:
        return list(struct.unpack(f"<{len(row)}f", struct.pack(f"<{len(row)}f", *row))) == row
    except OverflowError:  # past float32's range
        return False


def _files(raw: Any) -> list[tuple[str, str, str]]:
    if not isinstance(raw, list):
        raise CertificateError("certificate.files", f"expected a list of files, got {kind(raw)}")
    out: list[tuple[str, str, str]] = []
    for n, entry in enumerate(raw, 1):
        if not isinstance(entry, dict):
            raise CertificateError("certificate.files", "expected a table of name, path and sha256", (n,))
        fields(entry, "certificate.files", ("name", "path", "sha256"), ("name", "path", "sha256"))
        name, path, digest = entry["name"], entry["path"], entry["sha256"]
        if not isinstance(name, str) or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,64}", name) is None:
            raise CertificateError("certificate.files.name", f'expected a name such as "Q", got {kind(name)}', (n,))
        if not isinstance(path, str) or not 0 < len(path) <= 4096:
            raise CertificateError("certificate.files.path", "expected a text of 1 to 4096 characters", (n,))
        if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in path):  # no file system names one
            raise CertificateError("certificate.files.path", "a control character or a lone surrogate", (n,))
        if not isinstance(digest, str) or re.fullmatch(r"[0-9a-f]{64}", digest) is None:
            raise CertificateError("certificate.files.sha256", "expected 64 lowercase hex digits", (n,))
        if name in [x[0] for x in out]:
            raise CertificateError("certificate.files.name", f"{name!r} a second time", (n,))
        out.append((name, path, digest))
    return out


def _version_2(data: dict[str, Any], cert: dict[str, Any], digits: int, files: list) -> Certificate:
    known = ("version", "path", "method", "digits", "paths", "files", "enclosures", "inputs")
    fields(cert, "certificate", known, ("inputs", "paths", "enclosures"))
    fields(data, "", ("d_k", "output", "certificate"), ("output", "certificate"))
    raw = cert["inputs"]
    if not isinstance(raw, dict):
        raise CertificateError("certificate.inputs", f"expected a table, got {kind(raw)}")
    fields(raw, "certificate.inputs", ("Q", "K", "V", "scale", "mask"), ("Q", "K", "V", "scale", "mask"))
    inputs = _inputs({**raw, "layout": "bhnd", "batch": 1, "heads": 1, "kv_heads": 1})
    if "d_k" in data and whole(data["d_k"]) != len(inputs.Q[0]):
        raise CertificateError("d_k", f"{kind(data['d_k'])}, but certificate.inputs.Q has {len(inputs.Q[0])} columns")
    output = data["output"]
    if isinstance(output, dict):  # version 2's table has no shape: the inputs give it
        output = {"shape": [inputs.queries, len(inputs.V[0])], **output}
    table = _table(output, "output", (inputs.queries, len(inputs.V[0])), digits)
    counts = cert["paths"]
    _paths({"output": counts}, {"output": table})
    boxes: dict[tuple[int, int], Any] = {}
    key = "certificate.enclosures"
    if not isinstance(cert["enclosures"], list):
        raise CertificateError(key, "expected a list of enclosures")
    for p, entry in enumerate(cert["enclosures"], 1):
        if not isinstance(entry, dict) or set(entry) not in ({"at", "bounds"}, {"at", "exact"}):
            raise CertificateError(key, "expected a table of at and bounds (or at and exact)", (p,))
        at = entry["at"]
        i, k = (whole(x) for x in at) if isinstance(at, list) and len(at) == 2 else (None, None)
        if i is None or k is None or not (1 <= i <= len(table.paths) and 1 <= k <= table.shape[1]):
            raise CertificateError(f"{key}.at", f"expected [query, column], 1-based, within {list(table.shape)}", (p,))
        if table.paths[i - 1][k - 1] != "a" or (i - 1, k - 1) in boxes:
            raise CertificateError(f"{key}.at", f'output[{i}][{k}]: not a value of path "a", or a second time', (p,))
        if "exact" in entry:
            boxes[(i - 1, k - 1)] = exact(entry["exact"], f"{key}.exact", (p,))
        else:
            ends = entry["bounds"]
            if not isinstance(ends, list) or len(ends) != 2:
                raise CertificateError(f"{key}.bounds", "expected [lo, hi]", (p,))
            lo, hi = (exact(x, f"{key}.bounds", (p,), _BOUND) for x in ends)
            if lo > hi:
                raise CertificateError(f"{key}.bounds", "the bounds are the wrong way round", (p,))
            boxes[(i - 1, k - 1)] = (lo, hi)
    missing = sum(p.count("a") for p in table.paths) - len(boxes)
    if missing:
        raise CertificateError(key, f'{missing} values of path "a" without an enclosure')
    return Certificate(2, digits, inputs, {"output": table}, files, boxes, True)


__all__ = [
    "HEX",
    "Certificate",
    "CertificateError",
    "Inputs",
    "Table",
    "certificate",
    "certifies",
    "floats",
    "listed",
    "own_inputs",
    "parse",
    "shortened",
    "shown",
    "whole",
]
