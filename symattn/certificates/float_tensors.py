"""What a version-3, 4 or 5 certificate is of: every (batch, head) of float32 inputs, and each quantity's floats and
rigorous bounds by the float64 engine, as rows of the certificate's tables.

Both :mod:`.tensor_maker` and :mod:`.tensor_verifier` build the heads with :func:`build` from the same rows
(Q, K, V and dO in (batch, head, token) order, the scale and the mask), so that the verifier recomputes
exactly what the maker computed. The tables (``ROWS``): the output and dQ a row per (batch, head, query),
the LSE a row per (batch, head), dK and dV a row per (batch, key/value head, key), each summed over the
group's query heads: Σ_h v_h in order, off by at most γ_G Σ_h |v_h| beside the heads' own bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from symattn.certificates.exact_rules import differing_scores, exact_value
from symattn.certificates.float_digits import significant_many, texts
from symattn.input import limits
from symattn.input.decimals import significant_exact
from symattn.input.errors import SpecError
from symattn.input.records import record
from symattn.kernel import compensated, doubled, float64, float64_backward, logsumexp, score_mods
from symattn.kernel.cores import map_forked
from symattn.kernel.float64 import SAFETY, gamma

QUANTITIES = ("output", "lse", "lse2", "dq", "dk", "dv")
ENGINE = {"output": "output", "lse": "lse", "lse2": "lse2", "dq": "dQ", "dk": "dK", "dv": "dV"}  # refine's names
PARALLEL_WORK = 2**24  # multiply-adds of all heads' scores below which one process is quicker than two
PIECES = 4  # runs of a head's rows the work is cut into where there are fewer heads than this
START_BITS = 96


@record
class Tensors:
    """Every (batch, query head) as a float64.Head (a GradientHead where dO is given), batch by batch."""

    heads: tuple[float64.Head, ...]
    batch: int
    query_heads: int
    kv_heads: int
    layout: str
    gradients: bool
    logits: tuple[float, ...] | None = None  # a denominator logit per query head (score_mods.Denominator)
    slopes: tuple[float, ...] | None = None  # a distance bias's slope per query head (score_mods.Bias, rows')
    tanh_cap: float | None = None  # c of c·tanh(z/c) after the bias, as a spec orders them (score_mods.Cap)
    cap_first: bool = False  # with a bias too: the cap before it (FlashAttention's order; tanh_cap_order)

    @property
    def squeezed(self) -> bool:  # one head of a spec without batch or head axes
        return self.batch == self.query_heads == 1

    @property
    def group(self) -> int:
        return self.query_heads // self.kv_heads

    def names(self) -> tuple[str, ...]:
        return QUANTITIES if self.gradients else QUANTITIES[:3]

    def shape(self, name: str) -> tuple[int, ...]:
        h = self.heads[0]
        n, m, d, dv = h.Q.shape[0], h.K.shape[0], h.Q.shape[1], h.V.shape[1]
        tail = {
            "output": (self.query_heads, n, dv),
            "lse": (self.query_heads, n),
            "lse2": (self.query_heads, n),
            "dq": (self.query_heads, n, d),
            "dk": (self.kv_heads, m, d),
            "dv": (self.kv_heads, m, dv),
        }[name]
        return tail[1:] if self.squeezed else (self.batch, *tail)

    def rows(self, name: str) -> np.ndarray:
        """The inputs' rows in (batch, head, token) order: Q, K, V or dO."""
        if name in ("K", "V"):
            return np.concatenate([getattr(self.heads[hh], name) for hh in self.kv_heads_first()])
        return np.concatenate([getattr(h, name) for h in self.heads])

    def kv_heads_first(self) -> list[int]:
        """The first query head of each (batch, key/value head): whose K and V are that head's."""
        return [b * self.query_heads + g * self.group for b in range(self.batch) for g in range(self.kv_heads)]


