"""Pictures of the weights: a heatmap of A (one panel per head) and the focus row's token diagram; and of dZ.

The derivation's ``picture`` steps hold the shown matrices; :mod:`.heatmap` and :mod:`.diagram` measure and
place them as plain figure data (:mod:`.figure_parts`), in points to the hundredth, so that every run gives
the same bytes. Templates draw the data: ``figure_<kind>.svg.j2`` (SVG, written once here, for HTML, for
the files beside Markdown, and for the web page) and ``figure_<kind>.latex.j2`` (TikZ, inside the document).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a document without pictures never loads the layout of figures
    from symattn.rendering.figure_parts import Figure


def figures(derivation: Any, step: Any) -> tuple[Figure, ...]:
    """The figures of one ``picture`` step of ``derivation``: its heatmap, and the token diagram if asked."""
    from symattn.rendering.diagram import diagram  # measured only for a document with pictures
    from symattn.rendering.heatmap import heatmap
    from symattn.rendering.renderer import load_language

    prose = load_language(derivation.lang)["picture"]

    def head_title(k: int) -> str:
        return str(prose["head"]).format(n=k + 1)

    d, f = derivation, derivation.focus
    word = prose["masked_word"]
    out: list[Figure] = [
        heatmap(step.name, step.panels, step.allowed, f, d.tokens, d.key_tokens, d.lang, head_title, word)
    ]
    if step.diagram:
        allowed = step.allowed[f] if step.allowed is not None else None
        out.append(diagram(tuple(p[f] for p in step.panels), allowed, d.tokens[f], d.key_tokens, d.lang, head_title))
    return tuple(out)


def all_figures(derivation: Any) -> Iterator[Figure]:
    """Every figure of a derivation, nested parts (heads, the values of symbols) included, in order."""
    for step in derivation.steps:
        if step.kind == "picture":
            yield from figures(derivation, step)
        inner = getattr(step, "derivation", None)
        if inner is not None:
            yield from all_figures(inner)


def has_pictures(derivation: Any) -> bool:
    """Whether a derivation draws any figure (its LaTeX then needs TikZ)."""
    return any(
        step.kind == "picture" or (getattr(step, "derivation", None) is not None and has_pictures(step.derivation))
        for step in derivation.steps
    )


@lru_cache(maxsize=1)
def _svg_environment() -> Any:
    from symattn.rendering.renderer import _bytecode_cache, template_environment

    # every value XML-escaped; compiled once per machine, as the documents' templates are (the web page's
    # workers draw figures for every edit and compile them at start)
    return template_environment(autoescape=True, bytecode_cache=_bytecode_cache())


def svg(figure: Figure) -> str:
    """The figure as one SVG document (no external file, no script): for HTML, a file, or the web page."""
    from symattn.rendering.renderer import Phrases, load_language

    phrases = Phrases(load_language(figure.lang), lambda text: text, figure.lang)
    template = _svg_environment().get_template(f"figure_{figure.kind}.svg.j2")
    return template.render(f=figure, t=phrases)


def weights_svg(derivation: Any) -> str | None:
    """The SVG heatmap of the weights A of a derivation (every head), or None when it draws none."""
    return next((svg(f) for f in all_figures(derivation) if f.id == "weights"), None)


def svg_files(derivation: Any, stem: str) -> tuple[tuple[str, str], ...]:
    """Every figure as (``<stem>.<id>.svg``, its SVG), for the files beside a Markdown document."""
    return tuple((f"{stem}.{f.id}.svg", svg(f)) for f in all_figures(derivation))


def markdown_with_files(derivation: Any, path: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The Markdown of a derivation to be written to ``path``, and the SVG files to write beside it: each
    named ``<name of path, less its suffix>.<id>.svg`` and linked relatively (percent-encoded)."""
    import os
    from urllib.parse import quote

    from symattn.rendering.renderer import render

    stem = os.path.splitext(os.path.basename(path))[0] or os.path.basename(path)
    files = svg_files(derivation, stem)
    link = (lambda name: quote(f"{stem}.{name}.svg")) if files else None
    return render(derivation, "markdown", figure_link=link), files
