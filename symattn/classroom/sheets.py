"""The documents of one student's variant: the exercise sheet, the worked key, and answers.toml to fill in.

Also every student's key in one document, for the teacher. Sheets and keys come in Markdown, LaTeX, PDF or HTML.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import symattn.classroom.mla_sheet as mla_sheet
from symattn.classroom.variants import Asked, Variant, worked_rows
from symattn.exact.head_figures import exact_figures
from symattn.exact.heads import build_model
from symattn.input.errors import SpecError
from symattn.input.records import record

FORMATS = ("markdown", "latex", "pdf", "html")
EXTENSIONS = {"markdown": "md", "latex": "tex", "pdf": "pdf", "html": "html"}


@record
class SheetView:
    """What a sheet template shows: plain data, no strings but the user's own."""

    id: str
    name: str
    title: str | None
    tokens: tuple[str, ...]
    focus: int
    scale: str
    scale_value: Any
    d_k: int
    Q: Any
    K: Any
    V: Any
    asked: tuple[Asked, ...]
    all_rows: bool
    decimals: tuple[tuple[str, int], ...]  # (quantity, decimals) of asked quantities that are rounded
    attends: tuple[tuple[str, ...], ...] | None = None  # with a mask: the tokens each token may attend to
    mla: tuple[tuple[str, Any], ...] = ()  # an [mla] table's matrices (name, numerals): Q, K, V are made from it
    route: str = "naive"  # the MLA route the sheet asks for
    pairs: tuple[tuple[int, int], ...] = ()  # with the decoupled dims: the pairs the turn takes (1-based within q_R)


def _sheet_view(v: Variant) -> SheetView:
    spec = v.spec
    rounded = {
        "latent_output": spec.decimals.output,
        "sqrt_dk": spec.decimals.sqrt_dk,
        "scaled": spec.decimals.scaled,
        "exp": spec.decimals.exp,
        "exp_sum": spec.decimals.exp,
        "weights": spec.decimals.weights,
        "output": spec.decimals.output,
    }
    quantities = []
    for a in v.asked:
        if a.quantity in rounded and a.quantity not in quantities:
            quantities.append(a.quantity)
    scale = spec.scale if isinstance(spec.scale, str) else "number"
    return SheetView(
        v.id,
        v.name,
        spec.document.title,
        spec.tokens,
        spec.focus,
        scale,
        None if isinstance(spec.scale, str) else spec.scale,
        spec.d_k,
        spec.Q,
        spec.K,
        spec.V,
        v.asked,
        len(worked_rows(v.asked)) > 1,
        tuple((q, rounded[q]) for q in quantities),
        None if spec.allowed is None else tuple(tuple(t for t, ok in zip(spec.tokens, r) if ok) for r in spec.allowed),
        mla_sheet.stated(spec),
        mla_sheet.route(spec),
        mla_sheet.pairs(spec),
    )


def _with_lang(v: Variant, lang: str | None) -> Variant:
    return v if lang is None else replace(v, spec=v.spec.with_options(lang=lang))


def sheet(v: Variant, fmt: str = "markdown", lang: str | None = None) -> str | bytes:
    """The exercise sheet: the student's numbers and a blank for every asked number."""
    from symattn.rendering.environment import render_template
    from symattn.rendering.renderer import latex_setup

    v = _with_lang(v, lang)
    spec = v.spec
    view = _sheet_view(v)
    if fmt in ("markdown", "html"):
        text = render_template("sheet", "markdown", spec.document.lang, s=view)
        if fmt == "html":
            from symattn.rendering.html import page

            return page(text, spec.document.lang)
        return text
    tex = render_template(
        "sheet",
        "latex",
        spec.document.lang,
        s=view,
        paper=spec.document.page,
        cjk_font=spec.document.cjk_font,
        longtable=True,  # the answers' table continues on the next page rather than leaving this one half empty
        **latex_setup(list(spec.tokens) + [spec.document.title or "", v.name, v.id], spec.document.lang),
    )
    if fmt == "pdf":
        from symattn.rendering.export import pdf

        return pdf(tex, spec.document.lang, spec.document.engine)
    return tex


def answer_values(v: Variant) -> tuple[Any, ...]:
    """Each asked number as the sheet asks for it (its decimals), in the order of the sheet's boxes.

    The exact values, rounded; the draw made sure the hand chain shows the same digits.
    """
    spec = v.spec
    model = build_model(spec)
    fig = exact_figures(model, spec.decimals, stable=spec.softmax == "stable", notation=spec.notation)
    out = []
    mla = {q: mla_sheet.values(spec, model, q) for q in {a.quantity for a in v.asked} & {*mla_sheet.QUANTITIES}}
    for a in v.asked:
        if a.quantity in mla:
            out.append(mla[a.quantity][a.row][a.col])
        elif a.quantity == "sqrt_dk":
            out.append(fig.sqrt_dk)
        elif a.quantity == "exp_sum":
            assert a.row is not None  # exp_sum is asked row by row (see variants.asked)
            out.append(fig.exp_sum[a.row])
        else:
            out.append(getattr(fig, a.quantity)[a.row][a.col])
    return tuple(out)


def key(v: Variant, fmt: str = "markdown", lang: str | None = None) -> str | bytes:
    """The worked solution: the answers as the sheet asks for them, then the derivation in hand-rounding mode."""
    return _keys([v], fmt, lang, single=True)


