"""MLA on an exercise sheet (issue 32): a template's ``[mla]`` table, its ``[vary.mla]`` rules, and the MLA
quantities a sheet may ask (the latent c_KV, the absorbed query q̃, the latent output u = P c_KV).

A template with them::

    mla_route = "absorbed"
    ask = ["latent", "absorbed_query", "scores", "weights", "latent_output", "output"]
    [mla]
    X = [[1, 0, 1], [0, 1, 1], [1, 1, 0]]       # the shapes of every matrix (and its numbers, where not drawn)
    W_DKV = [[1, 0], [0, 1], [0.5, 0.5]]
    W_UK = [[1, 0], [1, 1]]
    W_UV = [[1, 0], [0, 2]]
    W_Q = [[1, 0], [0, 1], [0, 0]]
    [vary.mla]
    X = { range = [-1, 1], step = 1, nonzero = true }   # redrawn in the shape [mla] gives it

Q, K and V are made from the table, so a sheet states the table and the route, never Q, K, V themselves.
The latent and q̃ are exact decimals (products of decimals); u is rounded as the output is.

With the decoupled position dims (W_QR, W_KR, and the turn by position) the sheet also states the turn: each
token's cos and sin per pair, as matrices C and S. So a sheet takes the turn only where those are exact
decimals at every token: given cos and sin tables, or frequencies of multiples of 90°; angles such as 30° or
the base's (cos 1) are refused in one line (the turning part's exact_turn).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from symattn import variants
from symattn.input.decimals import round_half_up
from symattn.input.files import kind_of

QUANTITIES = ("latent", "absorbed_query", "latent_output")
# what a sheet states and may vary
STATED = ("X", "W_DKV", "W_UK", "W_UV", "W_Q", "W_DQ", "W_UQ", "W_QR", "W_KR")
# the keys of the turn a sheet with the decoupled dims states (as each token's cos and sin)
TURN_KEYS = variants.turner().keys


def matrices(base: Mapping[str, Any]) -> tuple[str, ...]:
    """The [mla] table's matrices in the order a sheet shows them; () without the table."""
    table = base.get("mla")
    return tuple(k for k in STATED if k in table) if isinstance(table, Mapping) else ()


def stated(spec: Any) -> tuple[tuple[str, Any], ...]:
    """The [mla] table's matrices a sheet states, (name, numerals) in the order it shows them; () without."""
    setting = spec.setting("mla")
    if setting is None:
        return ()
    table = (("X", setting.X), ("W_DKV", setting.W_DKV), ("W_UK", setting.W_UK), ("W_UV", setting.W_UV))
    if setting.W_QR is None or setting.W_KR is None:
        return table + setting.query
    names = variants.turner().turn_quantities
    turned = tuple((name, variants.numerals(rows)) for name, rows in zip(names, turn(spec), strict=True))
    return table + setting.query + (("W_QR", setting.W_QR), ("W_KR", setting.W_KR)) + turned


def turn(spec: Any) -> Any:
    """Each token's cos and sin per pair of the decoupled dims, exactly; one line where a sheet cannot state
    them as exact decimals, or where a key's position is not its query's (the sheet names one per token)."""
    from symattn.input.errors import SpecError

    if spec.setting("positions") is not None:
        raise SpecError(spec.source, "positions", "an exercise sheet turns each token by its own row's position")
    return variants.turner().exact_turn(spec)


def check_turn(spec: Any) -> None:
    """One line where the spec's decoupled dims turn by angles a sheet cannot state (see :func:`turn`)."""
    if pairs(spec):
        turn(spec)


def pairs(spec: Any) -> tuple[tuple[int, int], ...]:
    """The pairs a sheet's decoupled dims turn, 1-based within q_R: (1, 2), or (t, t + d_r/2)."""
    setting = spec.setting("mla")
    if setting is None:
        return ()
    turned = variants.turn_pairs(spec, setting.d_nope + setting.d_r)
    return tuple((a - setting.d_nope + 1, b - setting.d_nope + 1) for a, b in turned)


def route(spec: Any) -> str:
    setting = spec.setting("mla")
    return "naive" if setting is None else setting.route


def states(key: str, data: Mapping[str, Any]) -> bool:
    """Whether a sheet states a key that sheets otherwise leave unsaid: the turn's, beside the decoupled dims."""
    table = data.get("mla")
    return key in TURN_KEYS and isinstance(table, Mapping) and "W_KR" in table


