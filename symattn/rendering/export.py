"""Every output format of a document, in one table, and the one clock that TeX runs on.

A document is a :class:`~symattn.derivation.steps.Derivation` or a check report; :func:`export` makes it
in any format of its table (Markdown, LaTeX, PDF, HTML, Beamer, the reveal.js deck; a report also as
plain text and JSON). The command line, the web page and the Python API each call it, and keep only
their own concerns: the options and ``-o``, HTTP, the API's objects.

Every PDF is made by :func:`pdf`: latexmk under TeX's own time limit
(:data:`symattn.input.limits.LATEX_SECONDS`), which the command's ``--max-seconds`` and a web request's
time limit do not count (:func:`symattn.input.limits.paused`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from symattn.input.errors import RenderError
from symattn.input.records import record


@record
class Export:
    """A document in one format: its content, and the files that go beside it (a Markdown document's figures)."""

    content: str | bytes
    suffix: str  # of its file's name: md, tex, pdf, html, txt, json
    media: str  # its HTTP media type
    files: tuple[tuple[str, str], ...] = ()  # (name, SVG) of each figure, linked relatively from the document

    @property
    def text(self) -> str:
        """The content of a text format (a PDF's bytes are no text: take :attr:`data`)."""
        if isinstance(self.content, bytes):
            raise TypeError(f"a .{self.suffix} export is bytes, not text")
        return self.content

    @property
    def data(self) -> bytes:
        """The content as bytes: text as UTF-8, a PDF as it is."""
        return self.content if isinstance(self.content, bytes) else self.content.encode("utf-8")


@record
class _Asked:
    standalone: bool  # LaTeX: a whole document, not a fragment
    engine: str | None  # a PDF's TeX engine; None: the document's own
    beside: str | None  # Markdown: the path it is written to, whose folder takes its figures


@record
class Format:
    suffix: str
    media: str
    make: Callable[[Any, _Asked], str | bytes | tuple[str, tuple[tuple[str, str], ...]]]

    @property
    def is_text(self) -> bool:
        return self.suffix != "pdf"


def pdf(tex: str, lang: str | None, engine: str | None = None, *, fit_last_page: bool = False) -> bytes:
    """The PDF of a standalone LaTeX document: the one way any document becomes one (see the module's note).

    ``fit_last_page``: a report's few last lines join the page before (:func:`~.pdf.latex_to_pdf`).
    """
    from symattn.input.limits import paused
    from symattn.rendering.pdf import latex_to_pdf

    with paused():
        return latex_to_pdf(tex, engine=engine, lang=lang, fit_last_page=fit_last_page)


def tex_clock():
    """The clock of work that TeX runs inside (a gradebook of PDFs): --max-seconds does not count it."""
    from symattn.input.limits import paused

    return paused()


# --- a derivation -----------------------------------------------------------------


def _markdown(derivation: Any, asked: _Asked) -> str | tuple[str, tuple[tuple[str, str], ...]]:
    from symattn.rendering.renderer import render

    if asked.beside is None:
        return render(derivation, "markdown", standalone=asked.standalone)
    from symattn.rendering.svg import markdown_with_files

    return markdown_with_files(derivation, asked.beside)  # the SVG files beside it, linked from it


def _latex(derivation: Any, asked: _Asked) -> str:
    from symattn.rendering.renderer import render

    return render(derivation, "latex", standalone=asked.standalone)


def _derivation_pdf(derivation: Any, asked: _Asked) -> bytes:
    from symattn.rendering.renderer import render

    return pdf(render(derivation, "latex", standalone=True), derivation.lang, asked.engine or derivation.engine)


def _html(derivation: Any, asked: _Asked) -> str:
    from symattn.rendering.html import derivation_page

    return derivation_page(derivation)


def _beamer(derivation: Any, asked: _Asked) -> str:
    from symattn.rendering.beamer import render_beamer

    return render_beamer(derivation)


def _beamer_pdf(derivation: Any, asked: _Asked) -> bytes:
    return pdf(_beamer(derivation, asked), derivation.lang, asked.engine or derivation.engine)


def _slides(derivation: Any, asked: _Asked) -> str:
    from symattn.rendering.deck import deck_page

    return deck_page(derivation)


# --- a check report ---------------------------------------------------------------


def _report_text(fmt: str) -> Callable[[Any, _Asked], str]:
    def make(report: Any, asked: _Asked) -> str:
        from symattn.rendering.renderer import render_report

        return render_report(report, fmt, standalone=asked.standalone)

    return make


def _report_pdf(report: Any, asked: _Asked) -> bytes:
    from symattn.rendering.renderer import render_report

    tex = render_report(report, "latex", standalone=True)
    # a page or two: a last page of a few lines joins the one before
    return pdf(tex, report.lang, asked.engine or report.engine, fit_last_page=True)


def _report_html(report: Any, asked: _Asked) -> str:
    from symattn.rendering.html import report_page

    return report_page(report)


def _report_json(report: Any, asked: _Asked) -> str:
    import json

    return json.dumps(report.data(), ensure_ascii=False, indent=2) + "\n"


_TEXT = "; charset=utf-8"
MARKDOWN = ("md", "text/markdown" + _TEXT)
LATEX = ("tex", "application/x-tex" + _TEXT)
PDF = ("pdf", "application/pdf")
HTML = ("html", "text/html" + _TEXT)

# each kind of document (by its class's name, as SymPy's printers dispatch) and its formats
FORMATS: dict[str, dict[str, Format]] = {
    "Derivation": {
        "markdown": Format(*MARKDOWN, _markdown),
        "latex": Format(*LATEX, _latex),
        "pdf": Format(*PDF, _derivation_pdf),
        "html": Format(*HTML, _html),
        "beamer": Format(*LATEX, _beamer),
        "beamer-pdf": Format(*PDF, _beamer_pdf),
        "slides": Format(*HTML, _slides),
    },
    "Report": {
        "text": Format("txt", "text/plain" + _TEXT, _report_text("text")),
        "markdown": Format(*MARKDOWN, _report_text("markdown")),
        "latex": Format(*LATEX, _report_text("latex")),
        "pdf": Format(*PDF, _report_pdf),
        "html": Format(*HTML, _report_html),
        "json": Format("json", "application/json", _report_json),
    },
}


def format_of(document: Any, format: str, text: bool = False) -> Format:
    """The row of ``format`` in the table of ``document``'s kind (``text``: of its text formats only)."""
    formats = {name: row for name, row in FORMATS[type(document).__name__].items() if row.is_text or not text}
    if format not in formats:
        raise RenderError(f"unknown format {format!r}; expected one of {', '.join(formats)}")
    return formats[format]


def export(
    document: Any, format: str, *, standalone: bool = False, engine: str | None = None, beside: str | None = None
) -> Export:
    """``document`` (a derivation or a check report) in ``format``, one of its :data:`FORMATS`.

    ``standalone``: LaTeX as a whole document (a PDF always is one). ``engine``: a PDF's TeX engine, else
    the document's own. ``beside``: Markdown to be written to this path, with its figures as SVG files
    beside it (in :attr:`Export.files`) and linked from it; without it, Markdown has no figures.
    """
    row = format_of(document, format)
    made = row.make(document, _Asked(standalone, engine, beside))
    if isinstance(made, tuple):
        return Export(made[0], row.suffix, row.media, made[1])
    return Export(made, row.suffix, row.media)


__all__ = ["FORMATS", "Export", "export", "format_of", "pdf", "tex_clock"]
