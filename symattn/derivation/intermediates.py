"""Every intermediate of the exact model as JSON-ready data, for scripts.

``exact`` holds the text of each closed form; ``value`` holds decimal strings
correctly rounded to a number of significant digits.

The closed forms of one head are written from the model's structure
(:class:`Structure`), not by SymPy's printer, which takes minutes at 64×64:
scores, scaled, exp and each row's sum of exps are the text SymPy's ``str()``
gives; a weight or an output refers to its row's sum by the name in
``exp_sum.name`` (``s_1``, ``s_2``, …), as ``exp(z)/s_1``, so that the sum is
written once. Other models (heads after W_O, symbols, gradients) are printed by
SymPy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from types import GeneratorType
from typing import TYPE_CHECKING, Any

from symattn import variants
from symattn.certificates.exact_maker import certificate_section, certified_head
from symattn.derivation.closed_forms import Printer, Structure
from symattn.derivation.modern import modern_inputs
from symattn.exact.base import AttentionModel
from symattn.exact.factory import build
from symattn.exact.model import Model
from symattn.input.decimals import round_half_up, terminating_decimals
from symattn.input.reader import is_numbers
from symattn.input.sources import hashes, spec_sources
from symattn.input.spec import Matrix, Spec

if TYPE_CHECKING:
    from symattn.exact.backward import BackwardModel
    from symattn.exact.multihead import MultiHead
    from symattn.exact.symbolic import SymbolicModel

MAX_DIGITS = 1000
MATRICES = ("scores", "scaled", "exp", "weights", "output")


def _entry(
    source: Any,
    quantity: str,
    digits: int,
    printer: Printer | Structure | None = None,
    exact: bool = True,
    certify: bool = False,
    done: Callable[[], None] | None = None,
) -> dict[str, Any]:
    if certify:
        values, bounds = source.certified(quantity, digits)
    else:
        values, bounds = source.significant(quantity, digits), None
    if done is not None:  # the enclosures have served: let them go before the text is made (issue 28)
        done()
    out: dict[str, Any] = {"value": [[_text(v) for v in row] for row in values]}
    if bounds is not None:
        out["bounds"] = [
            [["-inf", "-inf"] if b is None else [_decimal(b[0]), _decimal(b[1])] for b in row] for row in bounds
        ]
    if exact and isinstance(printer, Structure) and quantity not in ("scale", "sqrt_dk"):
        out = {"exact": printer.matrix(quantity), **out}
    elif exact:
        forms = source.exact(quantity) if hasattr(source, "exact") else getattr(source, quantity)
        show = printer if isinstance(printer, Printer) else Printer()
        out = {"exact": [[show(x) for x in forms.row(i)] for i in range(forms.rows)], **out}
    return out


def _decimal(x: Fraction) -> str:
    """A terminating rational (a bound: dyadic, or a terminating decimal) as its exact decimal text."""
    places = terminating_decimals(x)
    if places is None:
        raise ValueError(f"{x} has no finite decimal expansion")
    return format(round_half_up(x, places), "f")


def _text(value: Any) -> str:
    return "-inf" if value.is_infinite() else str(value)


def _head(
    model: Model, digits: int, exact: bool = True, certify: bool = False, release: bool = False
) -> Iterator[tuple[str, Any]]:
    yield "d_k", model.d_k
    # the scores and z of a head with parts are SymPy's to print
    structure = Structure(model) if exact and not model.parts else None
    for quantity in model.before_scores:
        yield quantity, _column(model, quantity, _entry(model, quantity, digits, None, exact, certify))
    for scalar in ("scale", "sqrt_dk"):
        entry = _entry(model, scalar, digits, None, exact, certify)
        yield scalar, {key: rows[0][0] for key, rows in entry.items()}
    for quantity in MATRICES:
        # the exps serve exp_sum next; any other quantity's enclosures are let go at once
        done = (lambda: _release(model, ())) if release and quantity != "exp" else None
        yield quantity, _entry(model, quantity, digits, structure, exact, certify, done)
        if quantity == "exp":
            column = _entry(model, "exp_sum", digits, structure, exact, certify)
            exp_sum = {key: [r[0] for r in rows] for key, rows in column.items()}
            if structure is not None:  # the names that weights and output use for the row sums
                exp_sum = {
                    "exact": exp_sum["exact"],
                    "name": structure.names(),
                    **{k: v for k, v in exp_sum.items() if k != "exact"},
                }
            yield "exp_sum", exp_sum
        if release:
            _release(model, (quantity, "exp_sum"))
    for quantity in model.extra_quantities():
        yield quantity, _column(model, quantity, _entry(model, quantity, digits, None, exact, certify))


def _column(model: Model, quantity: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A part's quantity of one number per row (per query, per pair) as a list, as exp_sum is."""
    if quantity in model.owner(quantity).columns:
        return {key: [r[0] for r in rows] for key, rows in entry.items()}
    return entry


