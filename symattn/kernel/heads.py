"""`compare` at kernel sizes: float64 values with rigorous bounds first, arb for the entries they leave open.

The float64 path (:mod:`symattn.kernel.float64`) encloses each exact value in [lo, hi]. An entry's
error in ULPs (three digits), its histogram bucket and its relative error are decided when every point
of [lo, hi] gives the same ones: numpy decides most entries at once, with margins that cover its own
roundings; the rest are decided on the same interval in exact rationals (``comparison._decide``); an entry
still open is refined, first in two floats (:func:`symattn.kernel.doubled.quotients`), then with arb balls
of its row at rising precision, as the exact path does.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np

from symattn.input.filematrix import FileMatrix
from symattn.input.floats import FloatResult
from symattn.kernel import compensated, deciding, deviation, float64, float64_backward, lean, logsumexp, rowscale
from symattn.kernel.cores import map_forked, map_threads
from symattn.kernel.deciding import BELOW, Errors, decide, errors, is_double, shown, shown_many
from symattn.kernel.refine import Balls, refine

LSE = {"lse": "e", "lse2": "2"}  # the log-sum-exp, natural or base 2: one row per head
LEAN_WORK = 2**24  # multiply-adds of all heads' scores from which a report's first bound is lean's
LEAN_ROWS = 512  # query rows of one piece of the first bound (a multiple of float64.BLOCK)
PRODUCT_WORK = 2**24  # multiply-adds from which every entry decided meets float64's ends with the product's
PARALLEL_WORK = 2**24  # multiply-adds of all heads' scores below which one process is quicker than two
FLOAT_DIGITS = 13  # of an exact value the float64 bound decides: shown() and shown_many() agree up to 13


def heads_of(spec, quantity: str) -> list[float64.Head] | None:
    """The spec's heads as float32-valued arrays, or None where the float64 path does not apply (decimal
    inputs, projections, W_O, a variant whose part it refuses; the weights of several heads). The variants
    with a kernel rule come with them as their rules (kernel/spec_variants.py), whose numbers must be floats."""
    from symattn import variants
    from symattn.kernel import spec_variants

    if spec.projection is not None or spec.backward is not None or spec.W_O is not None:
        return None
    if variants.float64_refused(spec):  # a part whose scores it does not model (symattn.variants)
        return None
    if spec.heads > 1 and quantity == "weights":
        return None
    specs = [spec.head(h) for h in range(spec.heads)] if spec.heads > 1 else [spec]
    arrays = [arrays_of(s) for s in specs]
    if any(a is None for a in arrays):
        return None
    spec_variants.check(spec)  # the kernel's inputs: its variants' numbers must be binary too
    heads = [_head(s, a) for s, a in zip(specs, arrays)]  # type: ignore[arg-type]
    return None if any(h is None for h in heads) else heads  # type: ignore[return-value]


def head_of(spec) -> float64.Head | None:
    """One head's inputs as float32-valued arrays, or None where they are not all float32 values; its
    variants' rules with them."""
    from symattn.kernel import spec_variants

    arrays = arrays_of(spec)
    if arrays is None:
        return None
    spec_variants.check(spec)
    return _head(spec, arrays)


def arrays_of(spec) -> list[np.ndarray] | None:
    """One head's Q, K and V as float32-valued arrays, or None where they are not all float32 values."""
    arrays = []
    for m in (spec.Q, spec.K, spec.V):
        if isinstance(m, FileMatrix):  # a file's floats: the array is exact, no Fraction made
            if not float64.is_float32(m.array):
                return None
            arrays.append(m.array)
            continue
        values = [x.value for row in m for x in row]
        if not all(map(is_double, values)):  # a decimal like 0.1: not a float
            return None
        a = np.array([float(v) for v in values], dtype=np.float64).reshape(len(m), len(m[0]))
        if not float64.is_float32(a):
            return None
        arrays.append(a)
    return arrays


def _head(spec, arrays: list[np.ndarray]) -> float64.Head | None:
    """One head of its arrays, scale and mask, with its variants' rules."""
    from symattn.kernel import spec_variants

    exact = None if spec.scale == "sqrt" else Fraction(1) if spec.scale == "none" else spec.scale.value
    allowed = None if spec.allowed is None else np.array(spec.allowed, dtype=bool)
    mods = spec_variants.mods(spec, len(arrays[0]), len(arrays[1]))
    return float64.head(arrays[0], arrays[1], arrays[2], exact, allowed, mods=mods)


