"""Every value a certificate shows, proved from its inputs: the exact value, enclosed at rising precision
(:mod:`.arithmetic`), lies in the certificate's float ± bound and rounds half-up to the digits shown.

A value is proved when its enclosure lies inside both (and, in version 2, inside the enclosure the
certificate gives for a value of path "a"), refuted when it lies outside one, and refined at twice the
precision otherwise. No enclosure shrinks to a point, so a value that is exactly on a rounding boundary
(an exact 0, say) is proved only where its exact value is known here, by these rules (the same ones
docs/kernel.md gives for the certificates' path "a"):

- an output whose row's allowed scores are all equal: the mean of V's column over the allowed keys; an
  output whose V column is one value over the allowed keys: that value;
- a log-sum-exp of one allowed key whose score is 0: 0;
- dQ_ic = 0 where dP_ij = dO_i·V_j is one value over the allowed keys (then dS_i = 0), or K's column c is
  one value over them (then Σ_j dS_ij K_jc = K_c Σ_j dS_ij = 0);
- dK_jc = 0 where each query (of each head of the group) that attends key j has dS_i = 0 or Q_ic = 0;
  dV_jk = 0 where each one has dO_ik = 0.

With denominator logits (a term e^s of each row's ℓ with no value) a row's weights add up to less than 1,
so of these only the zeros term by term hold: dK_jc = 0 where each such query has Q_ic = 0, dV_jk = 0 where
each has dO_ik = 0. With a distance bias (z = c·S − m·|i − j|) equal scores are no longer equal z: the
output's rule of equal scores and the log-sum-exp's rule are off. With a tanh cap (z ← c·tanh(z/c)) equal
scores still give equal z and a score of 0 a z of 0, but dQ sums dS_ij·(1 − tanh²(z_ij/c))·K_jc, so the dQ
rule of a K column of one value is off.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from operator import mul

from .arithmetic import Exact, Row, scaled
from .reading import QUANTITIES, Certificate, Table
from .values import shown

START_BITS = 96
MAX_BITS = 1 << 13
CHUNK_SCORES = 1 << 22  # dS entries held at once for dK and dV


class Value:
    """One shown value and what it must lie in: its rounding cell and the certificate's float ± bound."""

    def __init__(self, table: Table, r: int, c: int, given, digits: int):
        self.index = _index(table, r, c)
        self.where = f"{table.name}[{', '.join(map(str, self.index))}]"  # output[1, 2, 77, 5]
        self.order = (QUANTITIES.index(table.name), self.index)  # where its line goes: places in numeric order
        text = table.values[r][c]
        self.shown = shown(text, f"{table.name}.value", (r + 1, c + 1), digits)  # its form, or refused in one line
        form = Decimal(text).as_tuple()
        exponent = int(form.exponent)  # a finite value's: shown took only digits
        self.half = Fraction(10) ** exponent / 2 if self.shown else Fraction(0)
        # toward zero the cell is as wide, except below a power of ten: there the digits step ten times finer
        # (0.99999999995 ≤ x < 1 rounds to 1.000000000, but 0.9999999997 to itself)
        power = self.shown != 0 and abs(self.shown) == Fraction(10) ** (exponent + len(form.digits) - 1)
        self.inner = self.half / 10 if power else self.half
        f, b = Fraction(table.floats[r][c]), table.bounds[r][c]
        self.f_lo: Fraction | None = None if b == float("inf") else f - Fraction(b)
        self.f_hi: Fraction | None = None if b == float("inf") else f + Fraction(b)
        self.given = given  # version 2: the enclosure, or the exact fraction, of a value of path "a"
        self.text = text

    def judge(self, lo: Fraction, hi: Fraction) -> bool | str | None:
        """True: proved; a text: refuted; None: not yet decided at this precision."""
        s, half, inner = self.shown, self.half, self.inner
        if s == 0:
            inside, outside = lo == hi == 0, lo > 0 or hi < 0
        elif s > 0:  # half-up: [s − inner, s + half)
            inside, outside = s - inner <= lo and hi < s + half, hi < s - inner or lo >= s + half
        else:  # (s − half, s + inner]
            inside, outside = s - half < lo and hi <= s + inner, hi <= s - half or lo > s + inner
        if outside:
            return f"{self.where}: the exact value does not round to {self.text}"
        if self.f_lo is not None:
            if hi < self.f_lo or lo > self.f_hi:  # type: ignore[operator]
                return f"{self.where}: the exact value is outside the certificate's float ± bound"
            inside = inside and self.f_lo <= lo and hi <= self.f_hi  # type: ignore[operator]
        if isinstance(self.given, Fraction):
            if lo == hi:
                return True if lo == self.given else f"{self.where}: the exact value is not {self.given}"
            inside = False
        elif self.given is not None:
            g_lo, g_hi = self.given
            if hi < g_lo or lo > g_hi:
                return f"{self.where}: the exact value is outside the certificate's enclosure"
            inside = inside and g_lo <= lo and hi <= g_hi
        return True if inside else None