def _release(model: Model, quantities: tuple[str, ...]) -> None:
    """Let go of a model's caches once its quantities are written: its enclosures at each precision and its
    exact tables hold a million Python numbers each at 1024 tokens. Whatever needs them again remakes them."""
    model.__dict__.pop("_boxes", None)
    for quantity in quantities:
        model._rational_tables.pop(quantity, None)


def _exact_matrix(m: Matrix) -> dict[str, Any]:
    assert is_numbers(m)  # the numeric kinds' inputs: symbols have their own sections
    return {"exact": [[str(x.value) for x in row] for row in m]}


def compute(
    spec: Spec, model: AttentionModel | None = None, digits: int = 15, exact: bool = True, certify: bool = False
) -> dict[str, Any]:
    """All intermediates, each exact and to ``digits`` significant digits.

    ``exact=False`` leaves out the closed forms: printing them is most of the
    time for large inputs. ``model``: the spec's exact model, if already built.
    ``certify`` gives instead each value with its deciding enclosure (``bounds``) and a ``certificate``
    section that ``symattn verify-certificate`` re-checks on its own (one head): only what it checks, so
    no closed forms; its file paths are relative to the spec's folder (see :func:`compute_json`).
    """
    return _whole(_sections(spec, model, digits, exact, certify, None))


def compute_json(
    spec: Spec,
    model: AttentionModel | None = None,
    digits: int = 15,
    exact: bool = True,
    certify: bool = False,
    folder: str | Path | None = None,
) -> Iterator[str]:
    """:func:`compute` as the text of a JSON object, one key per line, each value compact, in pieces; a
    certificate's file paths relative to ``folder``, where it will lie (None: the spec's folder).

    Each section is turned into text as soon as it is computed and then let go: at 1024 tokens
    the strings of every matrix at once would take hundreds of MB.
    """
    yield "{\n"
    first = True
    for key, value in _sections(spec, model, digits, exact, certify, folder):
        yield ("" if first else ",\n") + f"  {json.dumps(key)}: {_json(value)}"
        first = False
    yield "\n}\n"


def _json(value: Any) -> str:
    if isinstance(value, GeneratorType):  # a table made section by section
        return "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in value) + "}"
    return json.dumps(value, ensure_ascii=False)


def _whole(value: Any) -> Any:
    if isinstance(value, GeneratorType):
        return {k: _whole(v) for k, v in value}
    return value


def _sections(
    spec: Spec, model: AttentionModel | None, digits: int, exact: bool, certify: bool, folder: str | Path | None
) -> Iterator[tuple[str, Any]]:
    if not isinstance(digits, int) or isinstance(digits, bool) or not 1 <= digits <= MAX_DIGITS:
        raise ValueError(f"digits must be an integer from 1 to {MAX_DIGITS}, got {digits!r}")
    owned = model is None  # a model of our own: its caches go as soon as they have served
    model = build(spec) if model is None else model
    if certify:
        head = certified_head(spec, model)
        files = hashes(spec_sources(spec, folder))  # before the work: a file outside the folder is refused
        # no closed forms: a certificate holds only what verify-certificate checks
        out = {**_certified_inputs(spec), **dict(_head(head, digits, exact=False, certify=True))}
        out["certificate"] = certificate_section(spec, head, out, digits, files)
        yield from out.items()
        return
    yield from _COMPUTE[model.kind](spec, model, digits, exact, owned)


def _certified_inputs(spec: Spec) -> dict[str, Any]:
    """The labels, the projected Q, K, V (where there are projections) and the mask, which holds any window."""
    out: dict[str, Any] = {"tokens": list(spec.tokens)}
    if spec.is_cross:
        out["key_tokens"] = list(spec.key_tokens)
    if spec.projection is not None or variants.makes_inputs(spec):  # made from X and W (or MLA's latent)
        out.update(Q=_exact_matrix(spec.Q), K=_exact_matrix(spec.K), V=_exact_matrix(spec.V))
    out["mask"] = [
        [spec.allowed is None or spec.allowed[i][j] for j in range(len(spec.keys))] for i in range(len(spec.tokens))
    ]
    return out


