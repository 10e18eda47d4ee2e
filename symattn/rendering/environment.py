"""Our Jinja2 environments: nbconvert's LaTeX-safe delimiters, each output format's filters, and
:func:`render_template`, which renders one template with the phrases of a language."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from symattn.input.errors import RenderError
from symattn.input.languages import TEMPLATE_PATHS
from symattn.input.symbolic_entry import Formula
from symattn.input.text import split_math
from symattn.rendering import user_cache
from symattn.rendering.bookmarks import PROVIDE_TEXORPDFSTRING, bookmarked
from symattn.rendering.escape import (
    ESCAPERS,
    MATH_TEXT_ESCAPERS,
    USER_ESCAPERS,
    USER_MATH_TEXT_ESCAPERS,
    escape_latex,
    escape_latex_words,
)
from symattn.rendering.layout import (
    breakable,
    chain,
    fits,
    label_column,
    relation_lines,
    report_columns,
    side_by_side,
    sum_lines,
    table_fits,
    text_width,
    two_columns,
)
from symattn.rendering.numbers import (
    plain_number,
    plain_operand,
    plain_relation,
    relation,
    tex_inline,
    tex_number,
    tex_operand,
    tex_vector,
)
from symattn.rendering.phrases import Phrases, load_language

REPORT_FORMATS = ("text", "markdown", "latex")


def _search_paths() -> list[Path]:
    return [p for p in TEMPLATE_PATHS if p.is_dir()]


def _names(template: str) -> tuple[str, ...]:
    """The names a template is looked up by: a format's own ``<kind>.<format>.j2``, then the kind's one body
    ``<kind>.j2``, which serves every format that has no child of its own (nbconvert's format folders fall
    back to base/ in the same way)."""
    stem, _, rest = template.partition(".")
    return (template, f"{stem}.j2") if rest in {f"{fmt}.j2" for fmt in REPORT_FORMATS} else (template,)


class _Loader(jinja2.BaseLoader):
    """Search every template folder in order, for each of a template's names; name them all when nothing is
    found. (A BaseLoader: jinja2.ChoiceLoader's own load() would skip this get_source.)"""

    def __init__(self) -> None:
        self.folders = [jinja2.FileSystemLoader(str(p), encoding="utf-8") for p in _search_paths()]

    def get_source(self, environment: jinja2.Environment, template: str):
        names = _names(template)
        for name in names:
            for folder in self.folders:
                try:
                    return folder.get_source(environment, name)
                except jinja2.TemplateNotFound:
                    pass
        searched = ", ".join(str(p) for p in TEMPLATE_PATHS)
        nor = "".join(f" (nor {name!r})" for name in names[1:])
        raise RenderError(f"template {template!r}{nor} not found; searched {searched}")


def _title_filter(fmt: str) -> Callable[[str], str]:
    """A title: its text escaped, its ``$...$`` math re-emitted from the title-math parse tree (in plain text,
    written out: ``$c_{KV}$`` is c_KV, as a terminal shows no TeX)."""
    if fmt == "text":
        from symattn.input.titlemath import plain_title

        return plain_title
    escape, text_escape = USER_ESCAPERS[fmt], USER_MATH_TEXT_ESCAPERS[fmt]
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
    escape = USER_MATH_TEXT_ESCAPERS[fmt]
    return lambda label: f"\\text{{{escape(label)}}}"


def _closed_form(fmt: str) -> Callable[[Any], str]:
    infinity = "−∞" if fmt == "text" else "-\\infty"

    def show(form: Any) -> str:
        # a checked entry's closed form (symattn.checking.closed.Closed) prints as str() without
        # building its expression; LaTeX needs the expression
        if fmt == "text":
            text = str(form)
            return infinity if text == "-oo" else text
        import sympy  # only a LaTeX page of closed forms prints one

        expr = getattr(form, "expr", form)
        return infinity if expr == sympy.S.NegativeInfinity else sympy.latex(expr)

    return show


def terminal_width(text: str) -> int:
    # terminal columns: wide (CJK) characters take two
    text = str(text)
    if text.isascii():  # no wide characters: the common case, without a look-up per character
        return len(text)
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: Any, width: int) -> str:
    """Left-align text in ``width`` terminal columns, with at least one space after it."""
    text = str(text)
    return text + " " * max(1, width - terminal_width(text))


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


