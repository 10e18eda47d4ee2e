"""How the document of a spec reads: its title, language, rows written out, paper, TeX engine, fonts,
headings and figures. None of it changes a number.

A spec file's keys are read in one table; these sit beside the attention math in
:attr:`Spec.document <symattn.input.spec.Spec.document>`. The derivation and the renderers read them;
the exact model, the float64 engine and the certificates never do (tests/test_structure.py holds them to
it). ``rounding``, ``decimals`` and ``notation`` are not here: they decide which rounded numbers a hand
chain carries forward and a check compares against, so the exact model reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from symattn.input.choices import CJK_FONTS, ENGINES, FIGURES, PAPERS
from symattn.input.reader import Reader
from symattn.input.records import record

# the spec's keys (and the command line's settings) that DocumentOptions holds
DOCUMENT_KEYS = ("title", "lang", "expand", "paper", "engine", "cjk_font", "heading_level", "numbered", "figures")


@record
class DocumentOptions:
    """A spec's document options, validated; the defaults are a spec's without those keys."""

    title: str | None = None
    lang: str = "en"
    expand: str = "focus"  # "all": every row of every product written out, not only the focus row's
    paper: str | None = None  # "a4" or "letter"; None: A4 for Chinese, Letter for English
    engine: str | None = None  # TeX engine for PDF; None: pdflatex for English in Latin-1, else xelatex
    cjk_font: str | None = None  # ctex's fontset for Chinese; None: ctex's own choice
    heading_level: int = 1  # the top heading: 1 = LaTeX \section / Markdown #, 2 one lower, 3 two lower
    numbered: bool = False  # LaTeX headings numbered (no *), so that they enter the table of contents
    figures: str = "all"  # "all": heatmaps and the token diagram; "weights": the heatmaps; "none"

    @property
    def page(self) -> str:
        """The paper a document is set on."""
        from symattn.input.choices import default_paper

        return self.paper or default_paper(self.lang)


def read_document(
    reader: Reader, data: Mapping[str, Any], title: str | None, lang: str, expand: str
) -> DocumentOptions:
    """The document options of a spec's keys: ``title``, ``lang`` and ``expand`` as the caller read them
    (among the math's keys, in the file's order of checks), then the typesetting keys, checked in order."""
    return DocumentOptions(
        title=title,
        lang=lang,
        expand=expand,
        paper=reader.choice(data["paper"], "paper", PAPERS) if "paper" in data else None,
        engine=reader.choice(data["engine"], "engine", ENGINES) if "engine" in data else None,
        cjk_font=reader.choice(data["cjk_font"], "cjk_font", CJK_FONTS) if "cjk_font" in data else None,
        heading_level=reader.heading_level(data["heading_level"], "heading_level") if "heading_level" in data else 1,
        numbered=reader.flag(data["numbered"], "numbered") if "numbered" in data else False,
        figures=reader.choice(data.get("figures", "all"), "figures", FIGURES),
    )


__all__ = ["DOCUMENT_KEYS", "DocumentOptions", "read_document"]
