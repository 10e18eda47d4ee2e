"""Render a derivation (or a check report) to Markdown or LaTeX with Jinja2.

Templates are ``<kind>.<format>.j2``, one per step kind and format, with the
LaTeX-safe delimiters of nbconvert: ``((* block *))``, ``((( value )))``,
``((= comment =))``. Prose comes from ``lang/<lang>.toml``; the math layout is
shared by both languages. Templates do no math: every number arrives rounded.
"""

from __future__ import annotations

import os
import string
import tomllib
import unicodedata
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from symattn.exact.rounding import Num
from symattn.input.errors import RenderError
from symattn.input.formula import Formula, symbol
from symattn.input.languages import TEMPLATE_PATHS
from symattn.input.numeral import Numeral
from symattn.input.scripts import engine_for, fonts_for, has_cjk
from symattn.input.text import split_math
from symattn.rendering.escape import ESCAPERS, MATH_TEXT_ESCAPERS, escape_latex
from symattn.rendering.layout import (
    chain,
    fits,
    relation_lines,
    shrink_wide_displays,
    side_by_side,
    sum_lines,
    table_fits,
    text_width,
    two_columns,
)
from symattn.rendering.paging import BlockNote, paginate

FORMATS = ("markdown", "latex")
REPORT_FORMATS = ("text", "markdown", "latex")


def _search_paths() -> list[Path]:
    return [p for p in TEMPLATE_PATHS if p.is_dir()]


class _Loader(jinja2.ChoiceLoader):
    """Search every template folder in order; name them all when nothing is found."""

    def __init__(self) -> None:
        super().__init__([jinja2.FileSystemLoader(str(p), encoding="utf-8") for p in _search_paths()])

    def get_source(self, environment: jinja2.Environment, template: str):
        try:
            return super().get_source(environment, template)
        except jinja2.TemplateNotFound:
            searched = ", ".join(str(p) for p in TEMPLATE_PATHS)
            raise RenderError(f"template {template!r} not found; searched {searched}") from None


# --- values to LaTeX math -------------------------------------------------


def tex_number(x: Num | Numeral | Formula | Decimal | int) -> str:
    """A shown number, or a number as the user typed it, in LaTeX math."""
    if isinstance(x, Formula):
        from symattn.rendering import printing  # SymPy's LaTeX printer: only documents with symbols need it

        return "-\\infty" if x.is_infinite else printing.latex(x.expr)
    if isinstance(x, Num):
        if x.is_infinite:
            return "-\\infty"
        if x.scientific:
            return _scientific(x.value, "\\times 10^{{{}}}")
        return format(x.value, "f")
    if isinstance(x, Decimal):
        return _scientific(x, "\\times 10^{{{}}}") if _is_scientific(x) else format(x, "f")
    if isinstance(x, int):
        return str(x)
    if isinstance(x, Numeral):
        if x.form == "fraction":
            sign = "-" if x.value < 0 else ""
            return f"{sign}\\frac{{{abs(x.value.numerator)}}}{{{x.value.denominator}}}"
        mantissa = x.mantissa.lstrip("+")
        if x.exponent:
            mantissa += f"\\times 10^{{{x.exponent}}}"
        return mantissa + ("\\%" if x.form == "percent" else "")
    raise TypeError(f"not a number: {x!r}")


def _is_scientific(value: Decimal) -> bool:
    # a Decimal rounded above its units place (5.12E+30) came from significant digits
    exponent = value.as_tuple().exponent  # a letter for NaN and infinities, which are not finite
    return value.is_finite() and value != 0 and isinstance(exponent, int) and exponent > 0


def _scientific(value: Decimal, power: str) -> str:
    """m × 10^k with the digits as decided: 5.120 × 10^30 keeps its trailing zero."""
    sign, digits, _ = value.as_tuple()
    mantissa = str(digits[0]) + ("." + "".join(map(str, digits[1:])) if len(digits) > 1 else "")
    return ("-" if sign else "") + mantissa + power.format(value.adjusted())


def _is_compound_sum(x: Formula) -> bool:
    from symattn.rendering import printing

    return printing.is_compound_sum(x.expr)


