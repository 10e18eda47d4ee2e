"""The page's practice mode, server side: the hint of one step, the formula with the student's numbers in it.

The student works the focus row one quantity at a time (:data:`STEPS`); the verdicts come from POST
/api/check, as in the check tab. POST /api/hint ``{"spec": {…}, "quantity": …, "claims": {…}}`` answers
``{"html": …}``: the phrase of ``[practice.hint]`` and the formula of that quantity
(``templates/hint.markdown.j2``), its operands the student's earlier numbers (read by the claims reader,
so only numbers reach TeX) or, for the scores, the inputs. Nothing is worked out: a hint never gives a
result away.

With ``block_keys`` the round goes through the key blocks of the online softmax: ``{"quantity": "block",
"block": b}`` (1-based) asks the hint of block b, its m, rescale, l and accumulator from the student's
scaled scores and the block before (claimed as ``running_max[b][i]`` …).

With an ``[mla]`` table the round starts from X (:data:`MLA`): the latent c_KV of every token, the focus row's
query, then K and V of every token (the naive route) or the absorbed query q̃ = q W_UKᵀ with its scores
(the absorbed route, which ends with u = P c_KV and o = u W_UV). Their hints take the student's latent, query,
keys, values and u, claimed as ``latent[i]``, ``Q[i]``, ``K[i]``, ``V[i]`` and ``latent_output``.

Where Q and K are turned by position before the scores (:data:`TURN`, MLA's decoupled dims too), the round works
the turn first: each token's angles (position × frequency; none with given cos/sin tables), their cos and sin,
the focus row's Q′ and every key's K′, then the scores from them (at given positions the keys' angles, cos and sin
are their own, after the queries'). With QK-norm (:data:`NORM`): σ of the focus
row's q and of every key's k, the normalized rows, then the scores. Their hints take the student's numbers
from the claims by name (any claim of the head, by quantity, row and column).
"""

from __future__ import annotations

from typing import Any

from symattn.input.errors import SpecError
from symattn.web.body import REQUEST_SOURCE, claims_of, request_fields, request_reader, spec_of

# the practice steps, in order: the check tab's quantities of one row (percent is the weights again)
STEPS = ("scores", "scaled", "exp", "exp_sum", "weights", "output")
BLOCK = "block"  # with block_keys: one step per block of keys (the online softmax)
# with an [mla] table: the latent, the query, K and V, or the absorbed query with its scores, and u with o
MLA = ("latent", "Q", "K", "V", "absorbed", "absorbed_output")
EVERY = ("latent", "K", "V")  # claimed for every token: the student's rows, not only the focus row's
TURN = ("angle", "trig", "Q_rot", "K_rot")  # the turn by position: the angles, cos and sin, Q′ and K′
NORM = ("rms", "Q_norm", "K_norm")  # QK-norm: σ of each row, then the normalized rows