def _index(table: Table, r: int, c: int) -> tuple[int, ...]:
    """The value's place, 0-based, in the quantity's own axes: (1, 2, 77, 5)."""
    index, rest = [c], r
    for n in reversed(table.shape[:-1]):
        rest, i = divmod(rest, n)
        index.append(i)
    return tuple(reversed(index))


def verify_values(cert: Certificate) -> tuple[int, list[str]]:
    """(values proved, one line per value refuted or not decided, in the certificate's order of quantities and
    each one's places in numeric order: lse2[0, 0, 2] before lse2[0, 0, 10])."""
    failures: list[tuple[tuple, str]] = []
    pending = {
        name: {
            (r, c): Value(t, r, c, cert.enclosures.get((r, c)) if name == "output" else None, cert.digits)
            for r in range(len(t.values))
            for c in range(t.shape[-1])
        }
        for name, t in cert.tables.items()
    }
    exact = Exact(cert.inputs)
    total, bits = sum(map(len, pending.values())), START_BITS
    while any(pending.values()) and bits <= MAX_BITS:
        for name, (r, c), lo, hi in _enclosures(exact, pending, bits):
            value = pending[name][(r, c)]
            outcome = value.judge(lo, hi)
            if outcome is not None:
                failures += [] if outcome is True else [(value.order, str(outcome))]
                del pending[name][(r, c)]
        if bits == START_BITS:
            for name, (r, c), x in _exact_values(exact, pending):
                value = pending[name][(r, c)]
                outcome = value.judge(x, x)
                if outcome is not None:
                    failures += [] if outcome is True else [(value.order, str(outcome))]
                    del pending[name][(r, c)]
        bits *= 2
    failures += [(v.order, f"{v.where}: not decided at {MAX_BITS} bits") for p in pending.values() for v in p.values()]
    return total - len(failures), [line for _, line in sorted(failures)]


