"""The variants of attention, each one part (one module; :mod:`symattn.variants.base` says what a part is),
and the registry that the rest of the package reads them through: no other module names a variant.

Adding a variant is one module (its keys, its exact transform and rules, its steps), its templates and
its phrases, and a line in ``PARTS`` below; docs/internals.md walks through one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from symattn.input.limits import NUMBER_LENGTH
from symattn.input.numeral import Numeral
from symattn.variants import alibi, masks, mla, positions, qk_norm, rope, sinks, softcap, tiling
from symattn.variants.base import ADD, DENOMINATOR, MAP, MASK, PLACE, QK, ROUTE, HeadPart, Part, Quantity, Where, listed

# every part, in the order their keys are listed (spec files, the web page); they act in the order of
# their stages, whatever their place here
PARTS: tuple[Part, ...] = (
    masks.PART,
    alibi.PART,
    softcap.PART,
    sinks.PART,
    rope.PART,
    qk_norm.PART,
    tiling.PART,
    positions.PART,
    mla.PART,
)

KEYS = tuple(key for part in PARTS for key in part.keys)  # every part's spec keys
QUANTITIES: tuple[Quantity, ...] = tuple(q for part in PARTS for q in part.quantities)  # claimable
STEP_KINDS = tuple(kind for part in PARTS for kind in part.step_kinds)
UNSTATED = tuple(key for part in PARTS for key in part.unstated)  # keys an exercise sheet does not word
WEB_FIELDS = tuple(field for part in PARTS for field in part.web_fields)
# the parts a sweep's [grid] has, in the order of its keys (and of the cases' product)
SWEPT: tuple[Part, ...] = (masks.PART, softcap.PART, alibi.PART, sinks.PART)
LIMIT_MODULES = tuple(type(part).__module__ for part in PARTS)  # where each part's limits are (docs/hooks.py)


def _stage_order(parts: Iterable[tuple[Part, Any]]) -> tuple[tuple[Part, Any], ...]:
    return tuple(sorted(parts, key=lambda pair: pair[0].stage))


def part(name: str) -> Part:
    return next(p for p in PARTS if p.name == name)


# --- the spec ------------------------------------------------------------------------------------------


def read(reader: Any, data: Mapping[str, Any], where: Where, stages: tuple[int, ...]) -> tuple[tuple[str, Any], ...]:
    """The settings of the parts of these stages that the spec has, as (name, setting) pairs."""
    out = []
    for p in PARTS:
        if p.stage in stages:
            setting = p.read(reader, data, where)
            if setting is not None:
                out.append((p.name, setting))
    return tuple(out)


def ordered(pairs: Iterable[tuple[str, Any]]) -> tuple[tuple[str, Any], ...]:
    """(name, setting) pairs in the registry's order."""
    given = dict(pairs)
    return tuple((p.name, given[p.name]) for p in PARTS if p.name in given)


def of(spec: Any) -> tuple[tuple[Part, Any], ...]:
    """The spec's parts with their settings, in the order they act."""
    return _stage_order((part(name), setting) for name, setting in spec.parts)


def check(reader: Any, spec: Any) -> None:
    """Refuse what the spec's parts do not combine with (after the command line's options)."""
    for p, setting in of(spec):
        p.check(reader, setting, spec.is_symbolic)
        p.check_spec(reader, setting, spec)


def inputs(reader: Any, data: Mapping[str, Any]) -> tuple[Any, Any, Any, str] | None:
    """Q, K, V that a part makes from its own keys (MLA's [mla] table), and what their rows are; None: none."""
    return next((made for made in (p.inputs(reader, data) for p in PARTS) if made is not None), None)


def turned(reader: Any, data: Mapping[str, Any]) -> tuple[int, int] | None:
    """The columns of each head that a Q/K part may turn, where a part's made Q and K say (None: all)."""
    return next((cols for cols in (p.turned(reader, data) for p in PARTS) if cols is not None), None)