def intervals(head: float64.Head, quantity: str, rows: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi] around each exact weight, output or log-sum-exp (a row: one per query) of one head; ``rows``:
    only the outputs of the query rows [start, stop), start a multiple of float64.BLOCK (float64.blocks)."""
    if quantity == "dsink":  # a float64_backward.LogitGradient: one number, the query head's over its batches
        return float64.interval(*float64_backward.logit_gradient(head))  # type: ignore[arg-type]
    if quantity in float64_backward.GRADIENTS:  # dQ, dK or dV of a float64_backward.GradientHead
        return float64.interval(*float64_backward.gradient(head, quantity))  # type: ignore[arg-type]
    n, m, dv = head.Q.shape[0], head.K.shape[0], head.V.shape[1]
    if quantity in LSE:
        lo, hi = np.empty((1, n)), np.empty((1, n))
        for b in float64.blocks(head, weights=False):
            value, error = logsumexp.lse(b, LSE[quantity])
            lo[0, b.start : b.stop], hi[0, b.start : b.stop] = float64.interval(value, error)
        return lo, hi
    first, stop = (0, n) if rows is None else rows
    shape = (stop - first, m) if quantity == "weights" else (stop - first, dv)
    lo, hi = np.empty(shape), np.empty(shape)
    for b in float64.blocks(head, weights=quantity == "weights", rows=rows):
        value, error = (b.weights, b.weights_error) if quantity == "weights" else (b.output, b.output_error)
        lo[b.start - first : b.stop - first], hi[b.start - first : b.stop - first] = float64.interval(value, error)
    return lo, hi


def _work(heads: list[float64.Head]) -> int:
    return sum(x.Q.shape[0] * x.K.shape[0] * x.Q.shape[1] for h in heads for x in getattr(h, "heads", (h,)))


def _all_intervals(
    heads: list[float64.Head], quantity: str, cheap: bool = False, product: bool = False
) -> list[tuple[np.ndarray, ...]]:
    # several heads: one process per core (numpy's own loops hold the GIL); one head's LSE stays here, since
    # BLAS's threads in two processes at once took ten times as long as one process (the LSE at 4096);
    # the outputs go by pieces of rows, each worker's BLAS on one thread (cores.py)
    parallel = _work(heads) >= PARALLEL_WORK
    if not cheap and not product and (quantity != "output" or not parallel):
        return map_forked(_head_intervals, (heads, quantity), range(len(heads)), parallel)
    # pieces of LEAN_ROWS query rows, so that one head takes both cores too (BLAS on one thread each); each
    # block of float64's bound is the one a whole pass makes (the same rows), so its ends are the same
    rows = [x.Q.shape[0] for x in heads]
    pieces = [(h, i, min(i + LEAN_ROWS, n)) for h, n in enumerate(rows) for i in range(0, n, LEAN_ROWS)]
    if cheap:  # lean's pieces are BLAS and numpy's loops: on threads, as quick, and no process forked

        def lean_piece(piece: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
            return _lean_piece(heads, piece)

        done = map_threads(lean_piece, pieces, blas=True) if parallel else [lean_piece(p) for p in pieces]
    else:
        done = map_forked(_met_piece if product else _rows_piece, heads, pieces, parallel)
    parts = range(3 if product else 2)  # lo, hi, and with the product a flag per row where it held
    return [
        tuple(np.concatenate([p[k] for (g, _, _), p in zip(pieces, done) if g == h]) for k in parts)
        for h in range(len(heads))
    ]


def _head_intervals(data: tuple, h: int) -> tuple[np.ndarray, np.ndarray]:
    heads, quantity = data
    return intervals(heads[h], quantity)


def _rows_piece(heads: list[float64.Head], piece: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    h, first, last = piece
    return intervals(heads[h], "output", (first, last))


def _met_piece(heads: list[float64.Head], piece: tuple[int, int, int]) -> tuple[np.ndarray, ...]:
    h, first, last = piece
    return compensated.met(heads[h], (first, last))


def _lean_piece(heads: list[float64.Head], piece: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    h, first, last = piece
    return lean.intervals(heads[h], first, last)


def takes_lean(heads: list[float64.Head], quantity: str, worst: int | None) -> bool:
    """Whether a report of the ``worst`` largest errors starts from lean's bound (kernel/lean.py): outputs of
    plain heads at kernel sizes (below LEAN_WORK the float64 bound costs little and is used alone)."""
    return worst is not None and quantity == "output" and _work(heads) >= LEAN_WORK and all(map(lean.covers, heads))


def compare_head(heads: list[float64.Head], result: FloatResult, quantity: str, worst: int | None = None, places=None):
    """spec_comparison.compare for heads the float64 path takes (see heads_of): the same Comparison. With ``worst``,
    only what a report of the ``worst`` largest errors shows is decided (see needed); the other entries
    have their bucket only, and reading one is an error. ``places`` (places.Places): where the entries lie
    in the result, and which columns of a row are one head's (its row-relative figures' scale)."""
    from symattn.kernel import refine_gradients

    try:
        return _compared(heads, result, quantity, worst, places)
    finally:  # the heads' row stats (ℓ, D balls): kept for this comparison's passes over its heads, not past it
        refine_gradients.forget()


def _compared(heads: list[float64.Head], result: FloatResult, quantity: str, worst: int | None, places):
    """compare_head's Comparison."""
    from symattn.input.errors import ShapeError
    from symattn.kernel.comparison import EDGES, EXACT_DIGITS, Comparison, _decide
    from symattn.kernel.entry_table import EntryTable, ExactShown, Figures, head_maxima, ranked_at

    # one more than shown: whether the next entry ties the last shown one (Comparison.ranked) is then known
    # without every entry decided (the report of the 10 largest asked for the 11th, and decided 2 million)
    worst = None if worst is None else worst + 1
    cheap = takes_lean(heads, quantity, worst)
    # every entry decided at kernel sizes: every output's ends met with the error-free product's (the sums
    # again, tighter than Sum2's, for all at once); rows where it declined take the sums below, as before
    product = quantity == "output" and worst is None and _work(heads) >= PRODUCT_WORK
    parts = _all_intervals(heads, quantity, cheap, product)
    axis = 0 if quantity in LSE else 1  # heads side by side (O), or a row per head (the LSE)
    lo, hi = np.concatenate([p[0] for p in parts], axis=axis), np.concatenate([p[1] for p in parts], axis=axis)
    offsets = np.cumsum([0] + [p[0].shape[1] for p in parts]).tolist()
    lo, hi = np.where(np.isnan(lo), -np.inf, lo), np.where(np.isnan(hi), np.inf, hi)  # a bound lost: none at all
    rows, cols = lo.shape
    got = result.shape
    if got != (rows, cols):
        raise ShapeError(
            result.source,
            "shape",
            f"the result is {result.shape_text()} and the exact {quantity} is {result.shape_text(rows, cols)}",
        )
    if result.array is not None:  # a .npy file's floats, exactly: no Fraction turned back
        x = result.array
        exact_float = np.isfinite(x)
    else:  # rows of Fractions (JSON: floats of its format); any that is no float64 is decided exactly
        x = np.array([[np.nan if v is None else float(v) for v in row] for row in result.rows], dtype=np.float64)
        exact_float = np.array([[v is not None and is_double(v) for v in row] for row in result.rows], dtype=bool)
    x0 = np.where(exact_float, x, 0.0)
    held = np.zeros((rows, cols), dtype=bool)  # entries whose ends hold the product's bound (those sums again)
    for h, part in enumerate(parts if product else ()):
        held[:, offsets[h] : offsets[h + 1]] = part[2][:, None]
    tight = lean.Tight(heads, offsets, lo, hi) if cheap else None
    if tight is not None:  # lean's bound, and float64's in the rows of what a report may show
        ok, (q_u, k_u), (q_r, k_r), bucket, bounds, wanted = _lean_decide(
            tight, x, x0, exact_float, result.format, worst, places
        )
    else:
        ok, (q_u, k_u), (q_r, k_r), bucket = decide(x0, lo, hi, result.format)
        ok &= exact_float
        wanted, bounds = np.ones(ok.shape, dtype=bool), None  # with worst: the entries a report may show
        if worst is not None:
            bounds = errors(x0, lo, hi, result.format)
            wanted = needed(x, exact_float, bounds, worst, places)
    summed: set[tuple[int, int]] = set()
    # every entry decided: those whose row-relative figure alone is open are summed again too, their ends
    # kept apart (rowscale.Tighter) so that every other figure and digit is the one these ends give
    every = quantity == "output" and worst is None
    tighter = rowscale.Tighter(result, lo, hi, ok & exact_float & ~held, places) if every else None
    if quantity == "output":  # the outputs left open: their sums again, error-free (a bound ~10x tighter)
        open_ = ~ok & exact_float & wanted & ~held
        for h, head in enumerate(heads):
            start, stop = offsets[h], offsets[h + 1]
            if not float64.is_float32(head.V):  # V times v_descale: e_hi·v would not be exact (compensated)
                continue
            at = np.nonzero(open_[:, start:stop])
            pairs = list(zip(at[0].tolist(), at[1].tolist()))
            also: list[tuple[int, int]] = []
            if tighter is not None:
                also, apart = tighter.pairs(pairs, start, stop)
                if apart:  # rows of their own: summed apart (the rows of ``pairs`` keep their stages as before)
                    tighter.meet(apart, start, *compensated.outputs(head, apart, per_key=np.ones(len(apart), bool)))
            if not pairs:
                continue
            # the same rows, so the same values (and the pairs of ``also`` take the bound formed key by key too)
            key_by_key = np.arange(len(pairs + also)) >= len(pairs) if also else None
            value, error = compensated.outputs(head, pairs + also, per_key=key_by_key)
            if tighter is not None and also:
                tighter.meet(also, start, value[len(pairs) :], error[len(pairs) :])
                value, error = value[: len(pairs)], error[: len(pairs)]
            a, b = float64.interval(value, error)
            rr, cc = at[0], at[1] + start
            summed.update(zip(rr.tolist(), cc.tolist()))
            lo[rr, cc], hi[rr, cc] = (
                np.maximum(lo[rr, cc], a),
                np.minimum(hi[rr, cc], b),
            )  # both enclose: so does their meet
            got = decide(x[rr, cc], lo[rr, cc], hi[rr, cc], result.format)
            ok[rr, cc], q_u[rr, cc], k_u[rr, cc], q_r[rr, cc], k_r[rr, cc], bucket[rr, cc] = (
                got[0],
                got[1][0],
                got[1][1],
                got[2][0],
                got[2][1],
                got[3],
            )
        if worst is not None and summed:  # the narrower bounds leave fewer that may be shown
            at = tuple(np.array(sorted(summed)).T)
            again = deciding.reported(deciding._errors(x0[at], lo[at], hi[at], result.format), lo[at], hi[at])
            for f in dataclasses.fields(again):  # only the entries summed again have new ends
                getattr(bounds, f.name)[at] = getattr(again, f.name)
            wanted = needed(x, exact_float, bounds, worst, places)
    decided: dict[tuple[int, int], tuple] = {}
    open_rows: dict[int, list[int]] = {}
    left = np.nonzero(~ok & wanted)
    # where numpy shows that the exact rationals could not decide, they are not tried (deciding.hopeless)
    hopeless = (deciding.hopeless(x0[left], lo[left], hi[left], result.format) & exact_float[left]).tolist()
    for i, j, sure in zip(*left, hopeless):
        i, j = int(i), int(j)
        v = result.value(i, j)
        if v is None:
            continue
        if sure or not (np.isfinite(lo[i, j]) and np.isfinite(hi[i, j])):  # overflowed bounds too: arb's balls
            open_rows.setdefault(i, []).append(j)
            continue
        outcome = _decide(v, Fraction(float(lo[i, j])), Fraction(float(hi[i, j])), result.format)
        if outcome is not None:
            decided[(i, j)] = (outcome, shown(float(lo[i, j]), float(hi[i, j]), FLOAT_DIGITS))
        else:
            open_rows.setdefault(i, []).append(j)

    refined: dict[tuple[int, int], tuple] = {}
    balls = Balls()  # refinement's rows, kept for the row-relative figures and the verdict
    narrowed: dict[tuple[int, int], tuple[Fraction, Fraction]] = {}
    deviations: dict[tuple[int, int], object] = {}  # arb balls of errors (kernel/deviation.py), by place
    digits = 15
    for h, head in enumerate(heads):  # each head's open entries, as (query row, column of the head)
        start, stop = offsets[h], offsets[h + 1]
        if quantity in LSE:
            mine = {j: [0] for j in open_rows.get(h, [])}
        else:
            mine = {i: [j - start for j in js if start <= j < stop] for i, js in open_rows.items()}
        mine = {i: js for i, js in mine.items() if js}
        if not mine:
            continue

        def place(i: int, j: int, h: int = h, start: int = start) -> tuple[int, int]:
            return (h, i) if quantity in LSE else (i, j + start)

        def decide_one(i: int, j: int, a: Fraction, b: Fraction, place=place):
            r, c = place(i, j)
            v = result.value(r, c)
            assert v is not None  # only finite entries are refined
            narrowed[(r, c)] = (a, b)  # the last, narrowest ends: kept for the row-relative errors
            return _decide(v, a, b, result.format)

        def name(i: int, j: int, place=place) -> str:
            r, c = place(i, j)
            where = f"entry ({r + 1}, {c + 1})" if places is None else places.text(r, c)
            return f"{result.source}: the error of {where}"

        def float_at(i: int, j: int, place=place) -> Fraction:
            v = result.value(*place(i, j))
            assert v is not None  # only finite entries are refined
            return v

        floats = deviation.Floats(float_at, result.format)
        done, reached = refine(head, quantity, mine, decide_one, EXACT_DIGITS, balls, name, errors=floats)
        refined.update({place(i, j): outcome for (i, j), outcome in done.items()})
        deviations.update({place(i, j): d for (i, j), d in floats.found.items()})
        digits = max(digits, reached)
    decided.update(refined)
    from symattn.kernel.enclosing import FloatEnclosure
    from symattn.kernel.rowscale import row_relative

    # narrows lo, hi
    enclosure = FloatEnclosure(heads, quantity, lo, hi, offsets, narrowed, balls, summed, deviations, held)
    zero = {p for p, ((ulps, _, _), _) in decided.items() if ulps == 0}  # 0 ULP: x is the exact value
    finite = np.isfinite(x)  # NaN where the result's entry is not finite
    # with worst, the float64 bound alone decides the bucket of an entry whose figures are left open
    bucket = np.where(ok if bounds is None else ok | (bounds.bucket_ok & exact_float), bucket, len(EDGES))
    for (i, j), ((_, _, b), _) in decided.items():
        bucket[i, j] = b
    ulps = Figures(ok, q_u, k_u, {p: outcome[0] for p, (outcome, _) in decided.items()})
    relative = Figures(ok, q_r, k_r, {p: outcome[1] for p, (outcome, _) in decided.items()})
    ulps_keys = ulps.keys(finite)
    shown_at = None if worst is None else ranked_at(finite, bucket, ulps_keys, worst)
    if shown_at is not None and places is not None and places.has_heads:  # each head's summary shows its own
        shown_at = np.union1d(shown_at, head_maxima(places, bucket, ulps_keys, relative.keys(finite)))
    by_row = row_relative(result, enclosure, zero, shown_at, places, None if tighter is None else tighter.ends(lo, hi))
    known = None
    if worst is not None:  # an entry is read only where its figures and its row's are decided
        figures, by_rows = ok.copy(), by_row.ok.copy()
        for p in decided:
            figures[p] = True
        for p in by_row.others:
            by_rows[p] = True
        known = (figures & by_rows) | ~finite
    if worst is None:
        exact_shown = shown_many(lo, hi)
    else:  # a report shows a few exact values: shown() each, from its ends, as it is read
        none = np.zeros(lo.shape, dtype=bool)
        exact_shown = (none, none.astype(np.int64), none.astype(np.int64))
    entries = EntryTable(
        lambda i, j: result.value(i, j),
        finite,
        ExactShown(
            *exact_shown,
            lo,
            hi,
            FLOAT_DIGITS,
            {p: exact for p, (_, exact) in decided.items()},
            None if tight is None else tight.row,
        ),
        ulps,
        relative,
        bucket,
        by_row,
        known,
        worst,
        result.array if result.array is not None and result.array.ndim == 2 else None,
        keys={"ulps": ulps_keys},
    )
    return Comparison(
        result.source,
        quantity,
        result.format,
        entries,
        result.not_finite,
        digits,
        refined=len(refined),
        enclose=lambda: enclosure,
    )


