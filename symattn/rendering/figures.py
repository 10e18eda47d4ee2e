"""Pictures of the weights: a heatmap of A (one panel per head) and the focus row's token diagram; and of dZ.

The derivation's ``picture`` steps hold the shown matrices; :mod:`.heatmap` and :mod:`.diagram` measure and
place them as plain figure data (:mod:`.figure_parts`), in points to the hundredth, so that every run gives
the same bytes. Templates draw the data: ``figure_<kind>.svg.j2`` (SVG, written by :mod:`.svg`, for HTML,
for the files beside Markdown, and for the web page) and ``figure_<kind>.latex.j2`` (TikZ, inside the document).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a document without pictures never loads the layout of figures
    from symattn.rendering.figure_parts import Figure


def figures(derivation: Any, step: Any) -> tuple[Figure, ...]:
    """The figures of one ``picture`` step of ``derivation``: its heatmap, and the token diagram if asked."""
    from symattn.rendering.diagram import diagram  # measured only for a document with pictures
    from symattn.rendering.heatmap import heatmap
    from symattn.rendering.phrases import load_language

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