def carried_input(chain: Any, spec: Any, quantity: str, row: int, col: int) -> Any:
    """Q, K or V that a part made, from the claimant's own numbers (None: the spec's value)."""
    return next(
        (v for v in (p.carried_input(chain, s, quantity, row, col) for p, s in of(spec)) if v is not None), None
    )


def input_operands(explainer: Any, spec: Any, quantity: str, row: int, col: int) -> Any:
    """A wrong claim on Q, K or V that a part made: its dot product's (number, weight) pairs (None: none)."""
    return next(
        (v for v in (p.input_operands(explainer, s, quantity, row, col) for p, s in of(spec)) if v is not None), None
    )


def makes_inputs(spec: Any) -> bool:
    """Whether a part of the spec made its Q, K and V (so that claims may name them)."""
    return any(type(p).inputs is not Part.inputs for p, _ in of(spec))


def heads_of(pairs: tuple[tuple[str, Any], ...], index: int) -> tuple[tuple[str, Any], ...]:
    """The settings of one head (0-based) of several."""
    return tuple((name, part(name).head(setting, index)) for name, setting in pairs)


_ATTRIBUTES = {name: p for p in PARTS for name in (p.attributes or (p.name,))}


def attribute(spec: Any, name: str) -> Any:
    """``spec.<name>``: a part's setting (or what it makes of it), its value without it where it is absent."""
    p = _ATTRIBUTES.get(name)
    if p is None:
        raise AttributeError(f"'Spec' object has no attribute {name!r}")
    return p.attribute(spec.setting(p.name), name)


def head_parts(spec: Any) -> tuple[HeadPart, ...]:
    """The head parts of a single-head spec, in the order they act (a mask has none: it is in ``allowed``)."""
    made = (p.head_part(setting, spec) for p, setting in of(spec))
    return tuple(h for h in made if h is not None)


def mask_parts() -> tuple[Part, ...]:
    return tuple(p for p in PARTS if p.stage == MASK)


# --- what it supports ------------------------------------------------------------------------------


def certify_refusal(spec: Any) -> tuple[str, str] | None:
    """(key, message) of the first part the spec has that ``compute --certify`` does not cover."""
    return next(((p.name, p.certify) for p, _ in of(spec) if p.certify), None)


def rounded_refusal(spec: Any) -> str | None:
    """Why check's input-rounding refuses the spec's parts (None where it covers them)."""
    if all(p.rounded_inputs for p, _ in of(spec)):
        return None
    return listed([p.title for p in PARTS if not p.rounded_inputs and not p.rounded_read])


def float64_refused(spec: Any) -> bool:
    """Whether compare's float64 path refuses a part of the spec (one with neither its mask nor a kernel rule)."""
    return any(not p.float64_in_mask and not p.kernel_rule for p, _ in of(spec))


def kernel_parts(spec: Any) -> tuple[tuple[Part, Any], ...]:
    """The spec's parts that take the float64 path by a rule of kernel/score_mods.py, in the order they act."""
    return tuple((p, setting) for p, setting in of(spec) if p.kernel_rule)


def argument_refusal(name: str) -> str | None:
    """symattn.kernel.compare's refusal of a part's keyword (None: no part's), while the float64 path has no
    rule for the part."""
    return next((p.argument_refusal for p in PARTS if p.argument == name), None)


def kernel_rule(name: str) -> str:
    """The score rule (symattn/kernel/score_mods.py) that takes a part's keyword on symattn.kernel.compare's
    float64 path; "" where no part's keyword is ``name`` or its part has none yet."""
    return next((p.kernel_rule for p in PARTS if p.argument == name), "")


def kernel_arguments() -> tuple[str, ...]:
    """symattn.kernel.compare's keywords of the parts that have a kernel rule, as a spec of a layout takes them."""
    return tuple(p.argument for p in PARTS if p.kernel_rule)