def tex_operand(x: Num | Numeral) -> str:
    """A factor in a product: negatives and scientific forms get parentheses."""
    text = tex_number(x)
    needs = (
        (x.is_negative and not x.is_infinite)
        or (isinstance(x, Numeral) and (x.exponent or x.form == "fraction"))
        or (isinstance(x, Formula) and _is_compound_sum(x))
        or (isinstance(x, Num) and x.scientific)
    )
    return f"\\left({text}\\right)" if needs else text


def tex_inline(x: Num | Numeral) -> str:
    """A number no taller than a line, for table cells and superscripts: a formula's fractions use ``/``."""
    if isinstance(x, Formula) and not x.is_infinite:
        from symattn.rendering import printing

        return printing.latex(x.expr, inline=True)
    if isinstance(x, Numeral) and x.form == "fraction":
        return f"{'-' if x.value < 0 else ''}{abs(x.value.numerator)}/{x.value.denominator}"
    return tex_number(x)


def tex_vector(items, number: Callable[[Any], str] = tex_number) -> str:
    """``[x, y]``; brackets that grow (``\\left[…\\right]``) around formulas with fractions."""
    texts = [number(x) for x in items]
    tall = any(isinstance(x, Formula) and "\\frac" in text for x, text in zip(items, texts))
    left, right = ("\\left[", "\\right]") if tall else ("[", "]")
    return left + ",\\ ".join(texts) + right


def _title_filter(fmt: str) -> Callable[[str], str]:
    """A title: its text escaped, its ``$...$`` math re-emitted from the title-math parse tree."""
    escape, text_escape = ESCAPERS[fmt], MATH_TEXT_ESCAPERS[fmt]
    wrap = (lambda tex: f"${tex}$") if fmt == "text" else _inline_math(fmt)

    def math(piece: str) -> str:
        from symattn.input.titlemath import emit, parse  # only titles with math need the grammar

        return wrap(emit(parse(piece), text_escape))

    return lambda title: "".join(math(piece) if is_math else escape(piece) for is_math, piece in split_math(title))


# a command-line option in prose, as code
CODE: dict[str, Callable[[str], str]] = {
    "markdown": lambda text: f"`{text}`",
    "latex": lambda text: "\\texttt{" + escape_latex(text).replace("-", "-{}") + "}",  # -- is no dash here
    "text": lambda text: text,
}


def _label_filter(fmt: str) -> Callable[[str], str]:
    escape = MATH_TEXT_ESCAPERS[fmt]
    return lambda label: f"\\text{{{escape(label)}}}"


def relation(exact: bool) -> str:
    return "=" if exact else "\\approx"


def plain_number(x: Num | Numeral | Decimal | int) -> str:
    """A number for plain text: shown digits, or the user's text as typed."""
    if isinstance(x, Numeral):
        return x.text.lstrip("+")
    if isinstance(x, Formula):
        return x.text or str(x.expr)
    if isinstance(x, Num) and x.is_infinite:
        return "−∞"
    if isinstance(x, Num) and x.scientific:
        return _scientific(x.value, "×10^{}")
    if isinstance(x, Decimal) and _is_scientific(x):
        return _scientific(x, "×10^{}")
    return tex_number(x)


def plain_operand(x: Num | Numeral) -> str:
    text = plain_number(x)
    return f"({text})" if x.is_negative else text


def plain_relation(exact: bool) -> str:
    return "=" if exact else "≈"


def _closed_form(fmt: str) -> Callable[[Any], str]:
    import sympy

    infinity = "−∞" if fmt == "text" else "-\\infty"

    def show(form: Any) -> str:
        # a checked entry's closed form (symattn.checking.closed.Closed) prints as str() without
        # building its expression; LaTeX needs the expression
        if fmt == "text":
            text = str(form)
            return infinity if text == "-oo" else text
        expr = getattr(form, "expr", form)
        return infinity if expr == sympy.S.NegativeInfinity else sympy.latex(expr)

    return show


