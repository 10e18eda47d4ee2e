"""One self-contained HTML page: the Markdown rendering, with math typeset by KaTeX.

The Markdown that ``render(..., "markdown")`` (or ``render_report``) writes is
parsed by markdown-it-py (CommonMark, with tables and the dollarmath plugin for
``$…$`` and ``$$…$$``). Each formula becomes ``<span class="math">`` or
``<div class="math">`` holding its TeX, escaped; an inline script typesets them
with the vendored KaTeX (``symattn/vendor/katex``) when the page loads. KaTeX's
JavaScript and CSS are inlined, its woff2 fonts are ``data:`` URLs, so the one
file works offline. The same input gives the same bytes.

Figures are inline SVG. The Markdown links each one as an image whose address is ``symattn-figure:<id>``
(our own template writes it; labels and titles are escaped, so no user text makes an image); the image
rule swaps exactly those addresses for the SVG that :func:`~symattn.rendering.figures.svg` drew, and
shows any other image as its text only.
"""

from __future__ import annotations

import base64
import html
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from symattn.input.errors import RenderError

VENDOR = Path(__file__).resolve().parents[1] / "vendor" / "katex"

_HTML_LANG = {"zh": "zh-CN", "en": "en"}


def katex_version() -> str:
    """The version of the vendored KaTeX."""
    return (VENDOR / "VERSION").read_text(encoding="ascii").strip()


@lru_cache(maxsize=1)
def _parser():
    try:
        from markdown_it import MarkdownIt
        from mdit_py_plugins.dollarmath import dollarmath_plugin
    except ImportError:  # pragma: no cover - both are dependencies
        raise RenderError(
            "markdown-it-py and mdit-py-plugins are needed for HTML output; "
            "install them with: pip install markdown-it-py mdit-py-plugins"
        ) from None
    # html=False: any HTML in the text (a label such as "<b>") is shown, never run
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")
    md.use(
        dollarmath_plugin,
        allow_labels=False,
        allow_space=True,
        allow_digits=True,
        allow_blank_lines=False,
        double_inline=False,
    )
    # "$$" on the line after a paragraph starts display math (as GitHub reads it): let the rule end a paragraph
    rule = next(r.fn for r in md.block.ruler.__rules__ if r.name == "math_block")
    md.block.ruler.at("math_block", _interrupting(rule), {"alt": ["paragraph", "reference", "blockquote", "list"]})

    def inline(self, tokens, idx, options, env) -> str:
        return f'<span class="math">{html.escape(tokens[idx].content, quote=False)}</span>'

    def block(self, tokens, idx, options, env) -> str:
        return f'<div class="math display">{html.escape(tokens[idx].content.strip(), quote=False)}</div>\n'

    def table_open(self, tokens, idx, options, env) -> str:  # wide tables scroll in their own box
        return '<div class="table">\n' + self.renderToken(tokens, idx, options, env)

    def table_close(self, tokens, idx, options, env) -> str:
        return self.renderToken(tokens, idx, options, env) + "</div>\n"

    def softbreak(self, tokens, idx, options, env) -> str:
        # a line break between two CJK characters is no space in Chinese (browsers would show one)
        before = tokens[idx - 1].content[-1:] if idx > 0 else ""
        after = tokens[idx + 1].content[:1] if idx + 1 < len(tokens) else ""
        return "" if _is_cjk(before) and _is_cjk(after) else "\n"

    def image(self, tokens, idx, options, env) -> str:
        figure = env.get("figures", {}).get(tokens[idx].attrGet("src"))
        if figure is not None:
            return f'<span class="figure">{figure}</span>'
        return html.escape(tokens[idx].content, quote=False)  # an offline page loads nothing

    md.add_render_rule("math_inline", inline)
    md.add_render_rule("image", image)
    md.add_render_rule("softbreak", softbreak)
    md.add_render_rule("math_block", block)
    md.add_render_rule("table_open", table_open)
    md.add_render_rule("table_close", table_close)
    return md