def _symbol_tex(name: str) -> str:
    from symattn.input.formula import symbol  # SymPy: only documents with symbols

    return tex_number(Formula(name, symbol(name)))


FILTERS: dict[str, Callable[..., Any]] = {
    "val": tex_number,
    "opnd": tex_operand,
    "rel": relation,
    "pick": lambda indices, items: [items[i] for i in indices],
    "select_true": lambda flags: [i for i, flag in enumerate(flags) if flag],
    "symbol_tex": lambda name: _symbol_tex(name),
    "fill": lambda phrase, phrases, **values: phrases.fill(phrase, **values),
    "products": lambda pairs: [f"{tex_operand(a)}\\times {tex_operand(b)}" for a, b in pairs],
    "sum_lines": sum_lines,
    "text_width": text_width,
    "breakable": breakable,
    "report_columns": lambda results, place, claimed, verdict, head, exact_head, lang: report_columns(
        [place(v) for v in results],
        [claimed(v, False) for v in results],
        [verdict(v) for v in results],
        [tex_number(v.value) for v in results],
        (head[1], head[4], exact_head),
        lang,
    ),
    "side_by_side": side_by_side,
    "relation_lines": relation_lines,
    "chain": chain,
    "table_fits": lambda rows: table_fits(*rows),
    "two_columns": two_columns,
    "label_column": label_column,
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


# The block markup whose shape differs by format, so that a step kind's one body serves every format.
# display: math on lines of its own. LaTeX's \[ \] stay in the sentence's paragraph; a Markdown display
# may stand apart, with a blank line above (and below) it, where a template asks for one.
_DISPLAY = {"latex": ("\\[", "\\]"), "markdown": ("$$", "$$")}


def _display(fmt: str) -> Callable[..., str]:
    opening, closing = _DISPLAY[fmt]
    gap = "\n" if fmt == "markdown" else ""

    def display(body: str, above: bool = False, below: bool = False) -> str:
        return (gap if above else "") + f"{opening}\n{body}{closing}\n" + (gap if below else "")

    return display


def _items(fmt: str) -> Callable[..., str]:
    """A list, each line of the body an item; ``loose``: in Markdown a blank line above each item."""

    def items(body: str, loose: bool = False) -> str:
        lines = body.splitlines()
        if fmt == "latex":
            return "\\begin{itemize}\n" + "".join(f"\\item {line}\n" for line in lines) + "\\end{itemize}\n"
        return "".join(("\n" if loose else "") + f"- {line}\n" for line in lines)

    return items


# a table's row from its cells (|table frames the rows)
ROWS: dict[str, Callable[[Any], str]] = {
    "latex": lambda cells: " & ".join(map(str, cells)) + " \\\\",
    "markdown": lambda cells: "| " + " | ".join(map(str, cells)) + " |",
}


def _table(fmt: str) -> Callable[[str, Any], str]:
    """A table of rows (|row), the first its head; ``columns``: each column's LaTeX spec."""

    def table(body: str, columns: Any) -> str:
        head, _, rows = body.partition("\n")
        if fmt == "latex":
            begin = "\\noindent\\begin{tabular}{" + "".join(columns) + "}"
            return f"{begin}\n\\hline\n{head}\n\\hline\n{rows}\\hline\n\\end{{tabular}}\n"
        return f"{head}\n|{'---|' * len(columns)}\n{rows}"

    return table


def _shown(fmt: str) -> Callable[[Any, Any], list[Any]]:
    # the steps a document shows: Markdown has a picture only where it can link to its SVG (figure_link)
    return lambda steps, figure_link: [
        s for s in steps if fmt != "markdown" or s.kind != "picture" or figure_link is not None
    ]


_LATEX_LEVELS = ("section", "subsection", "subsubsection", "paragraph", "subparagraph")


def _latex_heading(text: str, depth: int, numbered: bool = False, toc: str | None = None) -> str:
    # the title is depth -1 (\section at heading level 1); steps are one level below it, and each nested part
    # (a head) one more. Numbered headings enter the table of contents, which takes ``toc`` (the title
    # without \raggedright), braced so that a ] in it cannot end the optional argument.
    # Their bookmarks (hyperref) take the plain text of any math in them: \texorpdfstring.
    command = _LATEX_LEVELS[max(0, min(depth + 1, len(_LATEX_LEVELS) - 1))]
    if not numbered:
        return f"\\{command}*{{{text}}}"
    if toc is None:
        return f"\\{command}{{{bookmarked(text)}}}"
    return f"\\{command}[{{{bookmarked(toc)}}}]{{{text}}}"


HEADINGS: dict[str, Callable[..., str]] = {
    "markdown": lambda text, depth, numbered=False, toc=None: "#" * max(1, min(depth + 2, 6)) + " " + text,
    "latex": _latex_heading,
    "text": lambda text, depth, numbered=False, toc=None: text,
}


def bytecode_cache() -> jinja2.BytecodeCache | None:
    # Compiling the templates costs more than rendering them; keep the compiled
    # code in the user's cache folder. Jinja checks each entry against the
    # template source, so stale entries are harmless.
    # (the folder names the compile settings: code from before optimized=False folded constants)
    where = user_cache.folder(f"jinja-{jinja2.__version__}-unfolded")
    return jinja2.FileSystemBytecodeCache(where) if where else None


def template_environment(
    *, autoescape: bool = False, bytecode_cache: jinja2.BytecodeCache | None = None
) -> jinja2.Environment:
    """Our templates' Jinja2 settings: nbconvert's LaTeX-safe delimiters, strict undefined, trimmed blocks.

    No constant folding (``optimized=False``): Jinja would call a filter on a constant (``'i'|im``) once, at
    compile time, with the filters of the format that compiled the file first, and the bytecode cache hands
    that code to every format that shares the file.
    """
    return jinja2.Environment(
        loader=_Loader(),
        optimized=False,
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
    env = template_environment(bytecode_cache=bytecode_cache())
    env.filters.update(FILTERS)
    env.filters["esc"] = escape_latex_words if fmt == "latex" else USER_ESCAPERS[fmt]  # user text: long words break
    env.filters["title"] = _title_filter(fmt)
    env.filters["heading"] = lambda text, depth, toc=None: HEADINGS[fmt](text, depth, numbered, toc)
    env.filters["im"] = _inline_math(fmt)
    env.filters["tval"] = _text_number(_inline_math(fmt) if fmt != "text" else (lambda tex: tex))
    env.filters["label"] = _label_filter(fmt)
    env.filters["code"] = CODE[fmt]
    env.filters["mesc"] = USER_MATH_TEXT_ESCAPERS[fmt]  # a label inside a phrase in math
    env.filters["closed"] = _closed_form(fmt)
    env.filters["percent"] = lambda x: env.filters["tval"](x) + ESCAPERS[fmt]("%")
    if fmt in _DISPLAY:  # the documents' block markup
        env.filters.update(display=_display(fmt), items=_items(fmt), row=ROWS[fmt], table=_table(fmt))
        env.filters["shown"] = _shown(fmt)
    if fmt == "text":
        env.filters.update(val=plain_number, opnd=plain_operand, rel=plain_relation, pad=pad, width=terminal_width)
    env.globals["format"] = fmt
    env.globals["provide_texorpdfstring"] = PROVIDE_TEXORPDFSTRING
    return env


def render_template(name: str, fmt: str, lang: str, *, numbered: bool = False, **context: Any) -> str:
    """Render ``<name>.<fmt>.j2`` with the phrases of ``lang``."""
    env = environment(fmt, numbered)
    prose = load_language(lang)
    latex = fmt == "latex"
    phrases = Phrases(
        prose, ESCAPERS[fmt], lang, "\\allowbreak " if latex else "", escape_latex_words if latex else None
    )
    math_phrases = Phrases(prose, MATH_TEXT_ESCAPERS[fmt], lang)  # for \text{} inside math
    template = env.get_template(f"{name}.{fmt}.j2")
    try:
        return template.render(t=phrases, tm=math_phrases, lang=lang, **context)
    except jinja2.UndefinedError as exc:
        raise RenderError(f"template {name}.{fmt}.j2: {exc.message}") from None