def kernel_per_head(argument: str) -> bool:
    """Whether a kernel keyword holds a number per head (else one number for every head)."""
    return next(p.kernel_per_head for p in PARTS if p.argument == argument)


def argument_of(rule: str) -> str:
    """The keyword of symattn.kernel.compare whose part takes the float64 path by ``rule`` (score_mods.py)."""
    return next(p.argument for p in PARTS if p.kernel_rule == rule)


def kernel_mask(n: int, m: int, causal: bool, align: str, window: Any) -> Any:
    """symattn.kernel.compare's mask of n queries and m keys from its keywords (``causal``, ``causal_align``,
    ``window``): the mask parts' mask_mod as a numpy array of booleans, or None where every key is allowed."""
    return next(p for p in PARTS if p.stage == MASK).kernel_mask(n, m, causal, align, window)


# where the cap acts beside the distance bias, as compare's keyword and a spec's key name it (softcap.ORDERS)
ORDER_KEY = softcap.ORDER_KEY
ORDER_ACTS = {"tanh_cap", "distance_bias"}  # the rules whose order it settles: both on, the reports name it
order_refusal = softcap.order_refusal  # why a value is refused (after the key), or None


def rule_order(value: Any, keyword: bool = True) -> tuple[tuple[str, ...], str]:
    """The kernel rules' order (score_mods' kinds, as they act on z) for an order's value, and that value:
    None takes the default of compare's keywords (``keyword``) or of a spec; any other is refused in one line."""
    if value is None:
        value = softcap.KEYWORD_ORDER if keyword else softcap.SPEC_ORDER
    why = softcap.order_refusal(value)
    if why is not None:
        from symattn.input.errors import SpecError

        raise SpecError(ORDER_KEY, None, why)
    return softcap.ORDERS[value], value


def spec_order(spec: Any) -> str:
    """A spec's order (its default where it gives none, or has no cap)."""
    setting = spec.setting(softcap.PART.name)
    return softcap.SPEC_ORDER if setting is None else setting.order


def keyword_gradients() -> dict[str, Part]:
    """The parts whose kernel keyword has a gradient a sweep checks, by that gradient's kind (dsink)."""
    return {p.gradient: p for p in PARTS if p.gradient}


# quantities a part makes as products and sums of the given decimals (exact decimals, no rounding on the way)
EXACT_PRODUCTS = tuple(q for part in PARTS for q in part.exact_products)
numerals = mla.numerals  # made values as numerals, one width across the matrix (what a sheet states)


def turner() -> Part:
    """The part that turns Q and K by position, whose turn an exercise sheet may state."""
    return next(p for p in PARTS if p.turn_quantities)


def turn_pairs(spec: Any, width: int) -> tuple[tuple[int, int], ...]:
    """The pairs of ``width`` columns the spec's turn takes (1-based); () where the spec has none."""
    setting = spec.setting(turner().name)
    return () if setting is None else setting.pairs(width)


def float64_words(noun: bool = False, rules: bool = True, certified: bool = False) -> str:
    """The parts the float64 path refuses, as its messages list them; ``rules`` False: those with a kernel rule
    too (what a path that takes none refuses), but for ``certified`` ones (what version 3 certificates take)."""
    refused = [
        p for p in PARTS if not p.float64_in_mask and not (rules and p.kernel_rule) and not (certified and p.certified)
    ]
    return listed([(p.noun or p.title) if noun else p.title for p in refused])


# --- claims and compute -------------------------------------------------------------------------------


ANGLES = tuple(name for p in PARTS for name in p.angles)
# a turn's angles and their cos and sin: each made in one step from exact numbers (p·θ_t, then cos φ), so where
# the exact value fits a claim's decimals no rounding lies before it, and one unit off is no rounding slip
ONE_STEP = tuple(q for a in ANGLES for q in (a, a.replace("angle", "cos"), a.replace("angle", "sin")))