def check_template(reader: Any, data: Mapping[str, Any], vary: Mapping[str, Any], ask: list[Any]) -> None:
    """One line for what a sheet cannot say: Q, K, V or their widths beside [mla], decoupled dims, MLA
    quantities asked without [mla], and [vary.mla] rules that name no matrix of the table."""
    table = data.get("mla")
    for i, q in enumerate(ask, 1):
        if q in QUANTITIES and table is None:
            raise reader.error("ask", f"{q} is asked only with an [mla] table", (i,))
    rules = vary.get("mla")
    if table is None:
        if rules is not None:
            raise reader.error("vary.mla", "varies an [mla] table, but the template has none")
        return
    if not isinstance(table, Mapping):
        return  # the spec's reader says what is wrong with it
    for key in ("Q", "K", "V", "d_k", "d_v"):
        if key in vary:
            raise reader.error(f"vary.{key}", "with an [mla] table Q, K and V are made from it; vary its matrices")
    if rules is None:
        return
    if not isinstance(rules, Mapping):
        raise reader.error(
            "vary.mla", f"expected a table of rules such as X = {{ range = [-1, 1], step = 1 }}, got {kind_of(rules)}"
        )
    for key in rules:
        if key not in matrices(data):
            raise reader.error(
                f"vary.mla.{key}", "no such matrix in [mla]; expected one of " + ", ".join(matrices(data))
            )


def draw_into(data: dict[str, Any], rules: Any, number: Any) -> None:
    """The [mla] table with each varied matrix redrawn in its own shape (``number(rule)`` draws one entry)."""
    if not isinstance(data["mla"], Mapping):
        return  # the spec's reader names what is wrong with it
    table = dict(data["mla"])
    for name, rule in rules:
        shape = table[name]
        if not isinstance(shape, list) or not all(isinstance(row, list) for row in shape):
            continue  # left as it is: the spec's reader names what is wrong with it
        rows = [[number(rule) for _ in row] for row in shape]
        for (i, j), text in rule.fixed:
            if i < len(rows) and j < len(rows[0]):
                rows[i][j] = text
        table[name] = rows
    data["mla"] = table


def asked_cols(spec: Any, quantity: str) -> range:
    """The columns an MLA quantity has: the latent's d_c."""
    return range(len(spec.setting("mla").W_DKV[0]))


def values(spec: Any, model: Any, quantity: str) -> Any:
    """An MLA quantity's rows as the key shows them: the latent and q̃ exact, u rounded as the output."""
    from symattn.exact.rounding import exact_or_rounded, from_model

    setting = spec.setting("mla")
    d, notation = spec.decimals, spec.notation
    if quantity == "latent_output":
        return from_model(variants.view(spec, quantity, model), quantity, d.output, notation)
    exact = setting.latent if quantity == "latent" else setting.absorbed
    return exact_or_rounded(exact, d.scores, notation)


def hand_agrees(spec: Any, model: Any, hand_weights: Any, rows: Any) -> bool:
    """Whether u from the hand chain's shown weights and the exact latent, rounded to the output's decimals,
    shows the key's digits, and no exact entry of u lies within 10⁻⁹ of a rounding boundary."""
    shown = values(spec, model, "latent_output")
    view = variants.view(spec, "latent_output", model)
    latent = spec.setting("mla").latent
    for i in rows:
        for c, num in enumerate(shown[i]):
            if num.scientific or num.is_infinite:
                return False
            places = max(0, -num.value.as_tuple().exponent)
            hand = sum(Fraction(w.value) * latent[j][c] for j, w in enumerate(hand_weights[i]))
            if round_half_up(hand, places) != num.value:
                return False
            if not num.exact:
                half = Fraction(1, 2) * Fraction(10) ** -places
                for bound in (Fraction(num.value) - half, Fraction(num.value) + half):
                    if view.compare(quantity="latent_output", i=i, j=c, value=bound - Fraction(1, 10**9)) > 0 and (
                        view.compare(quantity="latent_output", i=i, j=c, value=bound + Fraction(1, 10**9)) < 0
                    ):
                        return False
    return True


__all__ = [
    "QUANTITIES",
    "TURN_KEYS",
    "STATED",
    "asked_cols",
    "check_template",
    "check_turn",
    "draw_into",
    "hand_agrees",
    "matrices",
    "pairs",
    "route",
    "stated",
    "states",
    "turn",
    "values",
]
