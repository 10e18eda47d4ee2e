"""Render a derivation (or a check report) to Markdown or LaTeX with Jinja2.

Templates are ``<kind>.j2``, one body per step kind for both formats (with a thin
``<kind>.<format>.j2`` child where a format differs), with the LaTeX-safe
delimiters of nbconvert: ``((* block *))``, ``((( value )))``, ``((= comment =))``.
Prose comes from ``lang/<lang>.toml``; the math layout is shared by both
languages. Templates do no math: every number arrives rounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symattn.input.errors import RenderError
from symattn.input.scripts import engine_for, fonts_for, has_cjk
from symattn.rendering.environment import REPORT_FORMATS, render_template
from symattn.rendering.escape import MATH_TEXT_ESCAPERS
from symattn.rendering.layout import shrink_wide_displays
from symattn.rendering.paging import BlockNote, paginate
from symattn.rendering.phrases import Phrases, load_language

FORMATS = ("markdown", "latex")


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