def build(
    rows: dict[str, np.ndarray],
    batch: int,
    query_heads: int,
    kv_heads: int,
    layout: str,
    scale: Fraction | None,
    allowed: np.ndarray | None,
    logits: tuple[float, ...] | None = None,
    slopes: tuple[float, ...] | None = None,
    tanh_cap: float | None = None,
    cap_first: bool = False,
) -> Tensors | None:
    """The heads of Q, K, V (and dO) rows in (batch, head, token) order, with a distance bias, a tanh cap and a
    denominator logit per query head where given, the cap after the bias (a spec's order) or before it
    (``cap_first``); None where the scale is past the float64 path's range."""
    n, m, group = len(rows["Q"]) // (batch * query_heads), len(rows["K"]) // (batch * kv_heads), query_heads // kv_heads
    if allowed is not None and not allowed.any(axis=1).all():  # a spec's reader refuses such a mask first
        i = int(np.argmin(allowed.any(axis=1)))
        raise SpecError("mask", None, f"query {i} (0-based) attends no key; softmax is undefined there", index=(i,))
    heads = []
    for b in range(batch):
        for h in range(query_heads):
            q, kv = slice((b * query_heads + h) * n, (b * query_heads + h + 1) * n), (b * kv_heads + h // group) * m
            mods: tuple = () if slopes is None else (score_mods.Bias((slopes[h],), n, 0),)
            capped = () if tanh_cap is None else (score_mods.Cap(tanh_cap),)
            mods = capped + mods if cap_first else mods + capped
            mods += () if logits is None else (score_mods.Denominator((logits[h],), n),)
            head = float64.head(rows["Q"][q], rows["K"][kv : kv + m], rows["V"][kv : kv + m], scale, allowed, mods=mods)
            if head is None:
                return None
            if "dO" in rows:
                fields = {f: getattr(head, f) for f in head.__dataclass_fields__}
                made = float64_backward.ModGradientHead if mods else float64_backward.GradientHead
                head = made(**fields, dO=rows["dO"][q])
            heads.append(head)
    first = cap_first and slopes is not None and tanh_cap is not None
    return Tensors(tuple(heads), batch, query_heads, kv_heads, layout, "dO" in rows, logits, slopes, tanh_cap, first)


def evaluate(
    tensors: Tensors,
    sums: dict[str, list[tuple[int, int]]] | None = None,
    digits: int | None = None,
    shown: Callable[[int, np.ndarray, np.ndarray, dict], np.ndarray] | None = None,
) -> dict[str, Any]:
    """Each quantity's floats and bounds as the certificate's tables (rows × last axis). ``sums``: output
    entries (table row, column) to redo from the same exps, a float and a bound for each in the order given:
    those of "c" as "summed", those of "a" as "tight", both by compensated.product_outputs (the error-free
    product, each exp's own error), or where its exact part would underflow by compensated.stage_outputs
    (the error-free sums; "a" with ``per_key``). With ``digits``, those of "a" that "tight" leaves open at
    that many digits get their double-word enclosure (doubled.outputs) as "doubled", in the workers beside
    the rest (a bound NaN: not made there), for decide_beyond's ``known``. ``shown(row, floats, bounds,
    decided)``: a flag for each of a block's output rows (the table's, from ``row``) by their floats and
    bounds, those of "c" by the error-free product, and the values of "a" that "tight" or "doubled" decide
    ({(the block's row, column): the text every point of its interval rounds to}), as "shown" (a flag per
    table row): the verifier's digits check, there on both cores rather than on one after them (a fifth of
    verify-certificate's time at 4096 × 4096).

    The work goes to both cores by pieces: a head's rows in runs of whole blocks (fewer heads than PIECES:
    each piece's blocks are the ones one pass makes, so the floats are the same), and its gradients."""
    heads, h = tensors.heads, tensors.heads[0]
    n = h.Q.shape[0]
    work = len(heads) * n * h.Q.shape[1] * h.K.shape[0]
    asked: dict[int, dict[str, list[tuple[int, int, int]]]] = {}
    for kind, pairs in (sums or {}).items():
        for p, (r, c) in enumerate(pairs):
            asked.setdefault(r // n, {}).setdefault(kind, []).append((p, r % n, c))
    count = -(-n // float64.BLOCK)  # blocks a head
    size = float64.BLOCK * -(-count // max(1, min(count, PIECES // len(heads))))
    pieces = [(hh, start, min(start + size, n)) for hh in range(len(heads)) for start in range(0, n, size)]
    pieces += [(hh, 0, 0) for hh in range(len(heads))] if tensors.gradients else []
    if digits is not None and sums and sums.get("a") and doubled.covers(h):
        doubled.prepare()  # its table made once here, not in each worker
    parts = map_forked(_piece, (tensors, asked, digits, shown), pieces, work >= PARALLEL_WORK)
    whole: list[dict] = [{} for _ in heads]
    for name in ("output", "lse", "lse2"):  # each head's runs of rows, in order
        for hh, w in enumerate(whole):
            runs = [p[name] for (at, a, z), p in zip(pieces, parts) if at == hh and a != z]
            w[name] = (np.concatenate([x[0] for x in runs]), np.concatenate([x[1] for x in runs]))
    out: dict[str, Any] = {}
    if shown is not None:
        out["shown"] = np.concatenate([p["shown"] for (_, a, z), p in zip(pieces, parts) if a != z])
    for (hh, a, z), part in zip(pieces, parts):
        if a == z:  # the gradients
            whole[hh].update(part)
    for name in ("output", "lse", "lse2", "dq"):
        if name in whole[0]:
            stack = np.stack if name.startswith("lse") else np.concatenate
            out[name] = (stack([p[name][0] for p in whole]), stack([p[name][1] for p in whole]))
    for name in ("dk", "dv"):
        if name in whole[0]:
            out[name] = _group_sums(tensors, [p[name] for p in whole])
    for kind, code in (("summed", "c"), ("tight", "a"), ("doubled", "a")):  # each pair's, in the order asked
        if sums and code in sums:
            value, error = np.full(len(sums[code]), np.nan), np.full(len(sums[code]), np.nan)
            for part in parts:
                if kind in part:
                    where, v, e = part[kind]
                    value[where], error[where] = v, e
            out[kind] = (value, error)
    return out


def _piece(data: tuple, piece: tuple[int, int, int]) -> dict[str, Any]:
    """One head's rows [start, stop): the output and both LSEs from one pass of blocks (with the error-free
    sums asked for, from each block's exps); or, for an empty run of rows, its gradients."""
    tensors, asked, digits, shown = data
    hh, first, end = piece
    head, mine = tensors.heads[hh], asked.get(hh, {})
    if first == end:
        return {name: float64_backward.gradient(head, ENGINE[name]) for name in ("dq", "dk", "dv")}
    dv = head.V.shape[1]
    out: dict[str, Any] = {
        name: (np.empty(shape), np.empty(shape))
        for name, shape in (("output", (end - first, dv)), ("lse", end - first), ("lse2", end - first))
    }
    found: dict[str, list[tuple[np.ndarray, ...]]] = {}
    flags: list[np.ndarray] = []  # shown's, block by block
    wanted = [(kind == "a", p, i, c) for kind, pairs in mine.items() for p, i, c in pairs if first <= i < end]
    absV, split = np.abs(head.V), float64.Split.of(head.K)
    columns = compensated.values(head) if wanted else None  # V split once for every block's product
    for b in float64.blocks(head, weights=False, split=split, stages=bool(wanted), rows=(first, end)):
        rows = slice(b.start - first, b.stop - first)
        out["output"][0][rows], out["output"][1][rows] = b.output, b.output_error
        for name, base in (("lse", "e"), ("lse2", "2")):
            out[name][0][rows], out[name][1][rows] = logsumexp.lse(b, base)
        here = [(flag, p, i - b.start, c) for flag, p, i, c in wanted if b.start <= i < b.stop]
        f, e_f = b.output, b.output_error
        decided: dict[tuple[int, int], str] = {}  # the block's outputs of "a" whose digits are found here
        if here and b.stage is not None:  # one call for both kinds: the row sums once
            flag, where, r, cols = (np.array(x) for x in zip(*here))
            every = compensated.product_outputs(head, b.stage, absV, columns)  # the block's outputs at once
            if every is None:
                v, e = compensated.stage_outputs(head, b.stage, r, cols, per_key=flag)
            else:
                v, e = every[0][r, cols], every[1][r, cols]
            for kind, pick in (("summed", ~flag), ("tight", flag)):
                found.setdefault(kind, []).append((where[pick], v[pick], e[pick]))
            if digits is not None and flag.any():
                va, ea = v[flag], e[flag]
                ok, q, x = significant_many(*float64.interval(va, ea), digits)
                left = np.nonzero(flag)[0][~ok]
                if left.size and doubled.covers(head):  # "a" that "tight" leaves open: the double word
                    pairs = list(zip((r[left] + b.start).tolist(), cols[left].tolist()))
                    made = doubled.outputs(head, pairs, split, b.scores)
                    found.setdefault("doubled", []).append((where[left], *made))
                    va[~ok], ea[~ok] = made
                    ok, q, x = significant_many(*float64.interval(va, ea), digits)
                if shown is not None:  # every point of its interval rounds to it: the exact value does
                    at = zip(r[flag][ok].tolist(), cols[flag][ok].tolist())
                    decided = dict(zip(at, texts(q[ok].tolist(), x[ok].tolist())))
            f, e_f = f.copy(), e_f.copy()  # as the verifier's table has them: those of "c" by the product
            f[r[~flag], cols[~flag]], e_f[r[~flag], cols[~flag]] = v[~flag], e[~flag]
        if shown is not None:
            flags.append(shown(hh * head.Q.shape[0] + b.start, f, e_f, decided))
    for kind, runs in found.items():
        out[kind] = tuple(np.concatenate(x) for x in zip(*runs))
    if flags:
        out["shown"] = np.concatenate(flags)
    return out


def _group_sums(tensors: Tensors, per_head: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """dK or dV of each (batch, key/value head): its query heads' summed in order, with the sum's rounding."""
    values, errors, G = [], [], tensors.group
    for first in tensors.kv_heads_first():
        group = per_head[first : first + G]
        value, error, magnitude = group[0][0].copy(), group[0][1].copy(), np.abs(group[0][0])
        for v, e in group[1:]:
            value += v
            error += e
            magnitude += np.abs(v)
        if G > 1:
            error = SAFETY * (error + gamma(G) * magnitude)
        values.append(value)
        errors.append(error)
    return np.concatenate(values), np.concatenate(errors)


def compensate(tensors: Tensors, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """The outputs at (table row, column) with the error-free sums (kernel/compensated.py), in the order asked."""
    n = tensors.heads[0].Q.shape[0]
    value, error = np.empty(len(pairs)), np.empty(len(pairs))
    by_head: dict[int, list[int]] = {}
    for p, (r, _) in enumerate(pairs):
        by_head.setdefault(r // n, []).append(p)
    for hh, where in sorted(by_head.items()):
        v, e = compensated.outputs(tensors.heads[hh], [(pairs[p][0] % n, pairs[p][1]) for p in where])
        value[where], error[where] = v, e
    return value, error


def place(tensors: Tensors, name: str, r: int, c: int) -> str:
    """A value's place, 0-based, in its quantity's axes: output[1, 2, 77, 5], as the verifiers name it."""
    index, rest = [c], r
    for size in reversed(tensors.shape(name)[:-1]):
        rest, i = divmod(rest, size)
        index.append(i)
    return f"{name}[{', '.join(map(str, reversed(index)))}]"


def decide_beyond(
    tensors: Tensors, name: str, entries: list[tuple[int, int]], digits: int, known: Mapping | None = None
) -> dict:
    """{(row, column): the value shown, as text} of the entries the float64 bounds leave open: an output where
    its double-word enclosure or two-float quotient decides it (kernel/doubled.py), else exactly where the
    rules of docs/kernel.md know the value, else by arb balls at rising precision (kernel/refine.py), dK and
    dV summed over the group's heads. Each way is exact or a true enclosure, so their order changes no value
    shown. An entry not decided at limits.DIGITS digits is left out. ``known``: outputs' double-word
    enclosures made already, {(row, column): (value, bound)}."""
    from symattn.kernel.refine import NotFinite, enclose

    out: dict[tuple[int, int], str] = {}
    memo: dict = {}
    # the outputs' enclosures first: the exact rules' product of scores then has a few rows, not every row
    open_ = _doubled(tensors, entries, digits, out, known) if name == "output" and entries else entries
    if name == "output" and open_:
        differing_scores(tensors, open_, memo)
    still = []
    for r, c in open_:
        x = exact_value(tensors, name, r, c, memo)
        if x is None:
            still.append((r, c))
        else:
            out[(r, c)] = str(significant_exact(x, digits))
    open_ = still
    bits = START_BITS
    while open_ and bits <= limits.DIGITS * 3.33:
        ends: dict[tuple[int, int], list[Fraction]] = {}
        lost: set[tuple[int, int]] = set()  # a head's balls not finite: its entries wait for more bits
        for hh, wanted, at in _by_head(tensors, name, open_):
            try:
                found = enclose(tensors.heads[hh], ENGINE[name], wanted, bits)
            except NotFinite:  # balls of scores far past 2^bits lose a finite value: more bits, as refine does
                lost |= set(at.values())
                continue
            for (i, j), (lo, hi) in found.items():
                key = at[(i, j)]
                sums = ends.setdefault(key, [Fraction(0), Fraction(0)])
                sums[0] += lo
                sums[1] += hi
        still = []
        for key in open_:
            if key in lost:
                still.append(key)
                continue
            lo, hi = ends[key]
            shown = significant_exact(lo, digits)
            if shown == significant_exact(hi, digits) and lo * hi > 0:
                out[key] = str(shown)
            else:
                still.append(key)
        open_, bits = still, bits * 2
    return out


def _doubled(
    tensors: Tensors, entries: list[tuple[int, int]], digits: int, out: dict, known: Mapping | None = None
) -> list[tuple[int, int]]:
    """Puts in ``out`` the outputs whose double-word enclosure (kernel/doubled.py) rounds to one value at
    every point, shown as the arb path shows them; returns the others, left open. ``known``: (value, bound)
    of some of them, made already by doubled.outputs (evaluate's "doubled")."""
    n, known = tensors.heads[0].Q.shape[0], {} if known is None else known
    by_head: dict[int, list[tuple[int, int]]] = {}
    for r, c in entries:
        by_head.setdefault(r // n, []).append((r, c))
    still = []
    for hh, keys in sorted(by_head.items()):
        head = tensors.heads[hh]
        if not doubled.covers(head):
            still += keys
            continue
        value, error = np.empty(len(keys)), np.empty(len(keys))
        made = [p for p, key in enumerate(keys) if key not in known]
        for p, key in enumerate(keys):
            if key in known:
                value[p], error[p] = known[key]
        if made:
            value[made], error[made] = doubled.outputs(head, [(keys[p][0] % n, keys[p][1]) for p in made])
        lo, hi = float64.interval(value, error)
        ok, _, _ = significant_many(lo, hi, digits)
        left = []
        for key, good, a, b in zip(keys, ok.tolist(), lo.tolist(), hi.tolist()):
            one_sign = math.isfinite(a) and math.isfinite(b) and (a > 0 or b < 0)
            shown = significant_exact(Fraction(a), digits) if good or one_sign else None
            # where numpy's margin left it open, the ends in rationals: rounding is monotone, so both ends
            # rounding to one value means every point between does; lo's rounding is the value shown
            if shown is not None and (good or shown == significant_exact(Fraction(b), digits)):
                out[key] = str(shown)
            else:
                left.append(key)
        still += _two_floats(head, n, left, digits, out) if left and doubled.takes(head) else left
    return still


def _two_floats(head: float64.Head, n: int, entries: list[tuple[int, int]], digits: int, out: dict) -> list:
    """Puts in ``out`` the outputs of one head that the two-float quotient decides (refine.by_two_floats: the
    scores split once more, no 3u|O| left), the few the double-word enclosure leaves open (10 of 1269 at
    4096 × 4096, in 15 ms where arb took 130); returns the others."""
    from symattn.kernel.refine import by_two_floats

    wanted: dict[int, list[int]] = {}
    for r, c in entries:
        wanted.setdefault(r % n, []).append(c)
    found = by_two_floats(head, wanted, lambda i, j, lo, hi: True if lo * hi > 0 else None, digits)
    still = []
    for r, c in entries:
        if (r % n, c) in found:
            out[(r, c)] = str(found[(r % n, c)][1])
        else:
            still.append((r, c))
    return still


def _by_head(tensors: Tensors, name: str, entries: list[tuple[int, int]]):
    """(head, {row: [columns]} in refine's terms, {(row, column): the table's (row, column)}) per head."""
    n, m = tensors.heads[0].Q.shape[0], tensors.heads[0].K.shape[0]
    found: dict[int, tuple[dict, dict]] = {}
    for r, c in entries:
        if name in ("dk", "dv"):  # every query head of the group
            first = tensors.kv_heads_first()[r // m]
            heads, i, j = list(range(first, first + tensors.group)), r % m, c
        elif name in ("lse", "lse2"):
            heads, i, j = [r], c, 0
        else:
            heads, i, j = [r // n], r % n, c
        for hh in heads:
            wanted, at = found.setdefault(hh, ({}, {}))
            wanted.setdefault(i, []).append(j)
            at[(i, j)] = (r, c)
    return [(hh, wanted, at) for hh, (wanted, at) in sorted(found.items())]


__all__ = ["QUANTITIES", "Tensors", "build", "compensate", "decide_beyond", "evaluate", "place"]