def _text_width(text: str) -> int:
    # terminal columns: wide (CJK) characters take two
    text = str(text)
    if text.isascii():  # no wide characters: the common case, without a look-up per character
        return len(text)
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: Any, width: int) -> str:
    """Left-align text in ``width`` terminal columns, with at least one space after it."""
    text = str(text)
    return text + " " * max(1, width - _text_width(text))


# --- languages -----------------------------------------------------------


@cache
def load_language(lang: str) -> Mapping[str, Any]:
    """The prose of one language, from the first ``lang/<lang>.toml`` found."""
    for folder in TEMPLATE_PATHS:
        path = folder / "lang" / f"{lang}.toml"
        if path.is_file():
            with path.open("rb") as fh:
                prose = tomllib.load(fh)
            # the gradients' names live in [backward.quantity]; reports find every name under "quantity"
            extra = prose.get("backward", {}).get("quantity", {})
            return {**prose, "quantity": {**prose.get("quantity", {}), **extra}} if extra else prose
    searched = ", ".join(str(p / "lang") for p in TEMPLATE_PATHS)
    raise RenderError(f"no language {lang!r}: lang/{lang}.toml not found; searched {searched}")


class Phrases:
    """``t(key, **values)``: a phrase with its literal text escaped for the format.

    Values must already be in the target format (escaped labels, math spans).
    """

    def __init__(self, prose: Mapping[str, Any], escape: Callable[[str], str], lang: str):
        self.prose = prose
        self.escape = escape
        self.lang = lang

    def raw(self, key: str) -> Any:
        node: Any = self.prose
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                raise RenderError(f"language {self.lang!r} has no phrase {key!r}")
            node = node[part]
        return node

    def __call__(self, key: str, **values: Any) -> str:
        return self.fill(self.raw(key), **values)

    def fill(self, phrase: str, **values: Any) -> str:
        out = []
        for literal, name, _spec, _conv in string.Formatter().parse(phrase):
            out.append(self.escape(literal))
            if name is not None:
                if name not in values:
                    raise RenderError(f"phrase {phrase!r} needs a value for {{{name}}}")
                out.append(str(values[name]))
        return "".join(out)

    def quoted(self, labels: list[str]) -> str:
        """Labels, each escaped and quoted, joined as the language lists things."""
        sep = self.escape(self.raw("list_sep"))
        return sep.join(self("quote", x=self.escape(label)) for label in labels)

    def count(self, n: int) -> str:
        words = self.prose.get("numbers", [])
        return words[n] if n < len(words) else str(n)


# --- environments --------------------------------------------------------


def _text_number(math: Callable[[str], str]) -> Callable[[Any], str]:
    """A shown number in running text or a table cell: as it is, or as inline math where it needs TeX
    (``2.0\\times 10^{-29}``), which text mode cannot set."""

    def number(x: Any) -> str:
        tex = tex_number(x)
        return math(tex) if "\\" in tex or "^" in tex else tex

    return number


def _inline_math(fmt: str) -> Callable[[str], str]:
    # a long vector in running text may break after its commas (TeX breaks inline math only where allowed)
    def breakable(tex: str) -> str:
        return tex.replace(",\\ ", ",\\allowbreak\\ ") if len(tex) > 60 else tex

    return (lambda tex: f"${breakable(tex)}$") if fmt == "markdown" else (lambda tex: f"\\({breakable(tex)}\\)")


def _all_exact(items: Any) -> bool:
    """Whether every shown number (in a list, or a list of pairs) is its whole value: a line of them is exact."""
    return all(_all_exact(x) if isinstance(x, tuple | list) else getattr(x, "exact", True) for x in items)


