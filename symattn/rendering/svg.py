"""The figures as SVG documents: for HTML, for the files beside a Markdown document, and for the web page."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from symattn.rendering.figures import all_figures

if TYPE_CHECKING:
    from symattn.rendering.figure_parts import Figure


@lru_cache(maxsize=1)
def _svg_environment() -> Any:
    from symattn.rendering.environment import bytecode_cache, template_environment

    # every value XML-escaped; compiled once per machine, as the documents' templates are (the web page's
    # workers draw figures for every edit and compile them at start)
    return template_environment(autoescape=True, bytecode_cache=bytecode_cache())


def svg(figure: Figure) -> str:
    """The figure as one SVG document (no external file, no script): for HTML, a file, or the web page."""
    from symattn.rendering.phrases import Phrases, load_language

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