def _inputs(spec: Spec) -> dict[str, Any]:
    return {**_certified_inputs(spec), **modern_inputs(spec)}  # issue 20: the groups, the window, the alignment


# Each kind's sections, made one at a time (a generator as a value: a table made the same way).


def _single(spec: Spec, model: Model, digits: int, exact: bool, release: bool) -> Iterator[tuple[str, Any]]:
    yield from _inputs(spec).items()
    yield from _head(model, digits, exact, release=release)
    yield from _route(spec, model, digits, exact)


def _route(spec: Spec, model: Model, digits: int, exact: bool) -> Iterator[tuple[str, Any]]:
    """The online softmax's quantities, where the spec walks the keys in blocks: [block][row] (the
    accumulator [block][row][column]), the LSE per row, and whether the tiled route is exactly the softmax."""
    n = model.n_queries
    for part, setting in variants.stage(spec, variants.ROUTE):
        view = part.view(setting, model)
        for quantity in (q.name for q in part.quantities):
            entry = _entry(view, quantity, digits, None, exact)
            if quantity in view.columns:
                entry = {key: [r[0] for r in rows] for key, rows in entry.items()}
            elif quantity in view.stacked:
                entry = {key: [rows[b : b + n] for b in range(0, len(rows), n)] for key, rows in entry.items()}
            yield quantity, entry
        yield from part.computed(spec, setting, model).items()


def _heads(spec: Spec, mh: MultiHead, digits: int, exact: bool, release: bool) -> Iterator[tuple[str, Any]]:
    yield from _inputs(spec).items()
    yield "d_model", len(spec.Q[0])
    # each head's own route quantities after its head's (MLA's latent and its routes' agreement)
    yield (
        "heads",
        [
            _whole(pair for part in (_head(h, digits, exact), _route(spec.head(i), h, digits, exact)) for pair in part)
            for i, h in enumerate(mh.heads)
        ],
    )
    yield "concat", _entry(mh, "concat", digits, exact=exact)
    yield "output", _entry(mh, "output", digits, exact=exact)


def _symbolic(spec: Spec, model: SymbolicModel, digits: int, exact: bool, release: bool) -> Iterator[tuple[str, Any]]:
    """Formulas in the symbols; with a value for each symbol, the numbers too."""
    from symattn.exact.symbolic import has_all_values, substitute

    yield from {
        "tokens": list(spec.tokens),
        "symbols": list(spec.symbols),
        "subs": {name: value.text for name, value in spec.subs},
    }.items()
    yield (
        "formulas",
        {
            q: [[str(x) for x in getattr(model, q).row(i)] for i in range(getattr(model, q).rows)]
            for q in ("scores", "scaled", "exp", "weights", "output")
        },
    )
    if has_all_values(spec):
        yield "values", compute(substitute(spec), digits=digits)


def _backward(spec: Spec, model: BackwardModel, digits: int, exact: bool, release: bool) -> Iterator[tuple[str, Any]]:
    """The forward intermediates, then ``backward``: every gradient (per head, with several)."""
    yield from _COMPUTE[model.forward.kind](spec, model.forward, digits, exact, release)
    # a part's gradients may run to thousands of characters an entry, which SymPy orders by evaluating
    # each sum: their closed forms are left out (the values stay; the document shows how they come about)
    yield "backward", _gradients(model, digits, exact and model.gradient_forms)


def _gradients(model: BackwardModel, digits: int, exact: bool) -> Iterator[tuple[str, Any]]:
    printer = Printer()
    closed = exact and model.has_closed_forms

    def entry(source: Any, name: str) -> dict[str, Any]:
        out = _entry(source, name, digits, printer, closed)
        return out if closed or not exact else {"exact": _decided(source, name, out["value"]), **out}

    yield "loss", model.loss
    for name in model.top_quantities:
        yield name, entry(model, name)
    if model.head_views:
        yield "heads", [{name: entry(view, name) for name in view.quantities} for view in model.head_views]


def _decided(source: Any, name: str, values: list[list[str]]) -> list[list[str]]:
    """Past BACKWARD_CLOSED_FORMS, each gradient entry's exact rational where it has one, else ≈ and its
    digits (all correct)."""
    rationals = source.rationals(name)
    return [[f"≈{v}" if r is None else str(r) for r, v in zip(rrow, vrow)] for rrow, vrow in zip(rationals, values)]


# each entry takes the model of its kind
_COMPUTE: dict[str, Callable[..., Iterator[tuple[str, Any]]]] = {
    "head": _single,
    "heads": _heads,
    "symbolic": _symbolic,
    "backward": _backward,
}