FILTERS: dict[str, Callable[..., Any]] = {
    "val": tex_number,
    "opnd": tex_operand,
    "rel": relation,
    "pick": lambda indices, items: [items[i] for i in indices],
    "select_true": lambda flags: [i for i, flag in enumerate(flags) if flag],
    "symbol_tex": lambda name: tex_number(Formula(name, symbol(name))),
    "fill": lambda phrase, phrases, **values: phrases.fill(phrase, **values),
    "products": lambda pairs: [f"{tex_operand(a)}\\times {tex_operand(b)}" for a, b in pairs],
    "sum_lines": sum_lines,
    "text_width": text_width,
    "side_by_side": side_by_side,
    "relation_lines": relation_lines,
    "chain": chain,
    "table_fits": lambda rows: table_fits(*rows),
    "two_columns": two_columns,
    "format_percent": lambda text: f"{text}\\%",
    "fits": lambda pieces: fits(*pieces),
    "vector": tex_vector,
    "all_exact": _all_exact,
    "inline": tex_inline,
    "inline_vector": lambda items: tex_vector(items, tex_inline),
    "figures": lambda derivation, step: _figures(derivation, step),
    "tikz_colour": lambda c: f"{{rgb,255:red,{int(c[1:3], 16)};green,{int(c[3:5], 16)};blue,{int(c[5:7], 16)}}}",
    "scaled_vectors": lambda weights, vectors: [
        f"{tex_operand(w)}\\cdot{tex_vector(v)}" for w, v in zip(weights, vectors)
    ],
}


def _figures(derivation, step):
    from symattn.rendering.figures import figures  # only documents with pictures measure them

    return figures(derivation, step)


_LATEX_LEVELS = ("section", "subsection", "subsubsection", "paragraph", "subparagraph")


def _latex_heading(text: str, depth: int, numbered: bool = False, toc: str | None = None) -> str:
    # the title is depth -1 (\section at heading level 1); steps are one level below it, and each nested part
    # (a head) one more. Numbered headings enter the table of contents, which takes ``toc`` (the title
    # without \raggedright), braced so that a ] in it cannot end the optional argument.
    command = _LATEX_LEVELS[max(0, min(depth + 1, len(_LATEX_LEVELS) - 1))]
    if not numbered:
        return f"\\{command}*{{{text}}}"
    return f"\\{command}" + ("" if toc is None else f"[{{{toc}}}]") + f"{{{text}}}"


HEADINGS: dict[str, Callable[..., str]] = {
    "markdown": lambda text, depth, numbered=False, toc=None: "#" * max(1, min(depth + 2, 6)) + " " + text,
    "latex": _latex_heading,
    "text": lambda text, depth, numbered=False, toc=None: text,
}


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    # Compiling the templates costs more than rendering them; keep the compiled
    # code in the user's cache folder (never in the installed package). Jinja
    # checks each entry against the template source, so stale entries are harmless.
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "symattn", f"jinja-{jinja2.__version__}")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return jinja2.FileSystemBytecodeCache(folder) if os.access(folder, os.W_OK) else None


def template_environment(
    *, autoescape: bool = False, bytecode_cache: jinja2.BytecodeCache | None = None
) -> jinja2.Environment:
    """Our templates' Jinja2 settings: nbconvert's LaTeX-safe delimiters, strict undefined, trimmed blocks."""
    return jinja2.Environment(
        loader=_Loader(),
        block_start_string="((*",
        block_end_string="*))",
        variable_start_string="(((",
        variable_end_string=")))",
        comment_start_string="((=",
        comment_end_string="=))",
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=autoescape,
        bytecode_cache=bytecode_cache,
    )


@cache
def environment(fmt: str, numbered: bool = False) -> jinja2.Environment:
    """The Jinja2 environment of one output format; ``numbered``: its LaTeX headings are numbered.

    (A setting of the filter, not of the context: compiled templates are cached, and must not depend on it.)
    """
    if fmt not in REPORT_FORMATS:
        raise RenderError(f"unknown format {fmt!r}; expected one of {', '.join(REPORT_FORMATS)}")
    env = template_environment(bytecode_cache=_bytecode_cache())
    env.filters.update(FILTERS)
    env.filters["esc"] = ESCAPERS[fmt]
    env.filters["title"] = _title_filter(fmt)
    env.filters["heading"] = lambda text, depth, toc=None: HEADINGS[fmt](text, depth, numbered, toc)
    env.filters["im"] = _inline_math(fmt)
    env.filters["tval"] = _text_number(_inline_math(fmt) if fmt != "text" else (lambda tex: tex))
    env.filters["label"] = _label_filter(fmt)
    env.filters["code"] = CODE[fmt]
    env.filters["mesc"] = MATH_TEXT_ESCAPERS[fmt]
    env.filters["closed"] = _closed_form(fmt)
    if fmt == "text":
        env.filters.update(val=plain_number, opnd=plain_operand, rel=plain_relation, pad=pad)
    env.globals["format"] = fmt
    return env


