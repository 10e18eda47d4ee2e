"""Each step of a derivation as LaTeX on its own, for the web page's "copy as LaTeX" buttons.

A step is rendered by the template the whole document uses for it, with the document's context, and then
laid out as the document is (displays made breakable, wide ones shrunk), so the text copied is the text
the LaTeX document holds for that step. A numbered heading that holds math is bookmarked with hyperref's
``\texorpdfstring``; its step starts with the line that provides it where hyperref is not loaded, as the
whole fragment does, so that the step compiles pasted into any document.
"""

from __future__ import annotations

from typing import Any


def step_latex(derivation: Any) -> tuple[str, ...]:
    """The LaTeX of every step that the Markdown (and so the page) shows: all but the pictures."""
    from symattn.rendering.bookmarks import PROVIDE_TEXORPDFSTRING
    from symattn.rendering.environment import render_template
    from symattn.rendering.layout import shrink_wide_displays
    from symattn.rendering.paging import paginate
    from symattn.rendering.renderer import block_note, latex_setup

    d = derivation
    texts = list(d.tokens) + list(d.key_tokens) + [d.title or ""]
    context = dict(
        d=d,
        standalone=False,
        depth=d.heading_level - 1,
        numbered=d.numbered,
        paper=d.paper,
        cjk_font=d.cjk_font,
        pictures=False,
        figure_link=None,
        **latex_setup(texts, d.lang),
    )
    note = block_note(d.lang)
    out = []
    for step in d.steps:
        if step.kind == "picture":
            continue
        text = render_template("step", "latex", d.lang, step=step, **context)
        text = shrink_wide_displays(paginate(text, note)).strip("\n")
        out.append(f"{PROVIDE_TEXORPDFSTRING}\n{text}" if "\\texorpdfstring{" in text else text)
    return tuple(out)