def claimed_angle(name: str, raw: object) -> Numeral | None:
    """A claimed angle as the document writes one: in degrees or as a rational multiple of π ("90deg", "3pi/4";
    rope_frequencies' grammar, matched, never evaluated). None for anything else, a plain number included."""
    if name not in ANGLES or not isinstance(raw, str) or len(raw) > NUMBER_LENGTH:
        return None
    found = rope.parse_frequency(raw)
    return None if found is None or not found.of_pi else Numeral(found.text, found.value, "pi", None)


def quantity(name: str) -> Quantity | None:
    return next((q for q in QUANTITIES if q.name == name), None)


def missing(spec: Any, name: str) -> str | None:
    """What a claim on a part's quantity needs where the spec does not have the part, else None."""
    owner = next((p for p in PARTS if any(q.name == name for q in p.quantities)), None)
    if owner is None:
        return None
    setting = spec.setting(owner.name)
    if setting is not None:
        return owner.lacks(setting, name)
    return next(q.needs for q in owner.quantities if q.name == name) or None  # "": every spec has it


def owner(name: str) -> Part | None:
    """The part that declares a claimable quantity (None: a core one)."""
    return next((p for p in PARTS if any(q.name == name for q in p.quantities)), None)


def shape(spec: Any, name: str) -> tuple[int, ...] | None:
    """The shape of a part's quantity claimed whole, where its part gives it (None: by its rows and columns)."""
    p = owner(name)
    return None if p is None else p.shape(spec, spec.setting(p.name), name)


# --- the route of the softmax (ROUTE): quantities of a view of the head's model --------------------------

VIEWED = tuple(q.name for p in PARTS if p.stage == ROUTE for q in p.quantities)


def view(spec: Any, name: str, model: Any) -> Any:
    """The object that answers a ROUTE part's quantity of one head's model."""
    p = owner(name)
    assert p is not None and p.stage == ROUTE
    return p.view(spec.setting(p.name), model)


def carried(chain: Any, spec: Any, model: Any, name: str, row: int, col: int | None, head: Any) -> Any:
    """A ROUTE part's quantity from the claimant's own numbers (None: not such a quantity)."""
    p = owner(name) if name in VIEWED else None
    return None if p is None else p.carried(chain, model, spec.setting(p.name), name, row, col, head)


def carried_core(chain: Any, spec: Any, name: str, row: int, col: int | None, head: Any) -> Any:
    """A core quantity carried along a ROUTE part's own way, from its claimed quantities (None: the core's)."""
    found = (p.carried_core(chain, setting, name, row, col, head) for p, setting in stage(spec, ROUTE))
    return next((v for v in found if v is not None), None)


def explains(quantity: str) -> bool:
    """Whether a wrong claim on a ROUTE part's quantity is explained (its part gives the operands)."""
    p = owner(quantity)
    return p is not None and p.explains


def route_operands(explainer: Any, spec: Any, quantity: str, row: int, col: int, head: Any) -> Any:
    """A wrong claim on a ROUTE part's quantity: the (number, number) pairs its value is the sum of."""
    p = owner(quantity)
    assert p is not None and p.explains
    return p.route_operands(explainer, spec.setting(p.name), quantity, row, col, head)


def placing(spec: Any, model: Any) -> tuple[Any, ...]:
    """The step that says where the tokens stand (what a KV cache held and what is new), where the spec says."""
    step = positions.PART.step(spec, model)
    made = tuple(s for p, _ in of(spec) for s in p.before_scores(spec, model))  # how a part made Q, K, V
    return made + (() if step is None else (step,))


def before_heads(spec: Any, models: tuple[Any, ...]) -> tuple[Any, ...]:
    """The parts' steps before the heads: what every head shares, said once."""
    return tuple(s for p, _ in of(spec) for s in p.before_heads(spec, models))


