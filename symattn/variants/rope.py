"""Rotary position embeddings (RoPE), one part: ``rope = true`` with ``rope_base`` and ``rope_style`` turns each
head's Q and K rows by position before the scores (after any projection).

Query i sits at position i and key j at position j (both from 0, in cross-attention too). ``half`` pairs
dimension t with t + d_k/2 (Llama's Hugging Face code, the default); ``interleaved`` pairs 2t with
2t + 1 (RoFormer). This module reads and checks the keys, declares what claims may name (each head's
rotated ``Q_rot`` and ``K_rot``) and makes the steps a document shows: the rotation before the scores,
and backward dQ and dK turned back. One head's rotation, exactly (why a score is rational where it is,
its enclosures, its gradient, the numbers shown), is :mod:`symattn.variants.rope_head`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

from symattn.exact.num import Num, NumRow, NumRows
from symattn.input.files import kind_of
from symattn.input.messages import said
from symattn.input.numeral import Numeral, parse_numeral
from symattn.input.records import record
from symattn.variants.base import ADD, QK, Part, Quantity, Where

if TYPE_CHECKING:  # one head's rotation is SymPy's: the spec reads the part without it
    import sympy

    from symattn.variants.rope_head import Rotated

# --- limits of RoPE ------------------------------------------------------------------------------
ROPE_BASE_MAX = 10**12  # rope_base from 1/10^12 to 10^12, numerator and denominator at most 10^12
ROPE_TERMS = 2_000_000  # cos/sin terms of the rotated scores: heads × queries × keys × d_k/2
ROOTS_MAX = 1440  # the N of the field Q(ζ_N) that rope_frequencies in multiples of π span (half a degree: 720)
FREQUENCY_MAX = 10**6  # |numerator| and denominator of a rope_frequencies entry

# --- the setting ---------------------------------------------------------------------------

ROPE_STYLES = ("half", "interleaved")
DEFAULT_BASE = parse_numeral("10000")
NEEDS = "rope = true (the rotated Q and K of RoPE)"  # what a claim on Q_rot or K_rot needs


@record
class Rope:
    """The rotation: pair t of a head turns by the angle p · base^(−2t/d_k) at position p."""

    base: Numeral = DEFAULT_BASE
    style: str = "half"
    frequencies: tuple[Frequency, ...] = ()  # given θ_t (rope_frequencies); () : base^(−2t/d_k)
    cos: tuple[tuple[Fraction, ...], ...] = ()  # given tables [position][pair] (rope_cos, rope_sin)
    sin: tuple[tuple[Fraction, ...], ...] = ()
    columns: tuple[int, int] | None = None  # (first, width): the only columns turned (Where.turned); None: all
    placed: bool = False  # the spec gives positions: the keys' angles are their own quantities (rope_key_*)

    @property
    def given(self) -> str:
        """How the turn is given: "base", "frequencies" or "tables"."""
        return "tables" if self.cos else "frequencies" if self.frequencies else "base"

    def pairs(self, d_k: int) -> tuple[tuple[int, int], ...]:
        """The 0-based dimensions (a, b) of each pair t, rotated as (a, b) ↦ (a cos − b sin, a sin + b cos)."""
        start, width = self.columns or (0, d_k)
        half = width // 2
        if self.style == "half":
            return tuple((start + t, start + t + half) for t in range(half))
        return tuple((start + 2 * t, start + 2 * t + 1) for t in range(half))

    def width(self, d_k: int) -> int:
        """How many columns turn: d_k, or the slice's (the angles' exponents −2t/width count them)."""
        return self.columns[1] if self.columns else d_k


# --- the angles people choose: rope_frequencies, rope_cos and rope_sin (symattn.variants.turns: exactness) ---

# a frequency's text: a decimal (radians), or a rational multiple of π; never evaluated, only matched
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_DEGREES = re.compile(rf"([+-]?{_NUMBER})\s*(?:deg|°)")
_PI = re.compile(rf"([+-]?)\s*({_NUMBER})?\s*\*?\s*(?:pi|π)\s*(?:/\s*([0-9]+))?")


@record
class Frequency:
    """θ_t: ``value`` radians, or ``value``·π where ``of_pi``."""

    text: str
    value: Fraction
    of_pi: bool

    @property
    def expr(self) -> sympy.Expr:
        import sympy

        r = sympy.Rational(self.value.numerator, self.value.denominator)
        return r * sympy.pi if self.of_pi else r


def parse_frequency(raw: object) -> Frequency | None:
    """A frequency from ``"30deg"``, ``"30°"``, ``"pi/6"``, ``"2pi/3"``, ``"-pi"``; None for anything else
    (a plain number is the reader's, in radians)."""
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    found = _DEGREES.fullmatch(text)
    if found:
        return Frequency(text, Fraction(found.group(1)) / 180, True)
    found = _PI.fullmatch(text)
    if found:
        sign, number, den = found.groups()
        if den is not None and int(den) == 0:
            return None
        value = Fraction(number or 1) / int(den or 1)
        return Frequency(text, -value if sign == "-" else value, True)
    return None


def read_frequencies(reader: Any, data: Any, pairs: int) -> tuple[Frequency, ...]:
    """``rope_frequencies``: one per pair, all in radians (> 0) or all rational multiples of π."""
    raw, key = data["rope_frequencies"], "rope_frequencies"
    if not isinstance(raw, list):
        raise reader.error(key, said("frequencies_list", pairs=pairs, got=kind_of(raw)))
    if len(raw) != pairs:
        raise reader.error(key, said("frequencies_count", pairs=pairs, n=len(raw)))
    out: list[Frequency] = []
    for t, x in enumerate(raw, 1):
        f = parse_frequency(x)
        if f is None:
            if isinstance(x, str) and any(w in x for w in ("deg", "°", "pi", "π")):
                raise reader.error(key, said("angle_unread", got=repr(x)), (t,))
            n = reader.number(x, key, (t,))
            if n.value <= 0:
                raise reader.error(key, said("frequency_positive", got=n.text), (t,))
            f = Frequency(n.text, n.value, False)
        if max(abs(f.value.numerator), f.value.denominator) > FREQUENCY_MAX:
            raise reader.limit(key, said("frequency_size", most=FREQUENCY_MAX), (t,))
        if out and f.of_pi != out[0].of_pi:
            raise reader.error(key, said("frequencies_mixed"), (t,))
        out.append(f)
    frequencies = tuple(out)
    if frequencies[0].of_pi:
        n = roots_needed(frequencies)
        if n > ROOTS_MAX:
            raise reader.limit(key, said("roots_limit", n=n, most=ROOTS_MAX))
    return frequencies


def read_tables(reader: Any, data: Any, positions: int, pairs: int) -> tuple[Any, Any]:
    """``rope_cos`` and ``rope_sin``: a row per position (0 to positions − 1), a column per pair, exact."""
    if ("rope_cos" in data) != ("rope_sin" in data):
        given, other = ("rope_cos", "rope_sin") if "rope_cos" in data else ("rope_sin", "rope_cos")
        raise reader.error(given, said("tables_pair", other=other))
    out = []
    for key in ("rope_cos", "rope_sin"):
        rows = reader.matrix(data[key], key)
        if len(rows) != positions or any(len(row) != pairs for row in rows):
            width = len(rows[0]) if rows else 0
            got = f"{len(rows)}×{width}"
            raise reader.error(key, said("tables_shape", positions=positions, last=positions - 1, pairs=pairs, got=got))
        out.append(tuple(tuple(x.value for x in row) for row in rows))
    return out[0], out[1]


def roots_needed(frequencies: tuple[Frequency, ...]) -> int:
    """The smallest N, a multiple of 4, whose Q(ζ_N) holds cos and sin of every p·θ_t (θ_t = 2π·value/2)."""
    n = 4
    for f in frequencies:
        n = math.lcm(n, (f.value / 2).denominator)
    return n


# --- the steps of a derivation ---------------------------------------------------------------------


@record
class RotatedPair:
    """Pair t of the focus query: dimensions (a, b) (0-based) turned by the angle p·θ_t."""

    t: int
    a: int
    b: int
    angle: Any  # a Formula: exact, p·base^(−2t/d_k)
    cos: Num
    sin: Num
    x_a: Numeral  # the query's entries before the rotation
    x_b: Numeral
    out_a: Num  # after it
    out_b: Num


@record
class Rotation:
    kind: ClassVar[str] = "rotation"
    style: str  # "half" or "interleaved"
    base: Numeral
    d_k: int
    position: int  # of the focus query (0-based, as RoPE counts)
    pairs: tuple[RotatedPair, ...]
    Q_rot: NumRows
    K_rot: NumRows
    scores_before: NumRow  # the focus row of Q Kᵀ without RoPE
    scores_after: NumRow  # and with it
    cross: bool  # keys numbered from 0 as the queries are
    given: str = "base"  # how the turn is given: "base", "frequencies" or "tables" (Rope.given)
    frequencies: tuple[Any, ...] = ()  # θ_t as Formulas, where given
    not_rotations: tuple[int, ...] = ()  # positions of given tables where some pair has cos² + sin² ≠ 1
    turned: tuple[int, int] | None = None  # (first, width) of the only columns turned (Rope.columns)
    key_positions: tuple[int, ...] = ()  # at given positions: each key's, and its cos and sin [key][pair] as shown
    key_cos: NumRows = ()
    key_sin: NumRows = ()
    query_positions: tuple[int, ...] = ()  # at given positions: each query's
    zero: tuple[int, int] = (1, 1)  # its place among the steps before step 1, and how many (see forward.py)


@record
class TurnedBack:
    """Pair t of one gradient row turned back: (dx_a, dx_b) = Rᵀ (dx′_a, dx′_b) by the angle p·θ_t."""

    t: int
    a: int
    b: int
    angle: Any  # a Formula
    cos: Num
    sin: Num
    rotated_a: Num  # dx′_a, dx′_b: the gradient of the rotated row
    rotated_b: Num
    out_a: Num  # dx_a, dx_b
    out_b: Num


@record
class GradRotation:
    """dQ = Rᵀ dQ′ and dK = Rᵀ dK′: the focus query's and one key's pairs turned back, and both matrices."""

    kind: ClassVar[str] = "backward_rotation"
    query: int  # the focus query (its position)
    key: int  # the key shown pair by pair (the focus row's top key)
    query_pairs: tuple[TurnedBack, ...]
    key_pairs: tuple[TurnedBack, ...]
    dQ: NumRows
    dQ_exact: bool
    dK: NumRows
    dK_exact: bool
    tables: bool = False  # given cos/sin tables: the turn need not be a rotation, its transpose no inverse


# --- the part -------------------------------------------------------------------------------------


class RopePart(Part):
    name = "rope"
    keys = ("rope", "rope_base", "rope_style", "rope_frequencies", "rope_cos", "rope_sin")
    stage = QK
    title = "RoPE"
    unstated = keys
    web_fields = (
        {"key": "rope", "kind": "flag", "choices": ["false", "true"], "default": "false"},
        {"key": "rope_base", "kind": "text", "default": ""},
        {"key": "rope_style", "kind": "select", "choices": list(ROPE_STYLES), "default": "half"},
        {"key": "rope_frequencies", "kind": "list", "default": "", "hint": "frequencies_hint"},
        {"key": "rope_cos", "kind": "table", "default": ""},
        {"key": "rope_sin", "kind": "table", "default": ""},
    )
    turn_quantities = ("rope_cos", "rope_sin")  # what an exercise sheet states of the turn, where exact
    angles = ("rope_angle", "rope_key_angle")  # "90deg", "3pi/4": as the document writes them (parse_frequency)
    quantities = (
        Quantity("rope_frequency", "scores", rows="pair", cols=None, asked_by="scores", needs=NEEDS),
        Quantity("rope_angle", "scores", cols="pair", width="pairs", asked_by="scores", needs=NEEDS),
        Quantity("rope_cos", "scores", cols="pair", width="pairs", asked_by="scores", needs=NEEDS),
        Quantity("rope_sin", "scores", cols="pair", width="pairs", asked_by="scores", needs=NEEDS),
        Quantity("rope_key_angle", "scores", rows="key", cols="pair", width="pairs", asked_by="scores", needs=NEEDS),
        Quantity("rope_key_cos", "scores", rows="key", cols="pair", width="pairs", asked_by="scores", needs=NEEDS),
        Quantity("rope_key_sin", "scores", rows="key", cols="pair", width="pairs", asked_by="scores", needs=NEEDS),
        Quantity("Q_rot", "scores", cols="dim", width="d_q", asked_by="scores", needs=NEEDS),
        Quantity("K_rot", "scores", rows="key", cols="dim", width="d_q", asked_by="scores", needs=NEEDS),
    )
    step_kinds = ("rotation", "backward_rotation")
    facts = (("toy_vs_real", "rope", False),)
    rounded_read = True
    turns_slice = True
    certify = "--certify does not cover RoPE yet"

    def read(self, reader: Any, data: Mapping[str, Any], where: Where) -> Rope | None:
        """``rope = true`` with optional ``rope_base`` and ``rope_style``; None without RoPE."""
        on = reader.flag(data["rope"], "rope") if "rope" in data else False
        if not on:
            for key in self.keys[1:]:
                if key in data:
                    raise reader.error(key, said("needs_rope"))
            return None
        d_k = where.turned[1] if where.turned else where.d_k  # the columns it turns
        if d_k % 2:
            raise reader.error("rope", said("rope_odd", d_k=d_k))
        if where.symbolic_qk:
            raise reader.error("rope", said("rope_symbols"))
        if data.get("inputs") == "rounded":
            raise reader.error("inputs", said("rope_rounded"))
        base = DEFAULT_BASE
        if "rope_base" in data:
            base = reader.number(data["rope_base"], "rope_base")
            if base.value <= 0:
                raise reader.error("rope_base", said("must_be_positive", text=repr(base.text)))
            low, high = Fraction(1, ROPE_BASE_MAX), Fraction(ROPE_BASE_MAX)
            if not low <= base.value <= high or max(base.value.numerator, base.value.denominator) > ROPE_BASE_MAX:
                raise reader.limit("rope_base", said("rope_base_range", got=base.text, most=ROPE_BASE_MAX))
        style = reader.choice(data.get("rope_style", "half"), "rope_style", ROPE_STYLES)
        given = [key for key in ("rope_base", "rope_frequencies", "rope_cos") if key in data]
        if len(given) > 1:
            raise reader.error(given[1], said("rope_one_of", first=given[0]))
        placed = [key for key in ("positions", "key_positions") if key in data]
        chosen = [key for key in ("rope_cos", "rope_sin") if key in data]
        if placed and chosen:  # a table's rows are positions 0, 1, …: given positions may lie far past them
            raise reader.error(chosen[0], said("rope_positions", key=placed[0]))
        frequencies = read_frequencies(reader, data, d_k // 2) if "rope_frequencies" in data else ()
        if frequencies and frequencies[0].of_pi:
            from symattn import variants  # here: the registry imports this module

            for other in variants.PARTS:  # an additive part's basis is not in their field (symattn.variants.turns)
                if other.stage == ADD and other.read(reader, data, where) is not None:
                    raise reader.error("rope_frequencies", said("pi_combine", part=other.title))
        cos, sin = (
            read_tables(reader, data, max(where.n_q, where.n_k), d_k // 2)
            if "rope_cos" in data or "rope_sin" in data
            else ((), ())
        )
        terms = where.heads * where.n_q * where.n_k * (d_k // 2)
        if terms > ROPE_TERMS:
            shape = f"{where.n_q}×{where.n_k}"
            raise reader.limit(
                "rope", said("rope_terms", shape=shape, heads=where.heads, pairs=d_k // 2, n=terms, most=ROPE_TERMS)
            )
        return Rope(base, style, frequencies, cos, sin, where.turned, bool(placed))

    def lacks(self, setting: Rope, name: str) -> str | None:
        """Tables give no angles, keys at no given positions no rope_key_* of their own: refused in one line."""
        if setting.cos and name in ("rope_frequency", "rope_angle"):
            return "angles, which rope_cos and rope_sin do not give (they give cos and sin)"
        if name.startswith("rope_key_") and not setting.placed:
            return "positions or key_positions (without them key j sits at position j: claim rope_angle[j] and so on)"
        return None

    def head_part(self, setting: Rope, spec: Any) -> Rotated:
        import sympy

        from symattn.variants.rope_head import Rotated, RotatedByPi, Tabled
        from symattn.variants.turns import Cyclotomic

        pairs = setting.pairs(spec.d_k)
        if setting.cos:
            return Tabled(pairs, (), cos=setting.cos, sin=setting.sin)
        placed = spec.setting("positions")  # the tokens' positions where the spec gives them (a KV cache's)
        q_pos, k_pos = ((), ()) if placed is None else (placed.queries, placed.keys)
        if setting.frequencies:
            thetas = tuple(f.expr for f in setting.frequencies)
            if setting.frequencies[0].of_pi:
                halves = tuple(f.value / 2 for f in setting.frequencies)
                field = Cyclotomic(roots_needed(setting.frequencies))
                return RotatedByPi(pairs, thetas, q_pos, k_pos, field=field, halves=halves)
            return Rotated(pairs, thetas, q_pos, k_pos)
        base = sympy.Rational(setting.base.value.numerator, setting.base.value.denominator)
        thetas = tuple(base ** sympy.Rational(-2 * t, setting.width(spec.d_k)) for t in range(len(pairs)))
        return Rotated(pairs, thetas, q_pos, k_pos)

    def toy(self, spec: Any, setting: Any) -> tuple[tuple[str, Any], ...]:
        return (("rope", True),)

    def shape(self, spec: Any, setting: Rope, quantity: str) -> tuple[int, ...] | None:
        """With only some columns turned (MLA's decoupled dims): one angle, cos and sin per turned pair."""
        if setting.columns is None or quantity in ("Q_rot", "K_rot"):
            return None
        pairs, rows = setting.columns[1] // 2, len(spec.K if quantity.startswith("rope_key_") else spec.Q)
        return (pairs,) if quantity == "rope_frequency" else (rows, pairs)

    def _shown(self, spec: Any, model: Any) -> Any:
        return model.qk.shown(model, spec.decimals.scores, spec.notation, spec.rounding == "hand")

    def scores_step(self, spec: Any, model: Any, fig: Any) -> tuple[Rotation, NumRows, NumRows]:
        """The rotation step, with cos, sin, Q' and K' as the rounding mode shows them (to the scores'
        decimals); the scores step then shows the dots of Q' and K'."""
        from symattn.exact.rounding import exact_or_rounded
        from symattn.input.formula import Formula

        part, shown, f = model.qk, self._shown(spec, model), spec.focus
        pairs = tuple(
            RotatedPair(
                t,
                a,
                b,
                Formula("", part.angle(part.place("Q", f), t)) if part.thetas else None,
                shown.trig[part.place("Q", f)][t][0],
                shown.trig[part.place("Q", f)][t][1],
                spec.Q[f][a],
                spec.Q[f][b],
                shown.Q_rot[f][a],
                shown.Q_rot[f][b],
            )
            for t, (a, b) in enumerate(part.pairs)
        )
        den = model.dq * model.dk
        before = exact_or_rounded(
            [[Fraction(int(x), den) for x in model.s.to_list()[f]]], spec.decimals.scores, spec.notation
        )[0]
        rope = spec.setting("rope")
        keys = tuple(part.place("K", j) for j in range(len(spec.K))) if rope.placed else ()
        key_trig = [shown.trig[p] for p in keys]
        step = Rotation(
            rope.style,
            rope.base,
            rope.width(model.d_k),
            part.place("Q", f),
            pairs,
            shown.Q_rot,
            shown.K_rot,
            before,
            fig.scores[f],
            spec.is_cross,
            rope.given,
            tuple(Formula("", x.expr) for x in rope.frequencies),
            tuple(
                p
                for p, (cs, ss) in enumerate(zip(rope.cos, rope.sin))
                if any(c * c + s * s != 1 for c, s in zip(cs, ss))
            ),
            rope.columns,
            keys,
            tuple(tuple(c for c, _ in row) for row in key_trig),
            tuple(tuple(s for _, s in row) for row in key_trig),
            tuple(part.place("Q", i) for i in range(len(spec.Q))) if rope.placed else (),
        )
        return step, shown.Q_rot, shown.K_rot

    def backward_inputs(self, spec: Any, model: Any) -> tuple[NumRows, NumRows]:
        """Q′ and K′ as the rotation step shows them."""
        shown = self._shown(spec, model)
        return shown.Q_rot, shown.K_rot

    def backward_after_qk(self, spec: Any, model: Any, g: Mapping[str, Any], key: int) -> tuple[GradRotation]:
        from symattn.exact.rounding import is_exact
        from symattn.input.formula import Formula

        part, shown = model.qk, self._shown(spec, model)

        def pairs(r: int, which: str, rotated: NumRows, out: NumRows) -> tuple[TurnedBack, ...]:
            p = part.place(which, r)  # row r's position
            return tuple(
                TurnedBack(
                    t,
                    a,
                    b,
                    Formula("", part.angle(p, t)) if part.thetas else None,
                    shown.trig[p][t][0],
                    shown.trig[p][t][1],
                    rotated[r][a],
                    rotated[r][b],
                    out[r][a],
                    out[r][b],
                )
                for t, (a, b) in enumerate(part.pairs)
            )

        f = spec.focus
        return (
            GradRotation(
                f,
                key,
                pairs(f, "Q", g["dQ_rot"], g["dQ"]),
                pairs(key, "K", g["dK_rot"], g["dK"]),
                g["dQ"],
                is_exact(g["dQ"]),
                g["dK"],
                is_exact(g["dK"]),
                bool(spec.setting("rope").cos),
            ),
        )

    def exact_turn(self, spec: Any) -> tuple[tuple[tuple[Fraction, ...], ...], ...]:
        """Each token's cos and sin per pair, exactly, as a sheet states them; one line where one is no exact
        decimal (cos 30° = √3/2), naming the key that gave the angles."""
        from symattn.exact.heads import build_model
        from symattn.exact.numeric import as_fraction
        from symattn.input.decimals import terminating_decimals
        from symattn.input.errors import SpecError

        key = {"tables": "rope_cos", "frequencies": "rope_frequencies", "base": "rope"}[spec.setting(self.name).given]
        model = build_model(spec)
        out = []
        for quantity in self.turn_quantities:
            rows = []
            for row in model.exact(quantity).tolist():
                values = [as_fraction(x) for x in row]
                if any(x is None or terminating_decimals(x) is None for x in values):
                    raise SpecError(spec.source, key, said("sheet_turn"))
                rows.append(tuple(x for x in values if x is not None))
            out.append(tuple(rows))
        return tuple(out)


PART = RopePart()

__all__ = ["PART", "ROPE_STYLES", "GradRotation", "Rope", "RopePart", "RotatedPair", "Rotation", "TurnedBack"]