def hint_task(body: Any) -> dict[str, Any]:
    """POST /api/hint: the hint of one practice step, as an HTML fragment (math as TeX, for KaTeX)."""
    from symattn.derivation.derive import derive
    from symattn.derivation.steps import WeightedSum
    from symattn.exact.factory import build
    from symattn.exact.num import NEG_INFINITY
    from symattn.rendering.environment import render_template
    from symattn.rendering.html import markdown_to_html

    reader = request_reader(REQUEST_SOURCE)
    body = request_fields(body, ("spec", "quantity", "claims", "block"), ("spec", "quantity"))
    quantity = reader.choice(body["quantity"], "quantity", (*STEPS, BLOCK, *MLA, *TURN, *NORM))
    spec = spec_of(body["spec"])
    claims = claims_of(spec, body.get("claims", {}))  # one head only, as the check tab
    derivation = derive(spec, build(spec))
    steps = {step.kind: step for step in derivation.steps}
    values = steps.get("weighted_sum")
    if derivation.symbolic or not isinstance(values, WeightedSum) or not {"scores", "scaling"} <= steps.keys():
        raise SpecError(spec.source, "symbols", "practice mode works with numbers; use the derivation tab")
    focus = derivation.focus
    mine = {(c.quantity, c.col): c.number for c in claims.claims if c.row == focus and c.head is None}
    latents = _latents(steps.get("mla"), quantity, spec.source)
    turn = _needed(steps.get("rotation"), quantity, TURN, spec, "practice_turn")
    normed = _needed(steps.get("qk_norm"), quantity, NORM, spec, "practice_norm")
    rows = {(c.quantity, c.row, c.col): c.number for c in claims.claims if c.head is None}
    block = _block(reader, body, quantity, steps.get("tiling"), spec.source)
    # a round through the blocks ends with O = acc / l from the last block's numbers
    setting, blocks = spec.block_keys, getattr(steps.get("tiling"), "blocks", ())
    last = blocks[-1].index if blocks and setting is not None and setting.block else None
    markdown = render_template(
        "hint",
        "markdown",
        derivation.lang,
        d=derivation,
        quantity=quantity,
        mine=mine,
        columns=range(len(derivation.key_tokens)),
        outputs=range(len(values.V[0])),
        scores=steps["scores"],
        scaling=steps["scaling"],
        values=values,
        mla=latents,
        turn=turn,
        normed=normed,
        given=(spec.Q, spec.K),
        rows=rows,
        block=block,
        tiled=_tiled(claims.claims, focus, len(derivation.tokens)) if block or last else {},
        last_block=last,
        block_columns=[block.first - 1 + k for k, z in enumerate(block.z) if z is not NEG_INFINITY] if block else [],
    )
    html, _ = markdown_to_html(markdown)
    return {"html": html}


def _latents(step: Any, quantity: str, source: str) -> Any:
    """The derivation's MLA step (its inputs: X and the weights), or None without an [mla] table."""
    from symattn.input.messages import said

    if step is None and quantity in MLA:
        raise SpecError(source, "mla", said("practice_mla", quantity=quantity))
    return step


def _needed(step: Any, quantity: str, names: tuple[str, ...], spec: Any, message: str) -> Any:
    """The derivation's step of the turn (or of QK-norm), or None without it; a hint of its quantities needs it,
    and the turn's in cross-attention need given positions (else the keys' angles are claimed by the queries' rows)."""
    from symattn.input.messages import said

    if step is None and quantity in names:
        raise SpecError(spec.source, "quantity", said(message, quantity=quantity))
    if step is not None and names == TURN and spec.is_cross and spec.setting("positions") is None:
        raise SpecError(spec.source, "positions", said("practice_turn_positions"))
    return step


def _block(reader: Any, body: dict[str, Any], quantity: str, tiling: Any, source: str) -> Any:
    """The block a "block" hint asks for (the derivation's Block), or None for any other quantity."""
    if quantity != BLOCK:
        if "block" in body:
            raise reader.error("block", "only a block's hint takes a block")
        return None
    if tiling is None:
        raise SpecError(source, "block_keys", "a block's hint needs block_keys")
    if "block" not in body:
        raise reader.error("block", "missing")
    from symattn.input.reader import brief, parse_index

    index, count = parse_index(body["block"]), len(tiling.blocks)
    if index is None or not 1 <= index <= count:
        raise reader.error("block", f"expected a block from 1 to {count}, got {brief(body['block'])}")
    return tiling.blocks[index - 1]


def _tiled(claims: Any, focus: int, queries: int) -> dict[tuple[str, int, int], Any]:
    """The student's block numbers of the focus row: (quantity, block (1-based), column) -> Numeral; a claim's
    place is [block][row], or [block · queries + row][column] for the accumulator."""
    from symattn.variants import PARTS

    by_block = {q.name: q.inner for part in PARTS for q in part.quantities if q.rows == "block"}
    out = {}
    for c in claims:
        if c.quantity in by_block and not by_block[c.quantity] and c.col == focus:
            out[(c.quantity, c.row + 1, 0)] = c.number
        elif c.quantity in by_block and by_block[c.quantity] and c.row % queries == focus:
            out[(c.quantity, c.row // queries + 1, c.col)] = c.number
    return out