def key_all(variants: Sequence[Variant], fmt: str = "markdown", lang: str | None = None) -> str | bytes:
    """Every student's key in one document, for the teacher (LaTeX and PDF: one student per page)."""
    if not variants:
        raise SpecError("ids", None, "no students: nothing to put in the keys")
    return _keys(variants, fmt, lang, single=False)


def _keys(variants: Sequence[Variant], fmt: str, lang: str | None, single: bool) -> str | bytes:
    from symattn.derivation.derive import derive
    from symattn.rendering.environment import render_template
    from symattn.rendering.renderer import latex_setup, render

    variants = [_with_lang(v, lang) for v in variants]
    first = variants[0].spec
    body = "latex" if fmt in ("latex", "pdf") else "markdown"
    depth = 1 if body == "latex" or single else 2
    from symattn.rendering.figures import has_pictures

    derivations = [derive(v.spec) for v in variants]
    keys = [
        (v, tuple(zip(v.asked, answer_values(v), _places(v))), render(d, body, depth=depth).strip("\n"))
        for v, d in zip(variants, derivations)
    ]
    texts = [v.name for v in variants] + [first.document.title or ""] + [x for v in variants for x in v.spec.tokens]
    text = render_template(
        "keys",
        body,
        first.document.lang,
        keys=keys,
        title=first.document.title,
        paper=first.document.page,
        single=single,
        cjk_font=first.document.cjk_font,
        pictures=body == "latex" and any(has_pictures(d) for d in derivations),  # the preamble loads TikZ
        **latex_setup(texts, first.document.lang),
    )
    if fmt == "html":
        from symattn.rendering.html import page

        return page(text, first.document.lang)
    if fmt == "pdf":
        from symattn.rendering.export import pdf

        return pdf(text, first.document.lang, first.document.engine)
    return text


def asked_decimals(v: Variant) -> dict[str, int]:
    """The decimals the sheet asks for, as a claims file's ``decimals`` table: {"scaled": 3, ...}."""
    from symattn.checking.verdicts import ASKED_BY

    return {ASKED_BY[q]: n for q, n in _sheet_view(v).decimals}


def claimed_decimals(v: Variant) -> dict[str, int]:
    """``asked_decimals``, and for each asked quantity the sheet does not round (the scores: exact at their own
    digits) the decimals the key writes it with: a claim with fewer is too coarse (−1 for −0.75, which was
    "rounded", full credit, with everything carried from it), as a number rounded early is."""
    from symattn.checking.verdicts import ASKED_BY

    rounded = asked_decimals(v)
    out = dict(rounded)
    for a, num in zip(v.asked, answer_values(v)):
        field = ASKED_BY.get(a.quantity)
        if field is None or field in rounded or not num.exact or num.scientific or num.is_infinite:
            continue
        exponent = num.value.as_tuple().exponent
        assert isinstance(exponent, int)  # a finite number
        out[field] = max(out.get(field, 0), -exponent)
    return out


def answers(v: Variant, lang: str | None = None) -> str:
    """A claims file to fill in: the student's id and inputs inline, every asked number as ``""``.

    Its ``decimals`` table names the decimals the sheet asks for: ``check`` calls a claim with fewer too coarse.
    """
    from symattn.rendering.tomlwrite import toml_key, toml_value

    data = dict(v.data)
    given = data.get("decimals")
    data["decimals"] = {**(dict(given) if isinstance(given, Mapping) else {}), **claimed_decimals(v)}
    if lang is not None:
        data["lang"] = lang
    from symattn.rendering.phrases import Phrases, load_language

    # the header comment in the class's language, as every other file of the class
    t = Phrases(load_language(lang or v.spec.document.lang), lambda s: s, lang or v.spec.document.lang)
    comment = t("sheet.answers_comment", title=v.spec.document.title or t("sheet.untitled"), id=v.id)
    lines = [
        "# " + " ".join(comment.splitlines()),
        f"student = {toml_value(v.id)}",
    ]
    lines += [f"{toml_key(k)} = {toml_value(x)}" for k, x in data.items()]
    lines += ["", "[claims]"] + [f'{toml_key(a.key)} = ""' for a in v.asked]
    return "\n".join(lines) + "\n"


def files(v: Variant, fmt: str = "markdown", lang: str | None = None) -> tuple[tuple[str, str | bytes], ...]:
    """The files of one student, as (name, content): sheet, key, answers.toml."""
    ext = EXTENSIONS[fmt]
    return (
        (f"sheet.{ext}", sheet(v, fmt, lang)),
        (f"key.{ext}", key(v, fmt, lang)),
        ("answers.toml", answers(v, lang)),
    )


def _places(v: Any) -> tuple[Any, ...]:
    """Each asked number's row and column labels, on its own axes (a key, a token, or a numbered column)."""
    from symattn.classroom.notes import place_of

    return tuple(place_of(v.spec, a.quantity, a.row, a.col) for a in v.asked)


__all__ = [
    "EXTENSIONS",
    "FORMATS",
    "SheetView",
    "answer_values",
    "answers",
    "asked_decimals",
    "claimed_decimals",
    "files",
    "key",
    "key_all",
    "sheet",
]
