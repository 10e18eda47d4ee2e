"""One self-contained HTML slide deck: the frames of the Beamer deck, shown by reveal.js, math by KaTeX.

The frames come from ``slides.markdown.j2`` (the step templates' Markdown, each frame ended by a line
holding a form feed); each frame's Markdown becomes a ``<section>`` through :mod:`.html`'s parser, its
figures inline SVG. reveal.js (``symattn/vendor/revealjs``, MIT, with its ``LICENSE``) and KaTeX are
inlined, the theme's web-font import left out, so the one file loads nothing. In the browser, before
reveal.js starts, a short script typesets the math and moves what does not fit on a slide (1280 × 720) to
a slide of its own after it, titled as the step and "continued". The same input gives the same bytes.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from symattn.input.errors import RenderError

VENDOR = Path(__file__).resolve().parents[1] / "vendor" / "revealjs"
FRAME_BREAK = "\f"  # the line that ends a frame: labels and titles refuse control characters

_HTML_LANG = {"zh": "zh-CN", "en": "en"}


def reveal_version() -> str:
    """The version of the vendored reveal.js."""
    return (VENDOR / "VERSION").read_text(encoding="ascii").strip()


@lru_cache(maxsize=1)
def _reveal() -> tuple[str, str]:
    """reveal.js (safe inside <script>) and its CSS with the white theme, which loads no font."""
    js = (VENDOR / "reveal.js").read_text(encoding="utf-8")
    js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.I)
    theme = (VENDOR / "theme" / "white.css").read_text(encoding="utf-8")
    theme, count = re.subn(r"^@import url\(\./fonts/[^)]*\);\n", "", theme, flags=re.M)
    css = (VENDOR / "reveal.css").read_text(encoding="utf-8") + "\n" + theme
    if count != 1 or re.search(r"url\((?!data:)", css) or "@import" in css:
        raise RenderError(f"the vendored reveal.js CSS in {VENDOR} has an unexpected form")
    return js, css


def frames(derivation: Any) -> list[str]:
    """The Markdown of each frame of the deck."""
    from symattn.rendering.environment import render_template
    from symattn.rendering.figures import has_pictures
    from symattn.rendering.html import FIGURE
    from symattn.rendering.renderer import latex_setup

    texts = list(derivation.tokens) + list(derivation.key_tokens) + [derivation.title or ""]
    markdown = render_template(
        "slides",
        "markdown",
        derivation.lang,
        d=derivation,
        standalone=False,
        depth=derivation.heading_level - 1,
        paper=derivation.paper,
        cjk_font=derivation.cjk_font,
        pictures=has_pictures(derivation),
        figure_link=lambda name: FIGURE + name,
        frame_break=FRAME_BREAK,
        **latex_setup(texts, derivation.lang),
    )
    pieces = re.split(r"^" + FRAME_BREAK + r"\n", markdown, flags=re.M)
    return [piece.strip() + "\n" for piece in pieces if piece.strip()]


def deck_page(derivation: Any) -> str:
    """The HTML deck of a derivation: one slide per frame, reveal.js and KaTeX inlined."""
    import markupsafe

    from symattn.rendering.escape import ESCAPERS
    from symattn.rendering.figures import all_figures
    from symattn.rendering.html import FIGURE, _environment, _katex, katex_version, markdown_to_html
    from symattn.rendering.phrases import Phrases, load_language
    from symattn.rendering.svg import svg

    figures = {FIGURE + f.id: svg(f) for f in all_figures(derivation)}
    slides, title = [], ""
    for markdown in frames(derivation):
        body, heading = markdown_to_html(markdown, figures)
        slides.append(markupsafe.Markup(body))
        title = title or heading
    katex_js, katex_css = _katex()
    reveal_js, reveal_css = _reveal()
    phrases = Phrases(load_language(derivation.lang), ESCAPERS["markdown"], derivation.lang)
    return (
        _environment()
        .get_template("slides.html.j2")
        .render(
            lang=_HTML_LANG.get(derivation.lang, derivation.lang),
            title=title or "symattn",
            slides=slides,
            continued=phrases.raw("slides.continued"),
            katex_css=markupsafe.Markup(katex_css),
            katex_js=markupsafe.Markup(katex_js),
            katex_version=katex_version(),
            reveal_css=markupsafe.Markup(reveal_css),
            reveal_js=markupsafe.Markup(reveal_js),
            reveal_version=reveal_version(),
        )
    )