def after_weighted(spec: Any, model: Any, fig: Any) -> tuple[Any, ...]:
    """The ROUTE parts' steps after the weighted sum (the online softmax, block by block)."""
    return tuple(step for p, _ in stage(spec, ROUTE) for step in p.after_weighted(spec, model, fig))


def report(spec: Any) -> dict[str, Any]:
    """What compute reports of the parts' settings beside the inputs."""
    out: dict[str, Any] = {}
    for p in PARTS:
        out.update(p.report(spec, spec.setting(p.name)))
    return out


# --- the derivation --------------------------------------------------------------------------------------

_FACTS = {(where, name): default for p in PARTS for where, name, default in p.facts}


def fact(where: str, name: str) -> Any:
    """A fact of a step (or row) that a part declares, as it is without the part."""
    if (where, name) not in _FACTS:
        raise AttributeError(name)
    return _FACTS[where, name]


def toy(spec: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(fact for p, setting in of(spec) for fact in p.toy(spec, setting))


def hidden_width(spec: Any) -> int | None:
    """d_model where a part made Q, K and V from hidden rows (their width, not the heads' columns)."""
    return next((w for p, setting in of(spec) if (w := p.hidden_width(setting)) is not None), None)


def formula_parts(spec: Any) -> tuple[str, ...]:
    """The parts that change the attention formula itself, in the order they act."""
    return tuple(p.name for p, _ in of(spec) if p.stage not in (MASK, ROUTE, PLACE))


def stage(spec: Any, stage: int) -> tuple[tuple[Part, Any], ...]:
    return tuple(pair for pair in of(spec) if pair[0].stage == stage)


def masking(spec: Any) -> Any:
    """What the masking step shows of the mask parts (None: nothing)."""
    return next((m for m in (p.masking(spec, spec.setting(p.name)) for p in mask_parts()) if m is not None), None)


def z_word(spec: Any) -> str | None:
    """How a check report names z where a part makes it ("capped" past "biased": the last one)."""
    words = [p.z_word for p, _ in of(spec) if p.z_word]
    return words[-1] if words else None


def operand(spec: Any, at: int, sig: Any, i: int, k: int) -> Any:
    """What a wrong scaled score's explanation shows of the spec's part of a stage (None without one)."""
    return next((p.operand(setting, sig, i, k) for p, setting in stage(spec, at)), None)


__all__ = [
    "ADD",
    "DENOMINATOR",
    "KEYS",
    "LIMIT_MODULES",
    "MAP",
    "MASK",
    "PARTS",
    "QK",
    "QUANTITIES",
    "PLACE",
    "ROUTE",
    "STEP_KINDS",
    "SWEPT",
    "VIEWED",
    "before_heads",
    "after_weighted",
    "carried",
    "carried_core",
    "carried_input",
    "explains",
    "route_operands",
    "input_operands",
    "inputs",
    "makes_inputs",
    "owner",
    "shape",
    "view",
    "UNSTATED",
    "WEB_FIELDS",
    "Where",
    "argument_refusal",
    "ORDER_ACTS",
    "ORDER_KEY",
    "order_refusal",
    "rule_order",
    "spec_order",
    "kernel_rule",
    "argument_of",
    "attribute",
    "certify_refusal",
    "check",
    "fact",
    "float64_refused",
    "float64_words",
    "formula_parts",
    "head_parts",
    "heads_of",
    "kernel_arguments",
    "turner",
    "EXACT_PRODUCTS",
    "ONE_STEP",
    "numerals",
    "turn_pairs",
    "keyword_gradients",
    "kernel_mask",
    "kernel_per_head",
    "kernel_parts",
    "mask_parts",
    "masking",
    "missing",
    "of",
    "operand",
    "ordered",
    "part",
    "placing",
    "quantity",
    "read",
    "report",
    "rounded_refusal",
    "stage",
    "toy",
    "hidden_width",
    "turned",
    "z_word",
]