def _lean_decide(tight: lean.Tight, x: np.ndarray, x0: np.ndarray, exact_float: np.ndarray, fmt: str, worst, places):
    """decide and errors for a report of the ``worst`` largest errors on lean's ends: the rows of the entries
    it may show get float64's ends first (tight.rows, until no more are wanted), and only the entries it
    may show get their figures (no other is read: each ranks below those). ``places`` (places.Places or
    None): each head's summary, and the columns of one head's row (the scale of the row-relative figures)."""
    lo, hi = tight.lo, tight.hi
    width = (places.segment if places is not None else None) or lo.shape[1]
    raw = deciding.pieces(x0, lo, hi, fmt)
    while True:
        bounds = deciding.reported(raw, lo, hi)
        wanted = needed(x, exact_float, bounds, worst, places) | rowscale.may_be_largest(x, lo, hi, width)
        done = tight.rows(wanted)
        if not done:
            break
        for h, rows in done:
            at = np.ix_(rows, np.arange(tight.offsets[h], tight.offsets[h + 1]))
            again = deciding._errors(x0[at], lo[at], hi[at], fmt)
            for f in dataclasses.fields(raw):
                getattr(raw, f.name)[at] = getattr(again, f.name)
    shape, at = lo.shape, np.nonzero(wanted)
    ok = np.zeros(shape, dtype=bool)
    q_u, k_u, q_r, k_r = (np.zeros(shape, dtype=np.int64) for _ in range(4))
    got = deciding.decided(deciding.at(raw, at))
    ok[at] = got[0] & exact_float[at]
    (q_u[at], k_u[at]), (q_r[at], k_r[at]) = got[1], got[2]
    return ok, (q_u, k_u), (q_r, k_r), raw.bucket, bounds, wanted


