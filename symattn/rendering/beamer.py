"""Render a derivation as a Beamer deck: one frame per step, each step's body its LaTeX template's.

The deck is ``beamer.latex.j2``: a title frame, then ``beamer_steps.latex.j2``, which sets each step
(``<kind>.latex.j2``, the documents' own templates) in a frame of its own. Only the headings differ from
a document: here a heading is the frame's title. A step taller than a frame continues on the next one
(``allowframebreaks``); a matrix taller than a frame is cut into blocks of rows, as pages cut it
(:mod:`.paging`, at :data:`FRAME_HEIGHT`). The frames are 16:9 (160 mm × 90 mm) at 11 pt.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

from symattn.input.errors import RenderError
from symattn.rendering.escape import ESCAPERS, MATH_TEXT_ESCAPERS
from symattn.rendering.layout import shrink_wide_displays

# pt at 10 pt: the tallest display a frame keeps whole; a taller one may break between its lines, and a
# taller matrix is cut into blocks. Beamer's 16:9 text height is 244 pt at 11 pt; each piece of a long step
# fills at most 0.75 of it (beamer_steps.latex.j2), about 165 pt at 10 pt, and a title of two lines, a head's
# subtitle and the 11 pt type take the rest
FRAME_HEIGHT = 120.0
# pt at 10 pt: a third of the frame's text width (140 mm at 11 pt), less the gaps between beamer's columns:
# the setup's three tables stand side by side where each fits it
DECK_COLUMN = 115.0


@cache
def _environment() -> jinja2.Environment:
    from symattn.rendering.environment import environment

    # a fresh LaTeX environment (not the cached one, whose headings are sections): headings are frame titles
    env = environment.__wrapped__("latex")
    env.filters["heading"] = lambda text, depth, toc=None: "\\frametitle{" + text + "}"
    return env


def render_beamer(derivation: Any) -> str:
    """The derivation as a standalone Beamer deck (LaTeX source)."""
    from symattn.rendering.figures import has_pictures
    from symattn.rendering.paging import paginate
    from symattn.rendering.phrases import Phrases, load_language
    from symattn.rendering.renderer import block_note, latex_setup

    lang = derivation.lang
    prose = load_language(lang)
    texts = list(derivation.tokens) + list(derivation.key_tokens) + [derivation.title or ""]
    template = _environment().get_template("beamer.latex.j2")
    try:
        text = template.render(
            t=Phrases(prose, ESCAPERS["latex"], lang),
            tm=Phrases(prose, MATH_TEXT_ESCAPERS["latex"], lang),
            lang=lang,
            d=derivation,
            depth=0,
            standalone=True,
            paper=derivation.paper,
            cjk_font=derivation.cjk_font,
            pictures=has_pictures(derivation),
            figure_link=None,
            deck={"column": DECK_COLUMN},
            **latex_setup(texts, lang),
        )
    except jinja2.UndefinedError as exc:
        raise RenderError(f"template beamer.latex.j2: {exc.message}") from None
    return shrink_wide_displays(paginate(text, block_note(lang), height=FRAME_HEIGHT))