def _enclosures(exact: Exact, pending: dict, bits: int):
    """(quantity, (row, column), lo, hi) for each pending value, at 2^-bits."""
    t = exact.inputs
    n, m, G = t.queries, t.keys, t.heads // t.kv_heads
    wanted: dict[tuple[int, int, int], dict[str, list[int]]] = {}  # (b, h, i): {quantity: columns}
    for name in ("output", "dq"):
        for r, c in pending.get(name, {}):
            wanted.setdefault((r // (t.heads * n), r // n % t.heads, r % n), {}).setdefault(name, []).append(c)
    for name in ("lse", "lse2"):
        for r, i in pending.get(name, {}):
            wanted.setdefault((r // t.heads, r % t.heads, i), {})[name] = [0]
    for b in range(t.batch):
        for g in range(t.kv_heads):
            group = {
                name: [(r % m, c) for r, c in pending.get(name, {}) if r // m == b * t.kv_heads + g]
                for name in ("dk", "dv")
            }
            every = any(group.values())
            chunk: list[Row] = []
            sums = {name: {key: [0, 0] for key in keys} for name, keys in group.items()}
            for h in range(g * G, (g + 1) * G):
                head = exact.head(b, h)
                for i in range(n) if every else sorted(i for (bb, hh, i) in wanted if (bb, hh) == (b, h)):
                    row = Row(head, i, bits)
                    asked = wanted.get((b, h, i), {})
                    yield from _row_values(row, asked, (b * t.heads + h) * n + i, b * t.heads + h, exact)
                    if every:
                        chunk.append(row)
                        if len(chunk) * m >= CHUNK_SCORES:
                            _accumulate(chunk, sums, exact)
                            chunk = []
            if every:
                _accumulate(chunk, sums, exact)
                for name, entries in sums.items():
                    for (j, c), (mid, rad) in entries.items():
                        r = (b * t.kv_heads + g) * m + j
                        if name == "dk":
                            lo, hi = scaled(mid, rad, bits + 1 + exact.gs + exact.vs + exact.qs, exact.scale(bits + 16))
                        else:
                            unit = 1 << (bits + 1 + exact.gs)
                            lo, hi = Fraction(mid - rad, unit), Fraction(mid + rad, unit)
                        yield name, (r, c), lo, hi


def _row_values(row: Row, asked: dict[str, list[int]], r: int, lse_row: int, exact: Exact):
    for k in asked.get("output", []):
        yield ("output", (r, k), *row.output(k))
    for name in ("lse", "lse2"):
        if name in asked:
            yield (name, (lse_row, row.i), *row.lse(name == "lse2"))
    if "dq" in asked:
        row.backward()
        unit = row.bits + 1 + exact.gs + exact.vs + exact.ks
        for c in asked["dq"]:
            yield ("dq", (r, c), *scaled(*row.dq(c), unit, exact.scale(row.bits + 16)))


def _accumulate(rows: list[Row], sums: dict, exact: Exact) -> None:
    """Add the rows' terms of the pending dK (dS_ij·Q_ic) and dV (A_ij·dO_ik) entries, by dot products."""
    if not rows:
        return
    for row in rows:
        if not hasattr(row, "s_mid"):
            row.backward()
    if sums["dk"]:
        s_mid, s_rad = list(zip(*(row.s_mid for row in rows))), list(zip(*(row.s_rad for row in rows)))
        Q = list(zip(*(row.head.Q[row.i] for row in rows)))
        absQ = [list(map(abs, col)) for col in Q]
        for (j, c), acc in sums["dk"].items():
            acc[0] += sum(map(mul, s_mid[j], Q[c]))
            acc[1] += sum(map(mul, s_rad[j], absQ[c]))
    if sums["dv"]:
        a_mid, a_rad = list(zip(*(row.a_mid for row in rows))), list(zip(*(row.a_rad for row in rows)))
        dO = list(zip(*(row.head.dO[row.i] for row in rows)))  # type: ignore[index]
        absO = [list(map(abs, col)) for col in dO]
        for (j, k), acc in sums["dv"].items():
            acc[0] += sum(map(mul, a_mid[j], dO[k]))
            acc[1] += sum(map(mul, a_rad[j], absO[k]))


def _exact_values(exact: Exact, pending: dict):
    """(quantity, (row, column), exact value) of the pending values these rules know exactly."""
    t = exact.inputs
    n, m, G = t.queries, t.keys, t.heads // t.kv_heads

    def one(values: list) -> bool:
        return len(set(values)) == 1

    flat: dict[tuple[int, int, int], bool] = {}

    def still(b: int, h: int, i: int) -> bool:
        """dS_i = 0: dP_ij is one value over the keys query i attends."""
        if (b, h, i) not in flat:
            head = exact.head(b, h)
            dP = head.grads(i)
            flat[(b, h, i)] = one([dP[j] for j in head.allowed(i)])
        return flat[(b, h, i)]

    sunk = t.logits is not None  # weights that add up to less than 1: the zeros term by term alone
    biased = t.slopes is not None  # z = c·S − m·|i − j|: equal scores are no longer equal z
    capped = t.tanh_cap is not None  # dQ sums dS_ij·(1 − tanh²)·K_jc: a K column of one value no longer gives 0
    for name, entries in pending.items():
        for r, c in list(entries):
            if name in ("output", "dq", "lse", "lse2"):
                if sunk:
                    continue
                b, h, i = (
                    (r // t.heads, r % t.heads, c)
                    if name.startswith("lse")
                    else (r // (t.heads * n), r // n % t.heads, r % n)
                )
                head = exact.head(b, h)
                keys = head.allowed(i)
                if name == "output":
                    S, column = head.scores(i), [head.V[j][c] for j in keys]
                    if not biased and one([S[j] for j in keys]) or one(column):
                        yield name, (r, c), Fraction(sum(column), len(keys) << exact.vs)
                elif name.startswith("lse"):
                    if not biased and len(keys) == 1 and head.scores(i)[keys[0]] == 0:
                        yield name, (r, c), Fraction(0)
                elif still(b, h, i) or not capped and one([head.K[j][c] for j in keys]):
                    yield name, (r, c), Fraction(0)
                continue
            b, g, j = r // (t.kv_heads * m), r // m % t.kv_heads, r % m
            attends = [(h, i) for h in range(g * G, (g + 1) * G) for i in range(n) if j in exact.head(b, h).allowed(i)]
            if name == "dv":
                zero = all(exact.head(b, h).dO[i][c] == 0 for h, i in attends)  # type: ignore[index]
            else:
                zero = all(exact.head(b, h).Q[i][c] == 0 or not sunk and still(b, h, i) for h, i in attends)
            if zero:
                yield name, (r, c), Fraction(0)


__all__ = ["verify_values"]