def render_template(name: str, fmt: str, lang: str, *, numbered: bool = False, **context: Any) -> str:
    """Render ``<name>.<fmt>.j2`` with the phrases of ``lang``."""
    env = environment(fmt, numbered)
    prose = load_language(lang)
    phrases = Phrases(prose, ESCAPERS[fmt], lang)
    math_phrases = Phrases(prose, MATH_TEXT_ESCAPERS[fmt], lang)  # for \text{} inside math
    template = env.get_template(f"{name}.{fmt}.j2")
    try:
        return template.render(t=phrases, tm=math_phrases, lang=lang, **context)
    except jinja2.UndefinedError as exc:
        raise RenderError(f"template {name}.{fmt}.j2: {exc.message}") from None


def latex_setup(texts: list[str], lang: str) -> dict[str, Any]:
    """What the LaTeX preamble needs to know of a document's user text (labels, title, names): whether
    ctex is needed, the fonts of its scripts, and the engine, which the document's first line names."""
    return {"has_cjk": has_cjk(texts), "scripts": fonts_for(texts), "engine": engine_for(texts, lang)}


def render_report(report, fmt: str = "text", *, standalone: bool = False) -> str:
    """Render a check report as plain text, Markdown, or LaTeX (fragment or standalone)."""
    if fmt not in REPORT_FORMATS:
        raise RenderError(f"unknown format {fmt!r}; expected one of {', '.join(REPORT_FORMATS)}")
    texts = list(report.tokens) + [report.title or "", report.source]
    return render_template(
        "report",
        fmt,
        report.lang,
        r=report,
        standalone=standalone,
        report=True,
        paper=report.paper,
        cjk_font=report.cjk_font,
        **latex_setup(texts, report.lang),
    )


def render(
    derivation,
    fmt: str = "markdown",
    *,
    standalone: bool = False,
    depth: int = 0,
    figure_link: Callable[[str], str] | None = None,
) -> str:
    """Render a derivation as Markdown, or as a LaTeX fragment or standalone document.

    The top heading is at the derivation's ``heading_level`` (1: ``\\section``, ``#``); ``depth`` 1 sets the
    whole derivation one level lower still, to sit under a heading of its own.
    LaTeX draws its figures with TikZ. Markdown has a figure only with ``figure_link``, which gives the
    link of each figure's SVG from its id (``weights``, ``tokens``, ``dz``; see :mod:`.figures`).
    """
    from symattn.rendering.figures import has_pictures

    if fmt not in FORMATS:
        raise RenderError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    texts = list(derivation.tokens) + list(derivation.key_tokens) + [derivation.title or ""]
    text = render_template(
        "document",
        fmt,
        derivation.lang,
        d=derivation,
        standalone=standalone,
        depth=depth + derivation.heading_level - 1,
        numbered=derivation.numbered,
        paper=derivation.paper,
        cjk_font=derivation.cjk_font,
        pictures=fmt == "latex" and has_pictures(derivation),
        figure_link=figure_link if fmt == "markdown" else None,
        **latex_setup(texts, derivation.lang),
    )
    if fmt != "latex":
        return text
    return shrink_wide_displays(paginate(text, block_note(derivation.lang)))


def block_note(lang: str) -> BlockNote:
    """The note under each block of a matrix cut into blocks, in ``lang``, for ``\\text{}`` in LaTeX."""
    phrases = Phrases(load_language(lang), MATH_TEXT_ESCAPERS["latex"], lang)

    def note(first_row: int, last_row: int, rows: int, first: int, last: int, columns: int) -> str:
        if first == 1 and last == columns:
            return phrases("blocks.rows", first=first_row, last=last_row, count=rows)
        if first_row == 1 and last_row == rows:
            return phrases("blocks.columns", first=first, last=last, count=columns)
        return phrases("blocks.both", first_row=first_row, last_row=last_row, first=first, last=last)

    return note