def _interrupting(rule):
    """A block rule that may end a paragraph: asked silently, it only says whether it matches."""

    def check(state, start: int, end: int, silent: bool) -> bool:
        if not silent:
            return rule(state, start, end, False)
        line, count = state.line, len(state.tokens)
        found = rule(state, start, end, False)
        del state.tokens[count:]
        state.line = line
        return found

    return check


def _is_cjk(ch: str) -> bool:
    return bool(ch) and ord(ch) >= 0x2E80


FIGURE = "symattn-figure:"  # the address of a figure in the Markdown that becomes a page


def markdown_to_html(markdown: str, figures: dict[str, str] | None = None) -> tuple[str, str]:
    """The body HTML of rendered Markdown, and the plain text of its first heading (for the title).

    ``figures``: the SVG of each figure, by its address (``symattn-figure:<id>``), to be set inline.
    """
    md = _parser()
    tokens = md.parse(markdown)
    title = ""
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            title = "".join(
                child.content if child.type != "softbreak" else " " for child in tokens[i + 1].children or []
            )
            break
    return md.renderer.render(tokens, md.options, {"figures": figures or {}}), title


@lru_cache(maxsize=1)
def _katex() -> tuple[str, str]:
    """KaTeX's JavaScript (safe inside <script>) and CSS (fonts as woff2 data: URLs)."""
    js = (VENDOR / "katex.min.js").read_text(encoding="utf-8")
    js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.I)
    css = (VENDOR / "katex.min.css").read_text(encoding="utf-8")

    def font(match: re.Match) -> str:
        name = match.group(1)
        data = base64.b64encode((VENDOR / "fonts" / f"{name}.woff2").read_bytes()).decode("ascii")
        return f'src:url(data:font/woff2;base64,{data}) format("woff2")'

    # each @font-face lists woff2, woff and ttf; keep the woff2 only, inlined
    css, count = re.subn(
        r'src:url\(fonts/([A-Za-z0-9_-]+)\.woff2\) format\("woff2"\)'
        r'(?:,url\(fonts/[^)]+\) format\("[a-z]+"\))*',
        font,
        css,
    )
    if not count or "url(fonts/" in css:
        raise RenderError(f"the vendored KaTeX CSS in {VENDOR} has an unexpected form")
    return js, css


def _environment():
    from symattn.rendering.environment import template_environment

    return template_environment(autoescape=True)


def page(
    markdown: str,
    lang: str,
    title: str | None = None,
    figures: dict[str, str] | None = None,
    layout: str | None = None,
) -> str:
    """One self-contained HTML page of rendered Markdown (``lang`` is ``"zh"`` or ``"en"``), with ``figures``
    (SVG by address) inline. ``layout``: ``"report"``, whose first table is a check report's (wider, places
    unbroken, closed forms at display size), or ``"gradebook"`` (as wide as the window, a compact table)."""
    import markupsafe

    body, heading = markdown_to_html(markdown, figures)
    js, css = _katex()
    template = _environment().get_template("page.html.j2")
    return template.render(
        lang=_HTML_LANG.get(lang, lang),
        title=title or heading or "symattn",
        body=markupsafe.Markup(body),
        katex_css=markupsafe.Markup(css),
        katex_js=markupsafe.Markup(js),
        katex_version=katex_version(),
        layout=layout,
    )


def derivation_page(derivation: Any) -> str:
    """The HTML page of a derivation, its figures inline SVG."""
    from symattn.rendering.figures import all_figures
    from symattn.rendering.renderer import render
    from symattn.rendering.svg import svg

    figures = {FIGURE + f.id: svg(f) for f in all_figures(derivation)}
    markdown = render(derivation, "markdown", figure_link=(lambda name: FIGURE + name) if figures else None)
    return page(markdown, derivation.lang, figures=figures)


def report_page(report: Any) -> str:
    """The HTML page of a check report."""
    from symattn.rendering.renderer import render_report

    return page(render_report(report, "markdown"), report.lang, layout="report")