def needed(x: np.ndarray, exact_float: np.ndarray, e: Errors, worst: int, places=None) -> np.ndarray:
    """The entries whose figures a report of the ``worst`` largest errors (and the largest relative error)
    may show: those whose bucket or bounds are open, and those whose upper bound reaches, within BELOW,
    the ``worst``-th largest lower bound (bucket, ULPs), or the largest lower bound of the relative error.
    Every other entry ranks below all of them, rounded to three digits too. With ``places`` (places.Places)
    of batch and head axes, also those of each (batch, head)'s block that its summary may show: its largest
    error and its largest relative error (the same rule on the block, with a worst of one)."""
    regions = [r for _, r in places.regions(x.shape)] if places is not None and places.has_heads else []

    def one(region: tuple[slice, slice] | None) -> np.ndarray:  # the whole's (None), or a block's
        if region is None:
            return _needed(x, exact_float, e, worst)
        block = Errors(*(getattr(e, f.name)[region] for f in dataclasses.fields(e)))
        return _needed(x[region], exact_float[region], block, 1)

    need, *blocks = map_threads(one, [None, *regions])
    for region, block_need in zip(regions, blocks):
        need[region] |= block_need
    return need


def _needed(x: np.ndarray, exact_float: np.ndarray, e: Errors, worst: int) -> np.ndarray:
    usable = e.bucket_ok & exact_float  # (bucket, ULPs) bounded, the bucket decided
    need = np.isfinite(x) & ~usable
    # buckets are a few small integers: the worst-th largest is read off their counts, from the top
    above = np.cumsum(np.bincount(e.bucket[usable], minlength=1)[::-1])  # above[k]: entries in the top k + 1
    if above[-1] > worst:
        # the worst-th largest lower bound in (bucket, ULPs) order: its bucket, then its ULPs in that bucket
        k = int(np.searchsorted(above, worst))
        top_b = len(above) - 1 - k
        rest = worst - (int(above[k - 1]) if k else 0)
        low = e.ulps_lo[usable & (e.bucket == top_b)]
        top = low.max() if rest == 1 else np.partition(low, -rest)[-rest]
        below = (e.bucket < top_b) | ((e.bucket == top_b) & (e.ulps_hi < top * BELOW))
        need |= usable & ~below
    else:
        need |= usable
    if exact_float.any():
        top = np.max(np.where(exact_float, e.relative_lo, 0.0))
        need |= exact_float & ~(e.relative_hi < top * BELOW)
    return need


__all__ = ["arrays_of", "compare_head", "head_of", "heads_of", "intervals", "needed"]
